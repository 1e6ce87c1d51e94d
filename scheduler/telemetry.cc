#include "scheduler/telemetry.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>

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
  switch (event) {
    case Event::kNodeJoined:
      return "node_joined";
    case Event::kNodeRejected:
      return "node_rejected";
    case Event::kNodeLost:
      return "node_lost";
    case Event::kNodeReleased:
      return "node_released";
    case Event::kMembershipChanged:
      return "membership_changed";
    case Event::kScaled:
      return "scaled";
    case Event::kGenerationStarted:
      return "generation_started";
    case Event::kGenerationRunning:
      return "generation_running";
    case Event::kWorkerFailed:
      return "worker_failed";
    case Event::kRankHung:
      return "rank_hung";
    case Event::kTimerExpired:
      return "timer_expired";
    case Event::kHang:
      return "hang";
    case Event::kFlightRecorder:
      return "flight_recorder";
    case Event::kStacksRequested:
      return "stacks_requested";
    case Event::kGenerationAborted:
      return "generation_aborted";
    case Event::kGenerationEnded:
      return "generation_ended";
    case Event::kRestartScheduled:
      return "restart_scheduled";
    case Event::kStopRequested:
      return "stop_requested";
    case Event::kSchedulerStalled:
      return "scheduler_stalled";
    case Event::kLogOutputLost:
      return "log_output_lost";
    case Event::kJobFinished:
      return "job_finished";
    case Event::kSpareJoined:
      return "spare_joined";
    case Event::kSparePromoted:
      return "spare_promoted";
    case Event::kNodeExcluded:
      return "node_excluded";
    case Event::kHealthChecked:
      return "health_checked";
    case Event::kSignalForwarded:
      return "signal_forwarded";
    case Event::kTimeLimit:
      return "time_limit";
    case Event::kStoreWait:
      return "store_wait";
    case Event::kPhase:
      return "phase";
    case Event::kPhaseMoved:
      return "phase_moved";
    case Event::kVerdict:
      return "verdict";
    case Event::kAgentRegistered:
      return "agent_registered";
    case Event::kAgentLost:
      return "agent_lost";
    case Event::kAgentStanding:
      return "agent_standing";
    case Event::kAgentFailure:
      return "agent_failure";
    case Event::kJobSubmitted:
      return "job_submitted";
    case Event::kJobStarted:
      return "job_started";
    case Event::kJobEnded:
      return "job_ended";
  }
  return "unknown";
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
