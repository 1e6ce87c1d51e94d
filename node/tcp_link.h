#pragma once
// One connection of a plaintext job's node session: gangrun's own framing (rpc/frame_format.h)
// over TCP to the scheduler's port, which the scheduler's SessionPort serves on its strand
// (docs/WIRE.md). node/session_link.h decides when to make one.
//
// The connection is bounded: connecting takes at most `connect_timeout`, the handshake at most
// `handshake_timeout`. The handshake is a challenge-response (rpc/session_auth.h): the token
// never crosses the wire, the node checks that the scheduler knows it too, and a launcher with
// a token refuses a scheduler without one. Every frame after it is sealed.
//
// Everything runs on the io_context's thread: construct, Open, Send and destroy there; the
// handlers run there too, and may destroy the connection.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <optional>
#include <string>

#include "node/session_link.h"
#include "rpc/frame_connection.h"
#include "rpc/session_auth.h"

namespace gangrun::node {

class TcpSessionConnection : public SessionConnection {
 public:
  struct Options {
    std::string target;  // host:port
    std::string token;   // "" = none
    common::Duration connect_timeout = std::chrono::seconds(1);
    common::Duration handshake_timeout = std::chrono::seconds(10);
  };

  TcpSessionConnection(boost::asio::io_context& io, Options options, Handlers handlers);
  ~TcpSessionConnection() override;

  void Open(uint64_t session, const std::string& key, uint64_t acked) override;
  void SendEvent(const v1::NodeEvent& event) override;
  void SendPing(uint64_t acked, bool sparse_pongs) override;
  std::optional<common::Duration> SinceLastAck() const override;
  common::Duration QuietPongTimeout() const override;

  // A factory for SessionLink.
  static ConnectionFactory Factory(boost::asio::io_context& io, Options options);

 private:
  // A scheduler that does not know this launcher's token, or one this launcher's is refused by.
  bool Unauthenticated(v1::SessionRefused refused);
  void Connect(const boost::asio::ip::tcp::resolver::results_type& endpoints);
  void OnConnected(boost::asio::ip::tcp::socket socket);
  bool OnFrame(rpc::FrameType type, std::string_view payload);
  bool OnChallenge(std::string_view payload);
  bool OnAccepted(std::string_view payload);
  bool OnRefused(std::string_view payload);
  bool OnSealed(rpc::FrameType type, std::string_view payload);
  void Seal(rpc::FrameType type, const google::protobuf::MessageLite& message);
  // Ends the connection once with `end`; false, for frame handlers to return.
  bool Finish(End end, const std::string& why);

  boost::asio::io_context& io_;
  Options options_;
  Handlers handlers_;
  boost::asio::ip::tcp::resolver resolver_;
  // Shared with the pending connect: the operation reads its socket when it completes, even
  // when it completes aborted after this connection is gone.
  std::shared_ptr<boost::asio::ip::tcp::socket> connecting_;
  std::shared_ptr<rpc::FrameConnection> conn_;
  boost::asio::steady_timer timer_;  // the connect, then the handshake, bound
  rpc::Handshake handshake_;
  std::string token_key_;
  std::string key_;  // the token key (a new session) or the session's resume key
  uint64_t acked_ = 0;
  bool challenged_ = false;
  bool opened_ = false;  // a new session's opening sent: its events may follow before acceptance
  bool accepted_ = false;
  bool ended_ = false;
  // A quiet session (docs/WIRE.md): ticks for pings, each turn's events followed by a ping
  // padded to the watermark; 0: pings.
  uint32_t quiet_watermark_ = 0;
  common::Duration quiet_pong_timeout_{0};
  uint64_t last_acked_ = 0;  // the last command this connection's pings may acknowledge
  bool padding_due_ = false;
  std::optional<rpc::FrameSealer> sealer_;
  std::optional<rpc::FrameOpener> opener_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace gangrun::node
