#include "node/tcp_link.h"

#include <fcntl.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>

#include "common/net.h"

namespace gangrun::node {

using boost::asio::ip::tcp;

TcpSessionConnection::TcpSessionConnection(boost::asio::io_context& io, Options options,
                                           Handlers handlers)
    : io_(io),
      options_(std::move(options)),
      handlers_(std::move(handlers)),
      resolver_(io),
      timer_(io),
      token_key_(rpc::TokenKey(options_.token)) {}

TcpSessionConnection::~TcpSessionConnection() {
  *alive_ = false;
  resolver_.cancel();
  timer_.cancel();
  if (connecting_) {
    boost::system::error_code ignored;
    connecting_->close(ignored);
  }
  if (conn_) conn_->Close();
}

ConnectionFactory TcpSessionConnection::Factory(boost::asio::io_context& io, Options options) {
  return [&io, options](Handlers handlers) -> std::unique_ptr<SessionConnection> {
    return std::make_unique<TcpSessionConnection>(io, options, std::move(handlers));
  };
}

void TcpSessionConnection::Open(uint64_t session, const std::string& key, uint64_t acked) {
  handshake_.resume = session;
  key_ = session != 0 ? key : token_key_;
  acked_ = acked;
  auto target = common::ParseHostPort(options_.target, "the scheduler's address");
  if (!target.ok()) {
    // Posted: a handler must not run inside Open.
    boost::asio::post(io_, [this, alive = alive_, why = std::string(target.status().message())] {
      if (*alive) Finish(End::kFailed, why);
    });
    return;
  }
  timer_.expires_after(options_.connect_timeout);
  timer_.async_wait([this, alive = alive_](const boost::system::error_code& error) {
    if (error || !*alive || conn_) return;
    Finish(End::kTimedOut, "connecting took longer than " +
                               std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  options_.connect_timeout)
                                                  .count()) +
                               " ms");
  });
  // A numeric address is connected to at once; a name goes through the resolver's thread.
  boost::system::error_code not_numeric;
  const auto address = boost::asio::ip::make_address(target->host, not_numeric);
  if (!not_numeric) {
    return Connect(tcp::resolver::results_type::create(
        tcp::endpoint(address, static_cast<unsigned short>(target->port)), target->host,
        std::to_string(target->port)));
  }
  resolver_.async_resolve(target->host, std::to_string(target->port),
                          tcp::resolver::numeric_service,
                          [this, alive = alive_](const boost::system::error_code& error,
                                                 tcp::resolver::results_type endpoints) {
                            if (!*alive || ended_) return;
                            if (error)
                              return (void)Finish(End::kConnectionRefused, error.message());
                            Connect(endpoints);
                          });
}

void TcpSessionConnection::Connect(const tcp::resolver::results_type& endpoints) {
  connecting_ = std::make_shared<tcp::socket>(io_);
  boost::asio::async_connect(
      *connecting_, endpoints,
      [this, alive = alive_, socket = connecting_](const boost::system::error_code& connect_error,
                                                   const tcp::endpoint&) {
        if (!*alive || ended_) return;
        connecting_.reset();
        if (connect_error == boost::asio::error::connection_refused) {
          return (void)Finish(End::kConnectionRefused, connect_error.message());
        }
        if (connect_error) return (void)Finish(End::kFailed, connect_error.message());
        OnConnected(std::move(*socket));
      });
}

void TcpSessionConnection::OnConnected(tcp::socket socket) {
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  fcntl(socket.native_handle(), F_SETFD, FD_CLOEXEC);  // Asio does not set it
  conn_ = std::make_shared<rpc::FrameConnection>(std::move(socket));
  handshake_.node_nonce = rpc::RandomBytes(rpc::kNonceBytes);
  v1::SessionHello hello;
  hello.set_nonce(handshake_.node_nonce);
  hello.set_resume(handshake_.resume);
  hello.set_has_token(!options_.token.empty());
  std::string opening(rpc::kSessionMagic);
  rpc::AppendFrame(opening, rpc::FrameType::kHello, hello.SerializeAsString());
  conn_->SendBytes(opening);
  conn_->Start(
      [this](rpc::FrameType type, std::string_view payload) { return OnFrame(type, payload); },
      [this](const std::string& why, bool malformed) {
        if (accepted_) return (void)Finish(malformed ? End::kFailed : End::kClosed, why);
        Finish(challenged_ || malformed ? End::kFailed : End::kNotAScheduler, why);
      });
  timer_.expires_after(options_.handshake_timeout);
  timer_.async_wait([this, alive = alive_](const boost::system::error_code& error) {
    if (error || !*alive || accepted_) return;
    Finish(End::kTimedOut, "the scheduler did not finish the handshake in time");
  });
}

