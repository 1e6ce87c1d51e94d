#include "worker/grpc_link.h"

#include <boost/asio/post.hpp>

#include "gangrun/v1/session.grpc.pb.h"

namespace gangrun::worker {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

class GrpcSchedulerLink::Stream : public grpc::ClientBidiReactor<v1::NodeEvent, v1::NodeCommand> {
 public:
  Stream(boost::asio::io_context& io, CommandHandler on_command, LostHandler on_lost)
      : io_(io), on_command_(std::move(on_command)), on_lost_(std::move(on_lost)) {}

  void Begin(v1::Scheduler::Stub* stub, const std::string& token) {
    AddToken(context_, token);
    context_.set_wait_for_ready(true);  // the scheduler may not be listening yet
    stub->async()->Session(&context_, this);
    StartRead(&incoming_);
    StartCall();
  }

  void Queue(const v1::NodeEvent& event) {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    outgoing_.push_back(event);
    if (outgoing_.size() == 1) StartWrite(&outgoing_.front());
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    boost::asio::post(io_, [handler = on_command_, command = incoming_] { handler(command); });
    StartRead(&incoming_);
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    outgoing_.pop_front();
    if (ok && !outgoing_.empty()) StartWrite(&outgoing_.front());
    if (!ok) outgoing_.clear();
  }

  void OnDone(const grpc::Status& status) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      outgoing_.clear();
    }
    if (!cancelled_) {
      std::string reason =
          status.ok() ? std::string("the scheduler closed the session") : status.error_message();
      bool unauthenticated = status.error_code() == grpc::StatusCode::UNAUTHENTICATED;
      boost::asio::post(
          io_, [handler = on_lost_, reason, unauthenticated] { handler(reason, unauthenticated); });
    }
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    finished_cv_.notify_all();
  }

  void CancelAndWait() {
    cancelled_ = true;
    context_.TryCancel();
    std::unique_lock<std::mutex> lock(mu_);
    finished_cv_.wait(lock, [this] { return finished_; });
  }

 private:
  boost::asio::io_context& io_;
  CommandHandler on_command_;
  LostHandler on_lost_;
  grpc::ClientContext context_;
  v1::NodeCommand incoming_;
  std::mutex mu_;
  std::condition_variable finished_cv_;
  std::deque<v1::NodeEvent> outgoing_;  // guarded by mu_
  bool done_ = false;                   // guarded by mu_
  bool finished_ = false;               // guarded by mu_
  std::atomic<bool> cancelled_{false};
};

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
  stream_ = std::make_unique<Stream>(io_, std::move(on_command), std::move(on_lost));
  stream_->Begin(stub_.get(), options_.token);
}

void GrpcSchedulerLink::Send(const v1::NodeEvent& event) {
  if (stream_) stream_->Queue(event);
}

}  // namespace gangrun::worker
