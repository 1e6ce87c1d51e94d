// Progress supervision, the scheduler's half: the ranks' progress as nodes report it, hangs
// (a node judges a rank hung; the hang capture, scheduler/hang_capture.h, says where every
// rank was, and the generation stops as hung), torch timer expiries, and stragglers. Part of
// the Scheduler core (scheduler.h): the same strand, the same state.

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/exit_status.h"
#include "common/logging.h"
#include "scheduler/hang_report.h"
#include "scheduler/scheduler.h"

namespace gangrun::scheduler {
namespace {

std::string DescribeHang(const v1::RankHung& hung, const std::string& node) {
  const std::string who = "rank " + std::to_string(hung.rank()) + " on " + node;
  if (hung.rule() == "initial") {
    return absl::StrFormat(
        "%s made no first progress report for %.0f s (--hang_timeout_initial %g)", who,
        hung.silent_seconds(), hung.bound_seconds());
  }
  if (hung.rule() == "section") {
    return absl::StrFormat(
        "%s made no progress for %.0f s in section '%s' (--section_timeout %s=%g)", who,
        hung.silent_seconds(), Sanitize(hung.section(), 64), Sanitize(hung.section(), 64),
        hung.bound_seconds());
  }
  const std::string step = hung.step() >= 0 ? " after step " + std::to_string(hung.step()) : "";
  if (hung.rule() == "learned") {
    return absl::StrFormat("%s made no progress%s for %.0f s (learned bound %.1f s)", who, step,
                           hung.silent_seconds(), hung.bound_seconds());
  }
  return absl::StrFormat("%s made no progress%s for %.0f s (--hang_timeout %g)", who, step,
                         hung.silent_seconds(), hung.bound_seconds());
}

// The median of `values` (not empty): the middle one, or the mean of the middle two.
double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

}  // namespace

void Scheduler::OnProgress(KnownNode& node, const v1::ProgressReport& report) {
  const common::TimePoint now = clock_.Now();
  for (const auto& progress : report.ranks()) {
    auto it = node.workers.find(progress.rank());
    if (it == node.workers.end()) continue;
    v1::WorkerStatus& worker = it->second;
    if (worker.reports() == 0 && progress.reports() > 0) ledger_.OnFirstReport();
    worker.set_step(progress.step());
    if (progress.reports() > 0) restarts_.OnStep(progress.step());
    worker.set_reports(progress.reports());
    worker.set_step_seconds(std::max(0.0, progress.step_seconds()));
    worker.set_section(Sanitize(progress.section(), 64));
    if (progress.has_collectives()) {
      worker.set_collectives(progress.collectives());
      worker.set_last_op(Sanitize(progress.last_op(), 64));
    }
    if (progress.reports() > 0) {
      const double age = std::clamp(progress.age_seconds(), 0.0, 1e9);
      node.reported_at[progress.rank()] = now - common::DurationOf(age);
    }
    if (progress.has_checkpoint() && progress.checkpoint() >= 0) {
      worker.set_checkpoint(progress.checkpoint());
      ledger_.OnCheckpoint(
          progress.checkpoint(),
          common::DurationOf(std::clamp(progress.checkpoint_age_seconds(), 0.0, 1e9)));
    }
  }
}

void Scheduler::ReclassifyStall() {
  // A silence longer than this many of the job's usual (median) steps, and at least 1 s, was
  // a stall: the rest of it is moved out of training.
  constexpr double kStallSteps = 3;
  std::vector<double> times;
  std::optional<common::TimePoint> last;
  for (const auto& [id, node] : nodes_) {
    if (!node.joined) continue;
    for (const auto& [rank, worker] : node.workers) {
      if (worker.step_seconds() > 0) times.push_back(worker.step_seconds());
    }
    for (const auto& [rank, at] : node.reported_at) last = std::max(last.value_or(at), at);
  }
  if (times.empty() || !last) return;
  const common::Duration usual = std::max<common::Duration>(
      common::DurationOf(kStallSteps * Median(std::move(times))), std::chrono::seconds(1));
  const common::Duration silence = clock_.Now() - *last;
  if (silence > usual) ledger_.Reclassify(LedgerPhase::kStalled, silence - usual);
}

void Scheduler::OnRankHung(KnownNode& node, const v1::RankHung& hung) {
  const std::string message = DescribeHang(hung, node.join.node_name);
  if (state_ != JobState::kRunning) {
    // Already capturing or stopping: one report per hang, however many ranks hung with it.
    common::Logger("scheduler")->debug("also hung: {}", message);
    return;
  }
  common::Logger("scheduler")->error("hang: {}", message);
  Record(Event::kRankHung, {{"generation", generation_},
                            {"rank", hung.rank()},
                            {"node", node.join.node_name},
                            {"silent_seconds", hung.silent_seconds()},
                            {"bound_seconds", hung.bound_seconds()},
                            {"rule", Sanitize(hung.rule(), 16)},
                            {"section", Sanitize(hung.section(), 64)}});
  CountFailure(FailureCause::kHang);
  failed_at_ = std::make_pair(generation_, clock_.Now());
  // The rank's silence was a stall, not training.
  ledger_.Reclassify(LedgerPhase::kStalled,
                     common::DurationOf(std::clamp(hung.silent_seconds(), 0.0, 1e9)));
  Enter(JobState::kCapturing, message);
  v1::RootCause root_cause;
  root_cause.set_host(node.join.node_name);
  root_cause.set_rank(hung.rank());
  if (auto w = node.workers.find(hung.rank()); w != node.workers.end()) {
    root_cause.set_pid(w->second.pid());
  }
  hang_capture_.Begin(message, std::move(root_cause));
}

void Scheduler::OnHangJudged(HangVerdict verdict) {
  if (state_ != JobState::kCapturing) return;
  BeginStopping({StopReason::Kind::kHung, std::move(verdict.message), std::move(verdict.root_cause),
                 std::move(verdict.groups)});
}

// Stacks a node captured: for `gangrun stacks` (a request's id) or for the hang.
void Scheduler::OnStacksCaptured(int node_id, const v1::StacksCaptured& captured) {
  if (captured.request() != 0) return stacks_requests_.OnCaptured(node_id, captured);
  if (state_ == JobState::kCapturing) hang_capture_.OnCaptured(node_id, captured);
}

namespace {

// The rank a torch store key names: its last part is the rank ("…/0/3", gloo's address) or
// "rank_<r>" (gloo's host name); -1 when it names none below `world`.
int RankOfKey(const std::string& key, int world) {
  std::string last = key.substr(key.rfind('/') + 1);
  if (last.rfind("rank_", 0) == 0) last = last.substr(5);
  int rank = -1;
  if (last.empty() || last.size() > 9 || !absl::SimpleAtoi(last, &rank)) return -1;
  return rank >= 0 && rank < world ? rank : -1;
}

}  // namespace

void Scheduler::OnTorchStoreWait(const std::vector<std::string>& keys, size_t waits,
                                 common::Duration waited) {
  if (state_ != JobState::kRunning) return;
  std::set<int> ranks;
  for (const auto& key : keys) {
    if (int rank = RankOfKey(key, tally_.world); rank >= 0) ranks.insert(rank);
  }
  v1::RootCause root_cause;
  std::vector<std::string> named;
  for (int rank : ranks) {
    std::string where = "rank " + std::to_string(rank);
    for (const auto& [id, node] : nodes_) {
      auto worker = node.workers.find(rank);
      if (worker == node.workers.end()) continue;
      where += " (" + node.join.node_name + ", pid " + std::to_string(worker->second.pid()) + ")";
      if (named.empty()) {
        root_cause.set_host(node.join.node_name);
        root_cause.set_rank(rank);
        root_cause.set_pid(worker->second.pid());
      }
    }
    if (named.size() < 8) named.push_back(std::move(where));
  }
  std::string quoted;
  for (size_t i = 0; i < keys.size() && i < 4; ++i) {
    quoted += (i == 0 ? "'" : ", '") + Sanitize(keys[i], 256) + "'";
  }
  if (keys.size() > 4) quoted += " and " + std::to_string(keys.size() - 4) + " more";
  const double seconds = std::chrono::duration<double>(waited).count();
  const std::string message = absl::StrFormat(
      "%d wait(s) in the torch store for %.0f s on keys no rank has set (%s): %s", waits, seconds,
      quoted,
      named.empty() ? std::string("no rank is named by them")
                    : absl::StrJoin(named, ", ") + (ranks.size() > named.size() ? ", ..." : "") +
                          (ranks.size() == 1 ? " never set its key" : " never set theirs"));
  common::Logger("scheduler")->warn("{}", message);
  Record(Event::kStoreWait, {{"generation", generation_},
                             {"waits", waits},
                             {"waited_seconds", seconds},
                             {"ranks", std::vector<int>(ranks.begin(), ranks.end())}});
  if (owner_.on_note) owner_.on_note(message);
  if (options_.progress_rules.hang_timeout_seconds() <= 0 || named.empty()) return;
  // Past the start-up (a rank has made progress), a long wait may be the script's own (a key a
  // rank sets after a long computation): said, not stopped.
  for (const auto& [id, node] : nodes_) {
    for (const auto& [rank, worker] : node.workers) {
      if (worker.reports() > 0) return;
    }
  }
  // A hang rule is set and the start-up cannot complete: a hang, stopped now rather than at
  // torch's own timeout (30 min for gloo, 10 for NCCL).
  CountFailure(FailureCause::kHang);
  failed_at_ = std::make_pair(generation_, clock_.Now());
  ledger_.Reclassify(LedgerPhase::kStalled, waited);  // the wait was a stall, not training
  StopReason reason{StopReason::Kind::kHung, "a hang at start-up: " + message, {}, {}};
  reason.root_cause = std::move(root_cause);
  BeginStopping(std::move(reason));
}

void Scheduler::OnTimerExpired(KnownNode& node, const v1::TimerExpired& expired) {
  const std::string scope = Sanitize(expired.scope(), kMaxNameBytes);
  const std::string message = absl::StrFormat(
      "the torch timer '%s' of rank %d on %s expired (pid %d was sent %s)", scope, expired.rank(),
      node.join.node_name, expired.pid(), common::SignalName(expired.signal()));
  common::Logger("scheduler")->error("hang: {}", message);
  Record(Event::kTimerExpired, {{"generation", generation_},
                                {"rank", expired.rank()},
                                {"node", node.join.node_name},
                                {"scope", scope},
                                {"pid", expired.pid()},
                                {"signal", expired.signal()}});
  if (!Live()) return;
  CountFailure(FailureCause::kHang);
  failed_at_ = std::make_pair(generation_, clock_.Now());
  StopReason reason{StopReason::Kind::kHung, message, {}, {}};
  reason.root_cause.set_host(node.join.node_name);
  reason.root_cause.set_rank(expired.rank());
  reason.root_cause.set_pid(expired.pid());
  BeginStopping(std::move(reason));
}

// Straggler rule: among the ranks with a recent step time (seconds per step over their last
// node::kStepWindow steps), one whose step time exceeds straggler_factor x the median is a
// straggler; at least two ranks with a step time are needed for a median to differ from.
void Scheduler::AddProgress(v1::GetStatusResponse& status) const {
  std::vector<double> times;
  for (const auto& node : status.nodes()) {
    for (const auto& worker : node.workers()) {
      if (worker.step_seconds() > 0) times.push_back(worker.step_seconds());
    }
  }
  if (times.size() < 2) return;
  const double median = Median(std::move(times));
  status.set_median_step_seconds(median);
  int stragglers = 0;
  for (auto& node : *status.mutable_nodes()) {
    for (auto& worker : *node.mutable_workers()) {
      const bool straggler = worker.step_seconds() > options_.straggler_factor * median;
      worker.set_straggler(straggler);
      stragglers += straggler;
    }
  }
  status.set_stragglers(stragglers);
}

}  // namespace gangrun::scheduler
