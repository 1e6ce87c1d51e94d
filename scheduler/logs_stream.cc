#include "scheduler/logs_stream.h"

#include <boost/asio/post.hpp>

#include "common/mutex.h"
#include "rpc/server_stream.h"

namespace gangrun::scheduler {
namespace {

class LogsReactor;

// What the scheduler holds (its sink) and the reactor shares: the reactor is gone once gRPC
// is done with the call, this is not.
class Shared : public LogsSink {
 public:
  void Write(v1::LogChunk chunk) override;
  void Finish(absl::Status status) override;

  common::Mutex mu;
  LogsReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;  // null once gRPC is done
  bool finished ABSL_GUARDED_BY(mu) = false;
  v1::LogChunk chunk ABSL_GUARDED_BY(mu);  // the one being written
  // On the io_context only:
  LogsSource* scheduler = nullptr;  // null once finished
  uint64_t id = 0;
};

class LogsReactor : public grpc::ServerWriteReactor<v1::LogChunk> {
 public:
  LogsReactor(boost::asio::io_context& io, const absl::Status& authorized,
              const v1::LogsRequest& request, std::function<absl::StatusOr<LogsSource*>()> find)
      : io_(io), shared_(std::make_shared<Shared>()) {
    if (!authorized.ok()) {
      Finish(rpc::ToGrpcStatus(authorized));
      return;
    }
    {
      common::MutexLock lock(&shared_->mu);
      shared_->reactor = this;
    }
    boost::asio::post(io_, [shared = shared_, request, find = std::move(find)] {
      auto scheduler = find();
      if (!scheduler.ok()) return shared->Finish(scheduler.status());
      auto id = (*scheduler)->OpenLogs(request, shared);
      if (!id.ok()) return shared->Finish(id.status());
      shared->scheduler = *scheduler;
      shared->id = *id;
    });
  }

  void OnWriteDone(bool ok) override {
    boost::asio::post(io_, [shared = shared_, ok] {
      if (shared->scheduler == nullptr) return;
      if (ok) return shared->scheduler->LogsWritten(shared->id);
      shared->scheduler->CloseLogs(shared->id);
      shared->Finish(absl::CancelledError("the client stopped reading"));
    });
  }

  void OnCancel() override {
    boost::asio::post(io_, [shared = shared_] {
      if (shared->scheduler != nullptr) shared->scheduler->CloseLogs(shared->id);
      shared->Finish(absl::CancelledError("the call was cancelled"));
    });
  }

  void OnDone() override {
    {
      common::MutexLock lock(&shared_->mu);
      shared_->reactor = nullptr;
    }
    delete this;
  }

 private:
  boost::asio::io_context& io_;
  std::shared_ptr<Shared> shared_;
};

void Shared::Write(v1::LogChunk next) {
  common::MutexLock lock(&mu);
  if (reactor == nullptr || finished) return;
  chunk = std::move(next);
  reactor->StartWrite(&chunk);
}

void Shared::Finish(absl::Status status) {
  scheduler = nullptr;
  common::MutexLock lock(&mu);
  if (reactor == nullptr || finished) return;
  finished = true;
  reactor->Finish(rpc::ToGrpcStatus(status));
}

}  // namespace

grpc::ServerWriteReactor<v1::LogChunk>* StartLogsStream(
    boost::asio::io_context& io, const absl::Status& authorized, const v1::LogsRequest& request,
    std::function<absl::StatusOr<LogsSource*>()> find) {
  return new LogsReactor(io, authorized, request, std::move(find));
}

}  // namespace gangrun::scheduler
