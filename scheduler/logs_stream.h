#pragma once
// The gRPC end of `gangrun logs` (Scheduler.Logs, Daemon.Logs): a server-streaming reactor
// that writes one chunk at a time and asks the scheduler for the next only when gRPC has
// taken the last (OnWriteDone), so the client's pace is the nodes' pace. The scheduler lives
// on the io_context; everything the reactor tells it is posted there.

#include <grpcpp/grpcpp.h>

#include <boost/asio/io_context.hpp>
#include <functional>

#include "absl/status/statusor.h"
#include "gangrun/v1/logs.pb.h"
#include "scheduler/scheduler.h"

namespace gangrun::scheduler {

// `find` runs on the io_context and names the job's scheduler (an error ends the call).
grpc::ServerWriteReactor<v1::LogChunk>* StartLogsStream(
    boost::asio::io_context& io, const absl::Status& authorized, const v1::LogsRequest& request,
    std::function<absl::StatusOr<Scheduler*>()> find);

}  // namespace gangrun::scheduler