bool TcpSessionConnection::OnFrame(rpc::FrameType type, std::string_view payload) {
  if (type == rpc::FrameType::kRefused && !accepted_) return OnRefused(payload);
  if (!challenged_) {
    if (type != rpc::FrameType::kChallenge) return Finish(End::kFailed, "no challenge");
    return OnChallenge(payload);
  }
  return OnSealed(type, payload);
}

bool TcpSessionConnection::OnChallenge(std::string_view payload) {
  v1::SessionChallenge challenge;
  if (!challenge.ParseFromArray(payload.data(), static_cast<int>(payload.size())) ||
      challenge.nonce().size() != rpc::kNonceBytes) {
    return Finish(End::kFailed, "a malformed challenge");
  }
  challenged_ = true;
  handshake_.scheduler_nonce = challenge.nonce();
  handshake_.run_id = challenge.run_id();
  const std::string at = "the scheduler at " + options_.target;
  v1::SessionRefused refused;
  refused.set_unauthenticated(true);
  if (!options_.token.empty() && !challenge.token_required()) {
    refused.set_reason(at +
                       " has no token, but this launcher has one (a token mismatch: give "
                       "both the same --token_file, or neither)");
  } else if (options_.token.empty() && challenge.token_required()) {
    refused.set_reason(at +
                       " requires the job's token, and this launcher has none "
                       "(--token_file or GANGRUN_TOKEN)");
  }
  if (!refused.reason().empty()) return Unauthenticated(refused);
  v1::SessionOpen open;
  open.set_proof(rpc::NodeProof(key_, handshake_));
  open.set_acked(acked_);
  // Keeping quiet needs the kernel's ACKs to judge the path by.
  open.set_can_keep_quiet(conn_->SinceLastAck().has_value());
  // A new session's join goes with its opening (what it says is not secret, and nothing the
  // scheduler answers counts before its acceptance proves it knows the token); a resume waits
  // for the acceptance, which says what the scheduler has.
  const bool new_session = handshake_.resume == 0;
  open.set_events_follow(new_session);
  conn_->Send(rpc::FrameType::kOpen, open.SerializeAsString());
  const rpc::FrameKeys keys = rpc::DeriveFrameKeys(key_, handshake_);
  sealer_.emplace(keys.node_to_scheduler);
  opener_.emplace(keys.scheduler_to_node);
  if (!new_session || !handlers_.on_opened) return true;
  opened_ = true;
  auto alive = alive_;
  auto on_opened = handlers_.on_opened;  // its events are queued behind the opening
  on_opened();
  return *alive && !ended_;
}

bool TcpSessionConnection::OnRefused(std::string_view payload) {
  v1::SessionRefused refused;
  refused.ParseFromArray(payload.data(), static_cast<int>(payload.size()));
  refused.set_reason(refused.reason().substr(0, 1024));
  ended_ = true;
  conn_->Close();
  timer_.cancel();
  auto on_refused = handlers_.on_refused;  // the handler may destroy this connection
  on_refused(refused);
  return false;
}

bool TcpSessionConnection::Unauthenticated(v1::SessionRefused refused) {
  ended_ = true;
  timer_.cancel();
  conn_->Close();
  auto on_refused = handlers_.on_refused;  // the handler may destroy this connection
  on_refused(refused);
  return false;
}

