#include "scheduler/telemetry.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <iterator>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/status.h"

namespace gangrun::scheduler {
namespace {

// UTC, millisecond precision: 2026-11-29T10:00:00.123Z
std::string NowIso8601() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
}

}  // namespace

void DurationStat::Observe(common::Duration d) {
  last_seconds = std::chrono::duration<double>(d).count();
  sum_seconds += last_seconds;
  ++count;
}

absl::StatusOr<std::unique_ptr<EventLog>> EventLog::Open(const std::string& path) {
  auto opened = common::OpenOwnFileForWriting(path, /*append=*/true);
  if (!opened.ok()) {
    return absl::InvalidArgumentError("--event_log: " + std::string(opened.status().message()));
  }
  return std::unique_ptr<EventLog>(new EventLog(*opened, path));
}

EventLog::~EventLog() { close(fd_); }

void EventLog::Write(const nlohmann::json& line) {
  const std::string text =
      line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  // Where the line starts: we are the file's only writer, so O_APPEND puts it at the end.
  const off_t start = lseek(fd_, 0, SEEK_END);
  size_t done = 0;
  int error = 0;
  while (done < text.size()) {
    ssize_t n = write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : EIO;
      break;
    }
    done += static_cast<size_t>(n);  // a short write: the next one says why, or finishes it
  }
  if (done == text.size()) return;
  if (done > 0 && start >= 0 && ftruncate(fd_, start) != 0) {
    common::Logger("scheduler")
        ->error("event log {}: cannot remove a partial line: {}", path_, std::strerror(errno));
  }
  if (lost_++ == 0) {
    common::Logger("scheduler")
        ->error("event log {}: cannot write ({}); events are being lost", path_,
                std::strerror(error));
  }
}

void Telemetry::RecordTransition(std::string from, std::string to, std::string why) {
  transitions_.push_back({std::move(from), std::move(to), std::move(why)});
  if (transitions_.size() > kKeptTransitions) transitions_.pop_front();
}

const char* EventName(Event event) {
  // In the enum's order (scheduler/telemetry.h): the names the event log writes.
  static constexpr const char* kNames[] = {
      "node_joined",         // kNodeJoined
      "node_rejected",       // kNodeRejected
      "node_lost",           // kNodeLost
      "node_released",       // kNodeReleased
      "membership_changed",  // kMembershipChanged
      "scaled",              // kScaled
      "generation_started",  // kGenerationStarted
      "generation_running",  // kGenerationRunning
      "worker_failed",       // kWorkerFailed
      "rank_hung",           // kRankHung
      "timer_expired",       // kTimerExpired
      "hang",                // kHang
      "flight_recorder",     // kFlightRecorder
      "stacks_requested",    // kStacksRequested
      "generation_aborted",  // kGenerationAborted
      "generation_ended",    // kGenerationEnded
      "restart_scheduled",   // kRestartScheduled
      "stop_requested",      // kStopRequested
      "scheduler_stalled",   // kSchedulerStalled
      "log_output_lost",     // kLogOutputLost
      "job_finished",        // kJobFinished
      "spare_joined",        // kSpareJoined
      "spare_promoted",      // kSparePromoted
      "node_excluded",       // kNodeExcluded
      "health_checked",      // kHealthChecked
      "signal_forwarded",    // kSignalForwarded
      "time_limit",          // kTimeLimit
      "store_wait",          // kStoreWait
      "phase",               // kPhase
      "phase_moved",         // kPhaseMoved
      "verdict",             // kVerdict
      "agent_registered",    // kAgentRegistered
      "agent_lost",          // kAgentLost
      "agent_standing",      // kAgentStanding
      "agent_failure",       // kAgentFailure
      "job_submitted",       // kJobSubmitted
      "job_started",         // kJobStarted
      "job_ended",           // kJobEnded
  };
  static_assert(std::size(kNames) == static_cast<size_t>(Event::kJobEnded) + 1,
                "every event has a name");
  const auto index = static_cast<size_t>(event);
  return index < std::size(kNames) ? kNames[index] : "unknown";
}

const char* FailureCauseName(FailureCause cause) {
  switch (cause) {
    case FailureCause::kWorkerExit:
      return "worker_exit";
    case FailureCause::kHeartbeatTimeout:
      return "heartbeat_timeout";
    case FailureCause::kConnectionLost:
      return "connection_lost";
    case FailureCause::kFormationTimeout:
      return "formation_timeout";
    case FailureCause::kHang:
      return "hang";
    case FailureCause::kHealthCheck:
      return "health_check";
    case FailureCause::kExcluded:
      return "excluded";
    case FailureCause::kCount:
      break;
  }
  return "unknown";
}

void Telemetry::Record(Event event, nlohmann::json fields) {
  if (event == Event::kGenerationStarted) ++generations_;
  if (event == Event::kRestartScheduled) ++restarts_;
  if (log_ == nullptr) return;
  nlohmann::json line = {{"ts", NowIso8601()}, {"job", job_id_}, {"event", EventName(event)}};
  line.update(fields);
  log_->Write(line);
}

}  // namespace gangrun::scheduler
