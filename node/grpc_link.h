#pragma once
// The node's link to a scheduler on another process or host over gRPC (jobs with TLS; see
// node/remote_link.h): one bidirectional stream (Scheduler.Session) carrying NodeEvents up
// and NodeCommands down.
//
// gRPC runs the stream's callbacks on its own threads; they only post to the io_context
// (the node's strand). Send() may be called from the io_context's thread at any time.
// Destroying the link cancels the stream and waits for gRPC to let go of it.

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "gangrun/v1/session.grpc.pb.h"
#include "node/node.h"
#include "node/remote_link.h"
#include "rpc/client_stream.h"

namespace gangrun::node {

class GrpcSchedulerLink : public RemoteSchedulerLink {
 public:
  struct Options {
    std::string target;  // host:port
    std::string token;
    std::shared_ptr<grpc::ChannelCredentials> credentials;  // null = insecure
    std::string tls_target_name;  // overrides the name checked in the server certificate
    // A keepalive ping every `keepalive` (the scheduler counts them as heartbeats: see
    // scheduler/liveness.cc), unanswered for `keepalive_timeout`: the scheduler is lost.
    common::Duration keepalive = std::chrono::seconds(1);
    common::Duration keepalive_timeout = std::chrono::seconds(4);
    // A channel to share with other links (the rendezvous benchmark's simulated nodes: each
    // keeps its own session stream); null = a channel (and connection) of this link's own.
    std::shared_ptr<grpc::Channel> channel;
  };
  // A node's keepalive for a job's --heartbeat_interval and --node_timeout: a ping every
  // heartbeat interval, answered within KeepaliveTimeoutFor.
  static void SetKeepalive(Options& options, common::Duration heartbeat_interval,
                           common::Duration node_timeout) {
    options.keepalive = heartbeat_interval;
    options.keepalive_timeout = KeepaliveTimeoutFor(heartbeat_interval, node_timeout);
  }
  // While the stream waits for the scheduler, how often the link looks at a failing channel,
  // and how many definite answers (see CheckHandshake) make it give up.
  static constexpr std::chrono::milliseconds kHandshakeCheckPeriod{500};
  static constexpr int kMismatchesToGiveUp = 2;
  static constexpr int kTlsFailuresToGiveUp = 3;

  GrpcSchedulerLink(boost::asio::io_context& io, Options options);
  ~GrpcSchedulerLink() override;

  void Connect(CommandHandler on_command, LostHandler on_lost) override;
  void Send(const v1::NodeEvent& event) override;

 private:
  using Stream = rpc::ClientStream<v1::NodeEvent, v1::NodeCommand>;
  // A scheduler that accepts TCP connections but not our handshake (TLS on one side only,
  // a certificate that does not verify, another service on the port) would otherwise be
  // waited for until the cluster timeout, as if it were not there yet.
  void WatchHandshake();
  void CheckHandshake();
  void GiveUp(const std::string& why);
  boost::asio::io_context& io_;
  Options options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Scheduler::Stub> stub_;
  std::unique_ptr<Stream> stream_;
  LostHandler on_lost_;
  std::unique_ptr<boost::asio::steady_timer> handshake_timer_;
  int mismatches_ = 0;    // the scheduler speaks TLS and we do not, or the other way round
  int tls_failures_ = 0;  // both speak TLS, and the handshake still fails
  bool connected_ = false;
};

}  // namespace gangrun::node
