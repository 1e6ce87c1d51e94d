#pragma once
// The node's link to a scheduler on another process or host for a plaintext job: gangrun's
// own framing (rpc/frames.h) over one TCP connection to the scheduler's port, which the
// scheduler's SessionPort serves on its strand.
//
// The link connects (again and again, 100 ms to 500 ms apart, while nothing listens), opens
// the session with the job's token and sends what the node sent meanwhile. A ping every
// `keepalive` is the node's heartbeat (it also proves this event loop runs); a ping without
// an answer within `keepalive_timeout` loses the scheduler. A peer that closes the connection
// before accepting the session twice is not a plaintext gangrun scheduler (TLS, most likely).
//
// Everything runs on the io_context's thread: construct, Connect, Send and destroy there.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <string>

#include "node/remote_link.h"
#include "rpc/frames.h"

namespace gangrun::node {

class TcpSchedulerLink : public RemoteSchedulerLink {
 public:
  struct Options {
    std::string target;  // host:port
    std::string token;
    common::Duration keepalive = std::chrono::seconds(1);
    common::Duration keepalive_timeout = std::chrono::seconds(4);
  };
  static constexpr std::chrono::milliseconds kInitialBackoff{100};
  static constexpr std::chrono::milliseconds kMaxBackoff{500};
  static constexpr int kMismatchesToGiveUp = 2;

  TcpSchedulerLink(boost::asio::io_context& io, Options options);
  ~TcpSchedulerLink() override;

  void Connect(CommandHandler on_command, LostHandler on_lost) override;
  void Send(const v1::NodeEvent& event) override;

 private:
  void Attempt();
  void Retry();
  void OnConnected(boost::asio::ip::tcp::socket socket);
  void OnFrame(rpc::FrameType type, std::string_view payload);
  void OnEnd(const std::string& why);
  void Ping();
  void Lose(const std::string& reason, bool unauthenticated);

  boost::asio::io_context& io_;
  Options options_;
  std::string host_, port_;
  CommandHandler on_command_;
  LostHandler on_lost_;
  boost::asio::ip::tcp::resolver resolver_;
  std::unique_ptr<boost::asio::ip::tcp::socket> connecting_;
  std::shared_ptr<rpc::FrameConnection> conn_;
  boost::asio::steady_timer retry_timer_;
  boost::asio::steady_timer ping_timer_;
  boost::asio::steady_timer answer_timer_;
  std::string unaccepted_;  // the frames sent before the scheduler accepted the session
  std::chrono::milliseconds backoff_ = kInitialBackoff;
  std::chrono::steady_clock::time_point ping_sent_{}, last_received_{};
  int mismatches_ = 0;
  bool accepted_ = false;
  bool lost_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace gangrun::node
