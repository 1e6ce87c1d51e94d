#pragma once
// What a node's workers talk to, in the node's runtime directory (node/runtime_dir.h): one
// GANGRUN_PROGRESS socket per local rank, the TORCHELASTIC_TIMER_FILE pipe, the error files
// the stack sampler's hook and the flight recorder's dumps. The node's own part: the launcher asks
// for them and hands their Supervision to the Node, and knows no file name in the directory;
// the workers' reports go to the node's Supervisor (node/supervisor.h) while it lives, and
// nowhere before it or after it.

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "node/supervisor.h"

namespace gangrun::node {

class KeeperClient;
class RuntimeDir;
class ProgressChannel;
class FifoLineReader;
class SystemStackSampler;
class FlightRecorder;

class WorkerChannels {
 public:
  // Makes the runtime directory (owned by the keeper, so it goes with it even after a SIGKILL
  // of the launcher) and everything in it; a worker's progress socket comes with its
  // GANGRUN_PROGRESS (Supervision::progress_path).
  static absl::StatusOr<std::unique_ptr<WorkerChannels>> Create(boost::asio::io_context& io,
                                                                KeeperClient& keeper);
  ~WorkerChannels();
  WorkerChannels(const WorkerChannels&) = delete;
  WorkerChannels& operator=(const WorkerChannels&) = delete;

  // Where the workers report, for the Node; valid while this lives. Its report_to points the
  // channels at the Node's Supervisor.
  Supervision supervision();

 private:
  WorkerChannels() = default;

  std::unique_ptr<RuntimeDir> dir_;
  std::unique_ptr<ProgressChannel> progress_;
  std::unique_ptr<FifoLineReader> timer_pipe_;
  std::unique_ptr<SystemStackSampler> stacks_;
  std::unique_ptr<FlightRecorder> flight_recorder_;
  Supervisor* supervisor_ = nullptr;  // where the reports go (Supervision::report_to)
};

}  // namespace gangrun::node
