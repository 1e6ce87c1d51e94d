#include "node/grpc_link.h"

#include <boost/asio/post.hpp>

#include "common/net.h"
#include "gangrun/v1/session.grpc.pb.h"
#include "rpc/channel.h"

namespace gangrun::node {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

GrpcSchedulerLink::GrpcSchedulerLink(boost::asio::io_context& io, Options options)
    : io_(io), options_(std::move(options)) {
  channel_ = options_.channel ? options_.channel
                              : rpc::MakeChannel(options_.target, options_.credentials,
                                                 options_.tls_target_name, options_.keepalive,
                                                 options_.keepalive_timeout);
}

GrpcSchedulerLink::~GrpcSchedulerLink() {
  if (handshake_timer_) handshake_timer_->cancel();
  if (stream_) stream_->CancelAndWait();
}

void GrpcSchedulerLink::Connect(CommandHandler on_command, LostHandler on_lost) {
  on_lost_ = on_lost;
  stub_ = v1::Scheduler::NewStub(channel_);
  stream_ = std::make_unique<Stream>(
      io_,
      [this, on_command = std::move(on_command)](const v1::NodeCommand& command) {
        connected_ = true;
        on_command(command);
      },
      [on_lost = std::move(on_lost)](const grpc::Status& status) {
        std::string reason =
            status.ok() ? std::string("the scheduler closed the session") : status.error_message();
        on_lost(reason, status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
      });
  // wait_for_ready: the scheduler may not be listening yet.
  stream_->Begin(options_.token, true, [this](auto* context, auto* reactor) {
    stub_->async()->Session(context, reactor);
  });
  WatchHandshake();
}

void GrpcSchedulerLink::WatchHandshake() {
  handshake_timer_ = std::make_unique<boost::asio::steady_timer>(io_, kHandshakeCheckPeriod);
  handshake_timer_->async_wait([this](const boost::system::error_code& ec) {
    if (!ec) CheckHandshake();
  });
}

// Worked example: a node without TLS, a scheduler with it. Every connection attempt fails at
// once (TRANSIENT_FAILURE); the probe's plaintext preface is met with a close (or a TLS alert):
// a mismatch. Two of them, half a second apart, end the wait with a message that names TLS.
// A scheduler that is merely slow or out of descriptors never answers the probe, and a
// plaintext scheduler answers it with SETTINGS: neither counts.
void GrpcSchedulerLink::CheckHandshake() {
  const grpc_connectivity_state state = channel_->GetState(false);
  if (connected_ || state == GRPC_CHANNEL_READY) return;  // the handshake worked: done
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
    return GiveUp(options_.credentials
                      ? at + " does not speak TLS, but this launcher does (--tls_ca/--tls_cert)"
                      : at + " expects TLS (or is not a gangrun scheduler), but this launcher "
                             "does not use it (give it the job's --tls_ca/--tls_cert/--tls_key)");
  }
  if (tls_failures_ >= kTlsFailuresToGiveUp) {
    return GiveUp("the TLS handshake with " + at.substr(4) +
                  " fails: does its certificate verify against this launcher's --tls_ca, and "
                  "this launcher's against its CA?");
  }
  WatchHandshake();
}

void GrpcSchedulerLink::GiveUp(const std::string& why) { on_lost_(why, false); }

void GrpcSchedulerLink::Send(const v1::NodeEvent& event) {
  if (stream_) stream_->Queue(event);
}

}  // namespace gangrun::node
