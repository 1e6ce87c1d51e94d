#include "node/worker_channels.h"

#include <chrono>

#include "common/status.h"
#include "node/file_timer.h"
#include "node/flight_recorder.h"
#include "node/keeper_client.h"
#include "node/progress_channel.h"
#include "node/runtime_dir.h"
#include "node/stacks.h"

namespace gangrun::node {

absl::StatusOr<std::unique_ptr<WorkerChannels>> WorkerChannels::Create(boost::asio::io_context& io,
                                                                       KeeperClient& keeper) {
  std::unique_ptr<WorkerChannels> channels(new WorkerChannels());
  ASSIGN_OR_RETURN(channels->dir_, RuntimeDir::Create());
  const std::string dir = channels->dir_->path();
  keeper.OwnDirectory(dir);
  WorkerChannels* self = channels.get();
  // `sender`: the sending process's pid, as the kernel says it (0: unknown).
  channels->progress_ = std::make_unique<ProgressChannel>(
      io, dir, [self](int local_rank, pid_t sender, absl::string_view datagram) {
        if (self->supervisor_ != nullptr) {
          self->supervisor_->OnProgressDatagram(local_rank, sender, datagram);
        }
      });
  // The first worker's socket now, which proves the directory takes them; every other one
  // just before its worker's spawn (supervision()), so that the first spawn waits for none of
  // them (bench/README.md, issue #24).
  RETURN_IF_ERROR(channels->progress_->Open(1));
  ASSIGN_OR_RETURN(channels->timer_pipe_,
                   FifoLineReader::Open(io, dir + "/timer", [self](absl::string_view line) {
                     if (self->supervisor_ != nullptr) self->supervisor_->OnTimerLine(line);
                   }));
  ASSIGN_OR_RETURN(channels->stacks_, SystemStackSampler::Create(io, dir));
  ASSIGN_OR_RETURN(channels->flight_recorder_, FlightRecorder::Create(io, dir));
  return channels;
}

WorkerChannels::~WorkerChannels() = default;

Supervision WorkerChannels::supervision() {
  Supervision supervision;
  supervision.progress_path = [progress =
                                   progress_.get()](int local_rank) -> absl::StatusOr<std::string> {
    RETURN_IF_ERROR(progress->Open(local_rank + 1));
    return progress->PathFor(local_rank);
  };
  supervision.read_progress = [progress = progress_.get()](int local_rank) {
    progress->ReadNow(local_rank);
  };
  supervision.timer_file = dir_->path() + "/timer";
  supervision.error_file = [dir = dir_->path()](int local_rank) {
    return dir + "/error_" + std::to_string(local_rank) + ".json";
  };
  supervision.stacks = stacks_.get();
  supervision.flight_recorder = flight_recorder_.get();
  supervision.report_to = [this](Supervisor* supervisor) { supervisor_ = supervisor; };
  supervision.wall_now = [] { return common::UnixNow(); };
  return supervision;
}

}  // namespace gangrun::node