bool TcpSessionConnection::OnSealed(rpc::FrameType type, std::string_view payload) {
  std::string_view body;
  const bool opened = opener_->Open(type, payload, &body);
  auto alive = alive_;
  if (!accepted_) {
    // The scheduler proves itself only now: an acceptance sealed with another key, or without
    // the proof of this token, comes from a scheduler that does not know it.
    v1::SessionAccepted accepted;
    if (opened && type == rpc::FrameType::kAccepted &&
        !accepted.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
      return Finish(End::kFailed, "a malformed acceptance");
    }
    if (!opened || type != rpc::FrameType::kAccepted ||
        !rpc::MacsEqual(accepted.proof(), rpc::SchedulerProof(token_key_, handshake_))) {
      v1::SessionRefused refused;
      refused.set_unauthenticated(true);
      refused.set_reason("the scheduler at " + options_.target +
                         " does not know this launcher's token (a token mismatch)");
      return Unauthenticated(refused);
    }
    accepted_ = true;
    quiet_watermark_ = accepted.quiet_watermark();
    quiet_pong_timeout_ = std::chrono::milliseconds(accepted.quiet_pong_timeout_ms());
    last_acked_ = acked_;
    timer_.cancel();
    conn_->set_max_payload(rpc::kMaxFramePayload);
    const std::string key = handshake_.resume != 0 ? key_ : rpc::ResumeKey(token_key_, handshake_);
    auto on_accepted = handlers_.on_accepted;
    on_accepted(accepted.session(), key, accepted.acked());
    return *alive && !ended_;
  }
  if (!opened) return Finish(End::kFailed, "a forged frame");
  switch (type) {
    case rpc::FrameType::kCommand: {
      v1::NodeCommand command;
      if (!command.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
        return Finish(End::kFailed, "a malformed command");
      }
      last_acked_ = std::max(last_acked_, command.seq());
      auto on_command = handlers_.on_command;
      on_command(command);
      return *alive && !ended_;
    }
    case rpc::FrameType::kPong: {
      v1::SessionAck ack;
      if (!ack.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
        return Finish(End::kFailed, "a malformed pong");
      }
      auto on_pong = handlers_.on_pong;
      on_pong(ack.acked());
      return *alive && !ended_;
    }
    default:
      return Finish(End::kFailed,
                    "an unexpected frame (type " + std::to_string(static_cast<int>(type)) + ")");
  }
}

void TcpSessionConnection::Seal(rpc::FrameType type, const google::protobuf::MessageLite& message) {
  if (ended_ || !(accepted_ || (opened_ && type == rpc::FrameType::kEvent))) return;
  conn_->Send(type, sealer_->Seal(type, message.SerializeAsString()));
}

void TcpSessionConnection::SendEvent(const v1::NodeEvent& event) {
  Seal(rpc::FrameType::kEvent, event);
  if (quiet_watermark_ == 0 || padding_due_) return;
  // The events of one turn of the loop share one padded ping, sent after them.
  padding_due_ = true;
  boost::asio::post(io_, [this, alive = alive_] {
    if (!*alive) return;
    padding_due_ = false;
    v1::SessionAck ack;
    ack.set_acked(last_acked_);
    ack.set_sparse_pongs(true);
    ack.set_padding(std::string(quiet_watermark_, '\0'));
    Seal(rpc::FrameType::kPing, ack);
  });
}

void TcpSessionConnection::SendPing(uint64_t acked, bool sparse_pongs) {
  last_acked_ = std::max(last_acked_, acked);
  if (quiet_watermark_ > 0 && accepted_ && !ended_) {
    sealer_->Skip();
    conn_->Send(rpc::FrameType::kTick, {});
    return;
  }
  v1::SessionAck ack;
  ack.set_acked(acked);
  ack.set_sparse_pongs(sparse_pongs);
  Seal(rpc::FrameType::kPing, ack);
}

common::Duration TcpSessionConnection::QuietPongTimeout() const { return quiet_pong_timeout_; }

std::optional<common::Duration> TcpSessionConnection::SinceLastAck() const {
  if (!accepted_ || ended_ || !conn_) return std::nullopt;
  return conn_->SinceLastAck();
}

bool TcpSessionConnection::Finish(End end, const std::string& why) {
  if (ended_) return false;
  ended_ = true;
  timer_.cancel();
  resolver_.cancel();
  if (connecting_) {
    boost::system::error_code ignored;
    connecting_->close(ignored);
  }
  if (conn_) conn_->Close();
  auto on_end = handlers_.on_end;  // the handler may destroy this connection
  on_end(end, why);
  return false;
}

}  // namespace gangrun::node
