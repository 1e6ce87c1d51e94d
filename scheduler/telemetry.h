#pragma once
// What a scheduler tells operators: a JSON-lines event log (--event_log) of every membership
// change, failure, restart and stop, and the counters behind the Prometheus metrics
// (metrics.h). The scheduler calls Record() on its strand.
//
// One event per line, written with a single write(2) on an O_APPEND descriptor, so a line is
// never torn or lost when the process dies right after; a line the disk cannot take whole is
// cut back off (never a partial line) and counted, with one warning naming the error:
//   {"ts":"2026-11-29T10:00:00.123Z","job":"3f2a","event":"worker_failed","rank":3,...}

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "nlohmann/json.hpp"

namespace gangrun::scheduler {

// What happened, as the event log names it ("node_joined", ...). Counters are kept by these
// values, never by matching names.
enum class Event {
  kNodeJoined,
  kNodeRejected,
  kNodeLost,
  kNodeReleased,
  kMembershipChanged,
  kScaled,
  kGenerationStarted,
  kGenerationRunning,
  kWorkerFailed,
  kRankHung,         // a node judged a rank hung
  kTimerExpired,     // a torch FileTimer expired
  kHang,             // the hang's report: where every rank was
  kFlightRecorder,   // the hang's NCCL flight recorder dumps, where they were kept
  kStacksRequested,  // `gangrun stacks` was answered
  kGenerationAborted,
  kGenerationEnded,
  kRestartScheduled,
  kStopRequested,
  kSchedulerStalled,
  kLogOutputLost,
  kJobFinished,
  kSpareJoined,      // a node joined beyond the job's size and waits
  kSparePromoted,    // a spare took a lost or excluded node's place
  kNodeExcluded,     // --health_check or --exclude_after
  kHealthChecked,    // a node answered a health round
  kSignalForwarded,  // --signals_to_forward, to every worker
  kTimeLimit,        // --time_limit passed (or its early signal went)
  kStoreWait,        // ranks waited past the bound in the job's torch store (--agent_store)
  kPhase,            // the ledger's phase changed (scheduler/ledger.h)
  kPhaseMoved,       // the ledger moved time from one phase to another after the fact
  kVerdict,          // a failed generation's verdict (its fingerprint, what followed, the rule)
  // A daemon's own events.
  kAgentRegistered,
  kAgentLost,
  kAgentStanding,  // an agent was quarantined, drained or released (daemon/agent_standing.h)
  kAgentFailure,   // a failure was attributed to an agent
  kJobSubmitted,
  kJobStarted,
  kJobEnded,  // last: EventName's table ends with it
};
const char* EventName(Event event);

// Why a generation failed, for gangrun_failures_total{cause}.
enum class FailureCause {
  kWorkerExit,
  kHeartbeatTimeout,
  kConnectionLost,
  kFormationTimeout,
  kHang,
  kHealthCheck,  // a node's --health_check failed (it is excluded)
  kExcluded,     // a node was excluded after --exclude_after failed generations
  kCount,        // not a cause: the number of causes
};
const char* FailureCauseName(FailureCause cause);

// A running count and sum of observed durations (a Prometheus summary without quantiles).
struct DurationStat {
  uint64_t count = 0;
  double sum_seconds = 0;
  double last_seconds = 0;
  void Observe(common::Duration d);
};

// The event log file, opened once by its owner (a launcher, the daemon) and shared by the
// Telemetry of every job it runs.
class EventLog {
 public:
  // Appends to `path` (created 0600 if missing).
  static absl::StatusOr<std::unique_ptr<EventLog>> Open(const std::string& path);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;
  void Write(const nlohmann::json& line);

  uint64_t lost() const { return lost_; }

 private:
  EventLog(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
  uint64_t lost_ = 0;  // events that could not be written (a full disk, say)
};

class Telemetry {
 public:
  // Events go to `log` when given (it must outlive this); they are always counted.
  explicit Telemetry(std::string job_id, EventLog* log = nullptr)
      : job_id_(std::move(job_id)), log_(log) {}

  // Writes one event line and updates the counters it feeds (generations, restarts).
  void Record(Event event, nlohmann::json fields = nlohmann::json::object());
  void CountFailure(FailureCause cause) { ++failures_[static_cast<size_t>(cause)]; }
  void ObserveRendezvous(common::Duration d) { rendezvous_.Observe(d); }
  void ObserveStop(common::Duration d) { stop_.Observe(d); }
  // The scheduler's named states as it went through them, the last kKeptTransitions kept.
  struct Transition {
    std::string from, to, why;
  };
  static constexpr size_t kKeptTransitions = 64;
  void RecordTransition(std::string from, std::string to, std::string why);
  const std::deque<Transition>& transitions() const { return transitions_; }

  const std::string& job_id() const { return job_id_; }
  uint64_t generations() const { return generations_; }
  uint64_t restarts() const { return restarts_; }
  uint64_t failures(FailureCause cause) const { return failures_[static_cast<size_t>(cause)]; }
  const DurationStat& rendezvous() const { return rendezvous_; }
  const DurationStat& stop() const { return stop_; }

 private:
  std::string job_id_;
  EventLog* log_;
  uint64_t generations_ = 0;
  uint64_t restarts_ = 0;
  std::array<uint64_t, static_cast<size_t>(FailureCause::kCount)> failures_{};
  DurationStat rendezvous_;
  DurationStat stop_;
  std::deque<Transition> transitions_;
};

}  // namespace gangrun::scheduler
