#include "node/grpc_link.h"

#include <boost/asio/post.hpp>

#include "absl/strings/match.h"
#include "common/net.h"
#include "rpc/channel.h"

namespace gangrun::node {

using std::chrono::milliseconds;

namespace {

v1::SessionRefused Refusal(const std::string& why, bool unauthenticated) {
  v1::SessionRefused refused;
  refused.set_reason(why);
  refused.set_unauthenticated(unauthenticated);
  return refused;
}

}  // namespace

GrpcSessionConnection::GrpcSessionConnection(boost::asio::io_context& io, Options options,
                                             Handlers handlers)
    : io_(io), options_(std::move(options)), handlers_(std::move(handlers)), timer_(io) {}

GrpcSessionConnection::~GrpcSessionConnection() {
  *alive_ = false;
  timer_.cancel();
  if (stream_) stream_->CancelAndWait();
}

ConnectionFactory GrpcSessionConnection::Factory(boost::asio::io_context& io, Options options) {
  return [&io, options](Handlers handlers) -> std::unique_ptr<SessionConnection> {
    return std::make_unique<GrpcSessionConnection>(io, options, std::move(handlers));
  };
}

void GrpcSessionConnection::Open(uint64_t session, const std::string& key, uint64_t acked) {
  session_ = session;
  key_ = key;
  channel_ = options_.channel ? options_.channel
                              : rpc::MakeChannel(options_.target, options_.credentials,
                                                 options_.token, options_.tls_target_name,
                                                 options_.keepalive, options_.keepalive_timeout);
  stub_ = v1::Scheduler::NewStub(channel_);
  auto alive = alive_;
  stream_ = std::make_unique<Stream>(
      io_,
      [this, alive](const v1::NodeCommand& command) {
        if (*alive) OnCommand(command);
      },
      [this, alive](const grpc::Status& status) {
        if (*alive) OnDone(status);
      });
  // A new session waits for the scheduler to listen; a resume is bounded.
  stream_->Begin(session == 0, [this](auto* context, auto* reactor) {
    stub_->async()->Session(context, reactor);
  });
  v1::NodeEvent start;
  start.mutable_start()->set_session(session);
  start.mutable_start()->set_key(key);
  start.mutable_start()->set_acked(acked);
  stream_->Queue(start);
  if (session == 0) return WatchHandshake();
  timer_.expires_after(options_.attempt_timeout);
  timer_.async_wait([this, alive](const boost::system::error_code& error) {
    if (error || !*alive || opened_) return;
    Finish(End::kTimedOut, "no answer to the resume in time");
  });
}

void GrpcSessionConnection::OnCommand(const v1::NodeCommand& command) {
  if (ended_) return;
  if (!opened_) {
    if (command.has_refused()) return Refuse(command.refused());
    if (!command.has_opened()) return Finish(End::kFailed, "no answer to the session start");
    opened_ = true;
    timer_.cancel();
    const v1::SessionOpened& opened = command.opened();
    auto on_accepted = handlers_.on_accepted;  // the handler may destroy this connection
    on_accepted(opened.session(), session_ != 0 ? key_ : opened.key(), opened.acked());
    return;
  }
  if (command.has_pong()) {
    auto on_pong = handlers_.on_pong;
    return on_pong(command.pong().acked());
  }
  auto on_command = handlers_.on_command;
  on_command(command);
}

void GrpcSessionConnection::OnDone(const grpc::Status& status) {
  if (ended_) return;
  if (opened_) {
    return Finish(End::kClosed, status.ok() ? std::string("the scheduler closed the session")
                                            : status.error_message());
  }
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    return Refuse(Refusal(
        "the scheduler rejected this launcher's token (" + status.error_message() + ")", true));
  }
  if (absl::StrContains(status.error_message(), "Connection refused")) {
    return Finish(End::kConnectionRefused, status.error_message());
  }
  Finish(End::kFailed, status.error_message());
}

void GrpcSessionConnection::WatchHandshake() {
  timer_.expires_after(kHandshakeCheckPeriod);
  timer_.async_wait([this, alive = alive_](const boost::system::error_code& error) {
    if (!error && *alive) CheckHandshake();
  });
}

// Worked example: a node without TLS, a scheduler with it. Every connection attempt fails at
// once (TRANSIENT_FAILURE); the probe's plaintext preface is met with a close (or a TLS alert):
// a mismatch. Two of them, half a second apart, end the wait with a message that names TLS.
// A scheduler that is merely slow or out of descriptors never answers the probe, and a
// plaintext scheduler answers it with SETTINGS: neither counts.
void GrpcSessionConnection::CheckHandshake() {
  const grpc_connectivity_state state = channel_->GetState(false);
  if (opened_ || ended_ || state == GRPC_CHANNEL_READY) return;  // the handshake worked: done
  if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
    const common::Http2Probe probe = common::ProbeHttp2(options_.target, milliseconds(300));
    const bool tls = options_.credentials != nullptr;
    if (probe == common::Http2Probe::kNotPlaintextHttp2 && !tls) {
      ++mismatches_;
    } else if (probe == common::Http2Probe::kPlaintextHttp2 && tls) {
      ++mismatches_;
    } else if (probe == common::Http2Probe::kNotPlaintextHttp2 && tls) {
      ++tls_failures_;
    }
  }
  const std::string at = "the scheduler at " + options_.target;
  if (mismatches_ >= kMismatchesToGiveUp) {
    return Refuse(Refusal(
        options_.credentials
            ? at + " does not speak TLS, but this launcher does (--tls_ca/--tls_cert)"
            : at + " expects TLS (or is not a gangrun scheduler), but this launcher does not "
                   "use it (give it the job's --tls_ca/--tls_cert/--tls_key)",
        false));
  }
  if (tls_failures_ >= kTlsFailuresToGiveUp) {
    return Refuse(Refusal("the TLS handshake with " + at.substr(4) +
                              " fails: does its certificate verify against this launcher's "
                              "--tls_ca, and this launcher's against its CA?",
                          false));
  }
  WatchHandshake();
}

void GrpcSessionConnection::SendEvent(const v1::NodeEvent& event) {
  if (opened_ && !ended_) stream_->Queue(event);
}

void GrpcSessionConnection::SendPing(uint64_t acked, bool /*sparse_pongs: never over gRPC*/) {
  if (!opened_ || ended_) return;
  v1::NodeEvent ping;
  ping.mutable_ping()->set_acked(acked);
  stream_->Queue(ping);
}

void GrpcSessionConnection::Finish(End end, const std::string& why) {
  if (ended_) return;
  ended_ = true;
  timer_.cancel();
  auto on_end = handlers_.on_end;  // the handler may destroy this connection
  on_end(end, why);
}

void GrpcSessionConnection::Refuse(const v1::SessionRefused& refused) {
  if (ended_) return;
  ended_ = true;
  timer_.cancel();
  auto on_refused = handlers_.on_refused;  // the handler may destroy this connection
  on_refused(refused);
}

}  // namespace gangrun::node
