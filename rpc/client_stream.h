#pragma once
// One client-side bidirectional gRPC stream (callback API), for a node's session with its
// scheduler and an agent's session with its daemon.
//
// gRPC runs the callbacks on its own threads; they only post to the io_context. Queue() may
// be called from any thread. CancelAndWait() ends the stream and waits until gRPC has let go
// of it. The destructor does the same: a done handler may run (and its owner destroy the
// stream) while gRPC's thread is still inside OnDone.

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_callback.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <deque>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "rpc/channel.h"

namespace gangrun::rpc {

template <typename Out, typename In>
class ClientStream : public grpc::ClientBidiReactor<Out, In> {
 public:
  using ReadHandler = std::function<void(const In&)>;
  // Runs on the io_context once the stream has ended, unless it was cancelled by us.
  using DoneHandler = std::function<void(const grpc::Status&)>;

  ClientStream(boost::asio::io_context& io, ReadHandler on_read, DoneHandler on_done)
      : io_(io), on_read_(std::move(on_read)), on_done_(std::move(on_done)) {}
  ~ClientStream() override {
    if (begun_) CancelAndWait();  // a no-op for gRPC once the stream has ended
  }

  // `start(context, reactor)` calls the stub's async method, e.g.
  // [&](auto* c, auto* r) { stub->async()->Session(c, r); }.
  template <typename StartCall>
  void Begin(bool wait_for_ready, StartCall start) {
    context_.set_wait_for_ready(wait_for_ready);
    start(&context_, this);
    begun_ = true;
    // A hold until the read side ends (OnReadDone(false)): Queue() starts writes from other
    // threads, and a write started after gRPC had finished the call (one that fails at once:
    // a daemon standing by, or gone) would touch a call that is no more.
    this->AddHold();
    this->StartRead(&incoming_);
    // gRPC's threads run the reactions, OnDone maybe before anything is queued (a call that
    // fails at once): this lock, which they take too, is what ThreadSanitizer sees order the
    // stream's construction before them (it cannot see Debian's gRPC's own synchronization).
    { common::MutexLock lock(&mu_); }
    this->StartCall();
  }

  void Queue(const Out& message) {
    common::MutexLock lock(&mu_);
    QueueLocked(message);
  }
  // Queues `message` unless more than `max_queued_bytes` already wait; false when dropped.
  bool TryQueue(const Out& message, size_t max_queued_bytes) {
    common::MutexLock lock(&mu_);
    if (done_ || queued_bytes_ > max_queued_bytes) return false;
    QueueLocked(message);
    return true;
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The call is ending: no write starts from here on (a write in flight completes in
      // OnWriteDone), then the hold goes and OnDone follows.
      {
        common::MutexLock lock(&mu_);
        done_ = true;
      }
      this->RemoveHold();
      return;
    }
    boost::asio::post(io_, [handler = on_read_, message = incoming_] { handler(message); });
    this->StartRead(&incoming_);
  }

  void OnWriteDone(bool ok) override {
    common::MutexLock lock(&mu_);
    queued_bytes_ -= outgoing_.front().ByteSizeLong();
    outgoing_.pop_front();
    if (ok && !done_ && !outgoing_.empty()) this->StartWrite(&outgoing_.front());
    if (!ok) {
      outgoing_.clear();
      queued_bytes_ = 0;
    }
  }

  void OnDone(const grpc::Status& status) override {
    {
      common::MutexLock lock(&mu_);
      done_ = true;
      outgoing_.clear();
      queued_bytes_ = 0;
    }
    if (!cancelled_) boost::asio::post(io_, [handler = on_done_, status] { handler(status); });
    common::MutexLock lock(&mu_);
    finished_ = true;
    mu_.SignalAll();
  }

  void CancelAndWait() {
    cancelled_ = true;
    context_.TryCancel();
    WaitFinished();
  }

 private:
  void WaitFinished() {
    common::MutexLock lock(&mu_);
    mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return finished_; });
  }

  void QueueLocked(const Out& message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (done_) return;
    outgoing_.push_back(message);
    queued_bytes_ += message.ByteSizeLong();
    if (outgoing_.size() == 1) this->StartWrite(&outgoing_.front());
  }

  boost::asio::io_context& io_;
  ReadHandler on_read_;
  DoneHandler on_done_;
  grpc::ClientContext context_;
  In incoming_;
  common::Mutex mu_;
  std::deque<Out> outgoing_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // the messages in outgoing_
  bool done_ ABSL_GUARDED_BY(mu_) = false;        // no more writes
  bool finished_ ABSL_GUARDED_BY(mu_) = false;    // gRPC has let go of the stream
  std::atomic<bool> cancelled_{false};
  bool begun_ = false;  // the owner's thread only
};

}  // namespace gangrun::rpc
