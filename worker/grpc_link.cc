#include "worker/grpc_link.h"

#include <boost/asio/post.hpp>

#include "gangrun/v1/session.grpc.pb.h"

namespace gangrun::worker {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

void AddToken(grpc::ClientContext& context, const std::string& token) {
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           std::shared_ptr<grpc::ChannelCredentials> credentials,
                                           const std::string& tls_target_name,
                                           common::Duration keepalive) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
              static_cast<int>(duration_cast<milliseconds>(keepalive).count()));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              static_cast<int>(duration_cast<milliseconds>(keepalive).count()));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(8 << 20);
  if (!tls_target_name.empty()) args.SetSslTargetNameOverride(tls_target_name);
  return grpc::CreateCustomChannel(
      target, credentials ? credentials : grpc::InsecureChannelCredentials(), args);
}

GrpcSchedulerLink::GrpcSchedulerLink(boost::asio::io_context& io, Options options)
    : io_(io), options_(std::move(options)) {
  channel_ = MakeChannel(options_.target, options_.credentials, options_.tls_target_name,
                         options_.keepalive);
}

GrpcSchedulerLink::~GrpcSchedulerLink() {
  if (stream_) stream_->CancelAndWait();
}

void GrpcSchedulerLink::Connect(CommandHandler on_command, LostHandler on_lost) {
  stub_ = v1::Scheduler::NewStub(channel_);
  stream_ = std::make_unique<Stream>(
      io_, std::move(on_command), [on_lost = std::move(on_lost)](const grpc::Status& status) {
        std::string reason =
            status.ok() ? std::string("the scheduler closed the session") : status.error_message();
        on_lost(reason, status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
      });
  // wait_for_ready: the scheduler may not be listening yet.
  stream_->Begin(options_.token, true, [this](auto* context, auto* reactor) {
    stub_->async()->Session(context, reactor);
  });
}

void GrpcSchedulerLink::Send(const v1::NodeEvent& event) {
  if (stream_) stream_->Queue(event);
}

}  // namespace gangrun::worker
