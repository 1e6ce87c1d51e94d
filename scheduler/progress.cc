// Progress supervision, the scheduler's half: the ranks' progress as nodes report it, hangs
// (a node judges a rank hung; the scheduler captures every rank's stack, says where each was
// and stops the generation as hung), torch timer expiries, and stragglers. Part of the
// Scheduler actor (scheduler.h): the same strand, the same state.

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/exit_status.h"
#include "common/logging.h"
#include "scheduler/hang_report.h"
#include "scheduler/scheduler.h"

namespace gangrun::scheduler {
namespace {

using Seconds = std::chrono::duration<double>;

// Margin over the nodes' own capture timeout for their answers to arrive.
constexpr common::Duration kCaptureMargin = std::chrono::seconds(5);

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

}  // namespace

void Scheduler::OnProgress(NodeState& node, const v1::ProgressReport& report) {
  const common::TimePoint now = clock_.Now();
  for (const auto& progress : report.ranks()) {
    auto it = node.workers.find(progress.rank());
    if (it == node.workers.end()) continue;
    v1::WorkerStatus& worker = it->second;
    worker.set_step(progress.step());
    if (progress.reports() > 0) policy_.OnStep(progress.step());
    worker.set_reports(progress.reports());
    worker.set_step_seconds(std::max(0.0, progress.step_seconds()));
    worker.set_section(Sanitize(progress.section(), 64));
    if (progress.has_collectives()) {
      worker.set_collectives(progress.collectives());
      worker.set_last_op(Sanitize(progress.last_op(), 64));
    }
    if (progress.reports() > 0) {
      const double age = std::clamp(progress.age_seconds(), 0.0, 1e9);
      node.reported_at[progress.rank()] =
          now - std::chrono::duration_cast<common::Duration>(Seconds(age));
    }
  }
}

void Scheduler::OnRankHung(NodeState& node, const v1::RankHung& hung) {
  const std::string message = DescribeHang(hung, node.join.node_name);
  if (state_ != State::kRunning) {
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
  Enter(State::kCapturing, message);
  capture_.emplace();
  capture_->message = message;
  capture_->root_cause.set_host(node.join.node_name);
  capture_->root_cause.set_rank(hung.rank());
  if (auto w = node.workers.find(hung.rank()); w != node.workers.end()) {
    capture_->root_cause.set_pid(w->second.pid());
  }
  const double timeout = std::max(0.1, options_.progress_rules.stack_timeout_seconds());
  for (auto& [id, other] : nodes_) {
    if (!other.joined || other.link == nullptr || other.ended) continue;
    v1::NodeCommand command;
    command.mutable_capture_stacks()->set_reason(message);
    command.mutable_capture_stacks()->set_timeout_seconds(timeout);
    SendTo(other, std::move(command));
    capture_->waiting.insert(id);
  }
  if (capture_->waiting.empty()) return FinishCapture();
  capture_->timer =
      clock_.After(std::chrono::duration_cast<common::Duration>(Seconds(timeout)) + kCaptureMargin,
                   [this] { FinishCapture(); });
}

// What the scheduler keeps of a node's stack: bounded, printable, with the node's name.
v1::RankStack Scheduler::KeptStack(const NodeState& node, const v1::RankStack& stack) {
  v1::RankStack kept;
  kept.set_rank(stack.rank());
  kept.set_pid(stack.pid());
  kept.set_host(node.join.node_name);
  kept.set_kind(Sanitize(stack.kind(), 16));
  kept.set_where(Sanitize(stack.where(), kMaxNameBytes));
  kept.set_error(Sanitize(stack.error(), kMaxReasonBytes));
  if (stack.has_collectives()) {
    kept.set_collectives(std::max<int64_t>(0, stack.collectives()));
    kept.set_last_op(Sanitize(stack.last_op(), 64));
    kept.set_in_collective(stack.in_collective());
  }
  kept.set_flight_recorder(Sanitize(stack.flight_recorder(), 4096));
  return kept;
}

void Scheduler::OnStacksCaptured(int node_id, const v1::StacksCaptured& captured) {
  if (captured.request() != 0) return OnRequestedStacks(node_id, captured);
  if (state_ != State::kCapturing || !capture_ || capture_->waiting.erase(node_id) == 0) return;
  auto node = nodes_.find(node_id);
  if (node == nodes_.end()) return;
  for (const auto& stack : captured.stacks()) {
    capture_->stacks.push_back(KeptStack(node->second, stack));
  }
  if (capture_->waiting.empty()) FinishCapture();
}

void Scheduler::FinishCapture() {
  if (state_ != State::kCapturing || !capture_) return;
  std::vector<v1::StackGroup> groups = GroupStacks(capture_->stacks);
  StopReason reason{StopReason::Kind::kHung, capture_->message, capture_->root_cause, groups};
  // Where to look first: the odd one out (the smallest odd group), else the rank that hung.
  const v1::StackGroup* odd = nullptr;
  for (const auto& group : groups) {
    if (group.odd_one_out() && (odd == nullptr || group.ranks_size() < odd->ranks_size())) {
      odd = &group;
    }
  }
  if (odd == nullptr && !groups.empty()) reason.message += "; " + DescribeGroups(groups);
  if (odd != nullptr) {
    const int rank = odd->ranks(0);
    reason.root_cause.set_rank(rank);
    reason.root_cause.set_pid(0);
    for (const auto& [id, node] : nodes_) {
      auto w = node.workers.find(rank);
      if (w == node.workers.end()) continue;
      reason.root_cause.set_host(node.join.node_name);
      reason.root_cause.set_pid(w->second.pid());
    }
    // The headline leads with where to look, then how the hang was noticed.
    std::vector<v1::StackGroup> others;
    for (const auto& group : groups) {
      if (&group != odd) others.push_back(group);
    }
    std::vector<int> odd_ranks(odd->ranks().begin(), odd->ranks().end());
    const bool one = odd->ranks_size() == 1;
    std::string who = one ? "rank " + std::to_string(rank) + " on " + reason.root_cause.host()
                          : "ranks " + RankList(odd_ranks);
    if (odd->behind()) {
      who += (one ? " is" : " are") + std::string(" behind the others, at ") + GroupPlace(*odd) +
             " <- look here first";
    } else {
      who += (one ? " is the odd one out" : " are the odd ones out") + std::string(", in ") +
             odd->where();
    }
    reason.message = who + (others.empty() ? "" : "; " + DescribeGroups(others)) +
                     "; noticed when " + capture_->message;
  }
  SayFlightRecorderDumps(capture_->stacks);
  nlohmann::json json_groups = nlohmann::json::array();
  for (const auto& group : groups) {
    nlohmann::json json_group = {
        {"where", group.where()},
        {"ranks", std::vector<int>(group.ranks().begin(), group.ranks().end())},
        {"odd_one_out", group.odd_one_out()}};
    if (group.has_collectives()) {
      json_group["collectives"] = group.collectives();
      json_group["in_collective"] = group.in_collective();
      json_group["behind"] = group.behind();
    }
    json_groups.push_back(std::move(json_group));
  }
  Record(Event::kHang, {{"generation", generation_},
                        {"message", reason.message},
                        {"rank", reason.root_cause.rank()},
                        {"groups", std::move(json_groups)}});
  // The whole verdict is the job's report (and the event above); this line names the culprit.
  common::Logger("scheduler")
      ->error("hang in generation {}: {}", generation_,
              reason.message.substr(0, reason.message.find("; ")));
  BeginStopping(std::move(reason));
}

// Where the hang's NCCL flight recorder dumps were kept (node/flight_recorder.h).
void Scheduler::SayFlightRecorderDumps(const std::vector<v1::RankStack>& stacks) {
  std::vector<std::string> dumps;
  nlohmann::json json_dumps = nlohmann::json::array();
  for (const auto& stack : stacks) {
    if (stack.flight_recorder().empty()) continue;
    dumps.push_back("rank " + std::to_string(stack.rank()) + " on " + stack.host() + ": " +
                    stack.flight_recorder());
    json_dumps.push_back(
        {{"rank", stack.rank()}, {"node", stack.host()}, {"path", stack.flight_recorder()}});
  }
  if (dumps.empty()) return;
  std::string list;
  for (size_t i = 0; i < dumps.size() && i < 8; ++i) list += (i > 0 ? ", " : "") + dumps[i];
  if (dumps.size() > 8) list += absl::StrFormat(" and %d more", dumps.size() - 8);
  common::Logger("scheduler")
      ->error("hang: NCCL flight recorder dumps of {} rank(s), beside their logs: {}", dumps.size(),
              list);
  Record(Event::kFlightRecorder, {{"generation", generation_}, {"dumps", std::move(json_dumps)}});
}

void Scheduler::OnTimerExpired(NodeState& node, const v1::TimerExpired& expired) {
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
  std::sort(times.begin(), times.end());
  const size_t mid = times.size() / 2;
  const double median = times.size() % 2 == 1 ? times[mid] : (times[mid - 1] + times[mid]) / 2;
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
