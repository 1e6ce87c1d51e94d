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
#include "scheduler/logs.h"

namespace gangrun::scheduler {

// `find` runs on the io_context and names what serves the stream (a job's scheduler; an
// error ends the call). It must finish the stream's sink before it goes (LogsPump does).
grpc::ServerWriteReactor<v1::LogChunk>* StartLogsStream(
    boost::asio::io_context& io, const absl::Status& authorized, const v1::LogsRequest& request,
    std::function<absl::StatusOr<LogsSource*>()> find);

}  // namespace gangrun::scheduler
