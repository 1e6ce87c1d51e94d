#include "node/tcp_link.h"

#include <fcntl.h>

#include <boost/asio/connect.hpp>

#include "common/net.h"

namespace gangrun::node {

using boost::asio::ip::tcp;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

TcpSchedulerLink::TcpSchedulerLink(boost::asio::io_context& io, Options options)
    : io_(io),
      options_(std::move(options)),
      resolver_(io),
      retry_timer_(io),
      ping_timer_(io),
      answer_timer_(io) {}

TcpSchedulerLink::~TcpSchedulerLink() {
  *alive_ = false;
  resolver_.cancel();
  retry_timer_.cancel();
  ping_timer_.cancel();
  answer_timer_.cancel();
  if (connecting_) {
    boost::system::error_code ignored;
    connecting_->close(ignored);
  }
  if (conn_) conn_->Close();
}

void TcpSchedulerLink::Connect(CommandHandler on_command, LostHandler on_lost) {
  on_command_ = std::move(on_command);
  on_lost_ = std::move(on_lost);
  auto target = common::ParseHostPort(options_.target, "the scheduler's address");
  if (!target.ok()) return Lose(std::string(target.status().message()), false);
  host_ = target->host;
  port_ = std::to_string(target->port);
  Attempt();
}

void TcpSchedulerLink::Attempt() {
  resolver_.async_resolve(
      host_, port_, tcp::resolver::numeric_service,
      [this, alive = alive_](const boost::system::error_code& error,
                             tcp::resolver::results_type endpoints) {
        if (!*alive || lost_) return;
        if (error) return Retry();
        connecting_ = std::make_unique<tcp::socket>(io_);
        boost::asio::async_connect(
            *connecting_, endpoints,
            [this, alive](const boost::system::error_code& connect_error, const tcp::endpoint&) {
              if (!*alive || lost_) return;
              auto socket = std::move(connecting_);
              if (connect_error) return Retry();  // nothing listens yet
              OnConnected(std::move(*socket));
            });
      });
}

void TcpSchedulerLink::Retry() {
  retry_timer_.expires_after(backoff_);
  backoff_ = std::min(duration_cast<milliseconds>(backoff_ * 8 / 5), kMaxBackoff);
  retry_timer_.async_wait([this, alive = alive_](const boost::system::error_code& error) {
    if (!error && *alive && !lost_) Attempt();
  });
}

void TcpSchedulerLink::OnConnected(tcp::socket socket) {
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  fcntl(socket.native_handle(), F_SETFD, FD_CLOEXEC);  // Asio does not set it
  conn_ = std::make_shared<rpc::FrameConnection>(std::move(socket));
  v1::SessionOpen open;
  open.set_token(options_.token);
  std::string opening(rpc::kSessionMagic);
  rpc::AppendFrame(opening, rpc::FrameType::kOpen, &open);
  conn_->SendBytes(opening + unaccepted_);
  conn_->Start([this](rpc::FrameType type, std::string_view payload) { OnFrame(type, payload); },
               [this](const std::string& why, bool) { OnEnd(why); });
  ping_sent_ = last_received_ = {};
  Ping();
}

void TcpSchedulerLink::OnFrame(rpc::FrameType type, std::string_view payload) {
  last_received_ = std::chrono::steady_clock::now();
  switch (type) {
    case rpc::FrameType::kAccepted:
      accepted_ = true;
      mismatches_ = 0;
      std::string().swap(unaccepted_);
      return;
    case rpc::FrameType::kRefused: {
      v1::SessionRefused refused;
      refused.ParseFromArray(payload.data(), static_cast<int>(payload.size()));
      return Lose(refused.reason().empty() ? "the scheduler refused the session" : refused.reason(),
                  refused.unauthenticated());
    }
    case rpc::FrameType::kCommand: {
      v1::NodeCommand command;
      if (!command.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
        conn_->Close();
        return OnEnd("a malformed command");
      }
      on_command_(command);
      return;
    }
    case rpc::FrameType::kPong:
      return;
    default:
      conn_->Close();
      return OnEnd("an unexpected frame");
  }
}

void TcpSchedulerLink::OnEnd(const std::string& why) {
  if (lost_) return;
  ping_timer_.cancel();
  answer_timer_.cancel();
  conn_.reset();
  if (accepted_) {
    return Lose(why == rpc::kPeerClosed
                    ? "the scheduler closed the session"
                    : "the connection to the scheduler broke (" + why + ")",
                false);
  }
  // Closed before the session was accepted: by something that is not a plaintext gangrun
  // scheduler, or by one that is shutting down. Twice in a row is an answer.
  if (++mismatches_ >= kMismatchesToGiveUp) {
    return Lose("the scheduler at " + options_.target +
                    " expects TLS (or is not a gangrun scheduler), but this launcher does not "
                    "use it (give it the job's --tls_ca/--tls_cert/--tls_key)",
                false);
  }
  Retry();
}

// Every keepalive: a ping (the node's heartbeat). The oldest ping still unanswered is timed:
// the scheduler is lost when nothing arrives within the keepalive timeout of it.
void TcpSchedulerLink::Ping() {
  if (!conn_ || lost_) return;
  conn_->Send(rpc::FrameType::kPing);
  if (last_received_ >= ping_sent_) {
    ping_sent_ = std::chrono::steady_clock::now();
    answer_timer_.expires_after(options_.keepalive_timeout);
    answer_timer_.async_wait([this, alive = alive_](const boost::system::error_code& error) {
      if (error || !*alive || lost_ || !conn_ || last_received_ >= ping_sent_) return;
      const auto silent = duration_cast<milliseconds>(options_.keepalive_timeout).count();
      Lose("the scheduler did not answer for " + std::to_string(silent) + " ms", false);
    });
  }
  ping_timer_.expires_after(options_.keepalive);
  ping_timer_.async_wait([this, alive = alive_](const boost::system::error_code& error) {
    if (!error && *alive) Ping();
  });
}

void TcpSchedulerLink::Send(const v1::NodeEvent& event) {
  if (lost_) return;
  // Kept until the scheduler accepts the session, for the next connection if this one fails
  // (heartbeats need not wait: the session itself is a sign of life).
  if (!accepted_ && !event.has_heartbeat()) {
    rpc::AppendFrame(unaccepted_, rpc::FrameType::kEvent, &event);
  }
  if (conn_) conn_->Send(rpc::FrameType::kEvent, &event);
}

void TcpSchedulerLink::Lose(const std::string& reason, bool unauthenticated) {
  if (lost_) return;
  lost_ = true;
  retry_timer_.cancel();
  ping_timer_.cancel();
  answer_timer_.cancel();
  if (conn_) conn_->Close();
  if (on_lost_) on_lost_(reason, unauthenticated);
}

}  // namespace gangrun::node
