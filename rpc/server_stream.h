#pragma once
// One server-side bidirectional gRPC stream (callback API), for the scheduler's node sessions
// and the daemon's agent and submit streams.
//
// gRPC calls the reactor on its own threads. The owner (on the io_context) talks to the
// stream only through its Handle, which outlives the reactor: Send and Close are no-ops once
// the stream is done. `on_read` runs on a gRPC thread and should only post to the
// io_context (or count something atomically); `on_end` runs once, when reading ends.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <deque>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "common/mutex.h"
#include "rpc/call_auth.h"

namespace gangrun::rpc {

// A refusal as gRPC says it.
inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

// A unary call of `method` with `request`: refused when `auth` refuses it, otherwise
// `work(reactor)` runs on the io_context (the owner's strand) and finishes the call there.
template <typename Work>
grpc::ServerUnaryReactor* ServeOnStrand(boost::asio::io_context& io,
                                        grpc::CallbackServerContext* context,
                                        CallAuthenticator& auth, std::string_view method,
                                        const google::protobuf::Message& request, Work work) {
  auto* reactor = context->DefaultReactor();
  if (absl::Status allowed = auth.Check(*context, method, &request); !allowed.ok()) {
    reactor->Finish(ToGrpcStatus(allowed));
    return reactor;
  }
  boost::asio::post(io, [reactor, work = std::move(work)]() mutable { work(reactor); });
  return reactor;
}

template <typename In, typename Out>
class ServerStream : public grpc::ServerBidiReactor<In, Out> {
 public:
  class Handle {
   public:
    void Send(const Out& message) {
      common::MutexLock lock(&mu_);
      if (stream_ != nullptr) stream_->QueueLocked(message);
    }
    // Sends `message` unless more than `max_queued_bytes` already wait for a slow peer;
    // false when it was dropped (or the stream is done).
    bool TrySend(const Out& message, size_t max_queued_bytes) {
      common::MutexLock lock(&mu_);
      if (stream_ == nullptr || stream_->queued_bytes_ > max_queued_bytes) return false;
      stream_->QueueLocked(message);
      return true;
    }
    // Ends the stream once everything sent so far is delivered.
    void Close() {
      common::MutexLock lock(&mu_);
      if (stream_ != nullptr) stream_->CloseLocked();
    }

   private:
    friend class ServerStream;
    common::Mutex mu_;
    ServerStream* stream_ ABSL_GUARDED_BY(mu_) = nullptr;  // null once the stream is done
  };

  struct Handlers {
    std::function<void(const In&)> on_read;
    std::function<void()> on_end;
  };

  // Starts reading, or refuses the call at once when `authorized` is not OK.
  ServerStream(std::shared_ptr<Handle> handle, const absl::Status& authorized, Handlers handlers)
      : handle_(std::move(handle)), handlers_(std::move(handlers)) {
    if (!authorized.ok()) {
      FinishOnce(ToGrpcStatus(authorized));
      return;
    }
    {
      common::MutexLock lock(&handle_->mu_);
      handle_->stream_ = this;
    }
    this->StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      handlers_.on_end();
      common::MutexLock lock(&handle_->mu_);
      if (outgoing_.empty()) FinishOnce(grpc::Status::OK);
      closing_ = true;
      return;
    }
    handlers_.on_read(incoming_);
    this->StartRead(&incoming_);
  }

  void OnWriteDone(bool ok) override {
    common::MutexLock lock(&handle_->mu_);
    queued_bytes_ -= outgoing_.front().ByteSizeLong();
    outgoing_.pop_front();
    if (!ok) {
      outgoing_.clear();
      queued_bytes_ = 0;
      FinishOnce(grpc::Status::OK);
      return;
    }
    if (!outgoing_.empty()) {
      this->StartWrite(&outgoing_.front());
    } else if (closing_) {
      FinishOnce(grpc::Status::OK);
    }
  }

  void OnDone() override {
    {
      common::MutexLock lock(&handle_->mu_);
      handle_->stream_ = nullptr;
    }
    delete this;
  }

 private:
  void QueueLocked(const Out& message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(handle_->mu_) {
    if (finished_ || closing_) return;
    outgoing_.push_back(message);
    queued_bytes_ += message.ByteSizeLong();
    if (outgoing_.size() == 1) this->StartWrite(&outgoing_.front());
  }
  void CloseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(handle_->mu_) {
    closing_ = true;
    if (outgoing_.empty()) FinishOnce(grpc::Status::OK);
  }
  void FinishOnce(const grpc::Status& status) {
    if (!finished_.exchange(true)) this->Finish(status);
  }

  std::shared_ptr<Handle> handle_;
  Handlers handlers_;
  In incoming_;
  std::deque<Out> outgoing_ ABSL_GUARDED_BY(handle_->mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(handle_->mu_) = 0;  // the messages in outgoing_
  bool closing_ ABSL_GUARDED_BY(handle_->mu_) = false;
  std::atomic<bool> finished_{false};
};

}  // namespace gangrun::rpc
