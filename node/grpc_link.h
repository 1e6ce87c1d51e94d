#pragma once
// One connection of a node session for a job with TLS: a gRPC stream (Scheduler.Session) on
// a channel of its own, so that a resume goes out on a new TCP connection. The stream opens
// with SessionStart; the scheduler answers SessionOpened (or refuses), then NodeEvents go up
// and NodeCommands down. node/session_link.h decides when to make one.
//
// gRPC runs the stream's callbacks on its own threads; they only post to the io_context.
// Everything else runs on the io_context's thread; the handlers too, and they may destroy the
// connection (which cancels the stream and waits for gRPC to let go of it).

#include <grpcpp/grpcpp.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <string>

#include "gangrun/v1/session.grpc.pb.h"
#include "node/session_link.h"
#include "rpc/client_stream.h"

namespace gangrun::node {

class GrpcSessionConnection : public SessionConnection {
 public:
  struct Options {
    std::string target;  // host:port
    std::string token;
    std::shared_ptr<grpc::ChannelCredentials> credentials;  // null = insecure
    std::string tls_target_name;  // overrides the name checked in the server certificate
    // gRPC's own keepalive on the channel, which must not close it before the session link
    // gives up (its pings are the session's heartbeats).
    common::Duration keepalive = std::chrono::seconds(1);
    common::Duration keepalive_timeout = std::chrono::seconds(10);
    // A resume's bound, from the attempt to the scheduler's answer.
    common::Duration attempt_timeout = std::chrono::seconds(2);
    // A channel to share with other connections (the rendezvous benchmark's simulated nodes);
    // null = a channel (and TCP connection) of this connection's own.
    std::shared_ptr<grpc::Channel> channel;
  };
  // While a new session's stream waits for the scheduler, how often the connection looks at a
  // failing channel, and how many definite answers (see CheckHandshake) make it give up.
  static constexpr std::chrono::milliseconds kHandshakeCheckPeriod{500};
  static constexpr int kMismatchesToGiveUp = 2;
  static constexpr int kTlsFailuresToGiveUp = 3;

  GrpcSessionConnection(boost::asio::io_context& io, Options options, Handlers handlers);
  ~GrpcSessionConnection() override;

  void Open(uint64_t session, const std::string& key, uint64_t acked) override;
  void SendEvent(const v1::NodeEvent& event) override;
  void SendPing(uint64_t acked, bool sparse_pongs) override;

  static ConnectionFactory Factory(boost::asio::io_context& io, Options options);

 private:
  using Stream = rpc::ClientStream<v1::NodeEvent, v1::NodeCommand>;
  void OnCommand(const v1::NodeCommand& command);
  void OnDone(const grpc::Status& status);
  // A scheduler that accepts TCP connections but not our handshake (TLS on one side only, a
  // certificate that does not verify, another service on the port) would otherwise be waited
  // for until the cluster timeout, as if it were not there yet.
  void WatchHandshake();
  void CheckHandshake();
  void Finish(End end, const std::string& why);
  void Refuse(const v1::SessionRefused& refused);

  boost::asio::io_context& io_;
  Options options_;
  Handlers handlers_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Scheduler::Stub> stub_;
  std::unique_ptr<Stream> stream_;
  boost::asio::steady_timer timer_;  // the handshake watch, or a resume's bound
  uint64_t session_ = 0;
  std::string key_;
  bool opened_ = false;
  bool ended_ = false;
  int mismatches_ = 0;    // the scheduler speaks TLS and we do not, or the other way round
  int tls_failures_ = 0;  // both speak TLS, and the handshake still fails
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace gangrun::node
