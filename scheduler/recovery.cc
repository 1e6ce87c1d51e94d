// The scheduler's recovery paths: restarts with backoff, waiting for a lost node's
// replacement, and elastic membership (re-forming, releasing nodes, `gangrun scale`).
// Part of the Scheduler actor (scheduler.h): the same strand, the same state.

#include <algorithm>

#include "common/logging.h"
#include "scheduler/scheduler.h"

namespace gangrun::scheduler {

void Scheduler::WaitForReplacement() {
  phase_ = Phase::kForming;
  root_cause_.reset();
  common::Logger("scheduler")
      ->warn("{}; waiting for a node to take its place ({} of {} restarts left)",
             *awaiting_replacement_, options_.max_restarts - restarts_used_, options_.max_restarts);
  if (options_.cluster_timeout >= common::Duration::zero()) {
    formation_timer_ = clock_.After(options_.cluster_timeout, [this] { OnFormationTimeout(); });
  }
  LogProgress();
}

void Scheduler::Reform(const std::string& why) {
  membership_changed_ = true;
  Record("membership_changed", {{"reason", why}, {"workers", membership_.workers}});
  if (phase_ == Phase::kRunning) {
    phase_ = Phase::kStopping;
    AbortAll(why + ": the job re-forms with " + std::to_string(membership_.workers) + " workers");
  }
  MaybeGenerationOver();
}

void Scheduler::Release(int node_id, const std::string& why) {
  NodeState& node = nodes_.at(node_id);
  Record("node_released", {{"node", node.join.node_name}, {"reason", why}});
  v1::NodeCommand command;
  v1::JobOutcome* outcome = command.mutable_finished()->mutable_outcome();
  outcome->set_kind(v1::JobOutcome::KIND_SUCCEEDED);
  outcome->set_message(why);
  SendAndClose(node, std::move(command));
  membership_.Remove(node.join);
  nodes_.erase(node_id);
}

absl::Status Scheduler::Scale(int target) {
  if (!Elastic()) {
    return absl::FailedPreconditionError("the job is not elastic (--worker_num MIN:MAX)");
  }
  if (target > kMaxWorldSize) {
    return absl::InvalidArgumentError("cannot scale to " + std::to_string(target) +
                                      ": at most " + std::to_string(kMaxWorldSize) + " workers");
  }
  if (target < min_world()) {
    return absl::InvalidArgumentError("cannot scale to " + std::to_string(target) +
                                      ": the job's minimum is " + std::to_string(min_world()));
  }
  if (phase_ == Phase::kFinished) return absl::FailedPreconditionError("the job is over");
  common::Logger("scheduler")->info("scaling the job to at most {} workers", target);
  Record("scaled", {{"worker_num", target}});
  options_.world_size = target;
  // Release the nodes with the highest node ranks until the job fits.
  std::vector<std::pair<int, int>> by_rank;  // (node rank, id)
  for (const auto& [id, node] : nodes_) {
    if (node.joined) by_rank.emplace_back(node.slot.node_rank, id);
  }
  std::sort(by_rank.rbegin(), by_rank.rend());
  bool released = false;
  for (const auto& [rank, id] : by_rank) {
    if (membership_.workers <= target) break;
    const int workers = nodes_.at(id).join.local_worker_num;
    if (membership_.workers - workers < min_world()) continue;
    Release(id, "released: the job was scaled to " + std::to_string(target) + " workers");
    released = true;
  }
  if (membership_.workers > target) {
    return absl::FailedPreconditionError("no set of whole nodes brings the job to " +
                                         std::to_string(target) + " workers");
  }
  if (released && phase_ != Phase::kForming) Reform("scaled to " + std::to_string(target));
  return absl::OkStatus();
}

// Worked example: initial 1 s, cap 30 s: restarts wait 1, 2, 4, 8, 16, 30, 30, ... seconds.
void Scheduler::ScheduleRestart() {
  ++restarts_used_;
  common::Duration delay = options_.restart_backoff_initial;
  for (int i = 1; i < restarts_used_ && delay < options_.restart_backoff_cap; ++i) delay *= 2;
  delay = std::min(delay, options_.restart_backoff_cap);
  const auto& cause = *root_cause_;
  common::Logger("scheduler")
      ->warn(
          "{} on {} failed in generation {}; restarting in {} ms ({} of {} restarts left "
          "after this one)",
          cause.rank() >= 0 ? "rank " + std::to_string(cause.rank())
                            : std::string("the MindSpore scheduler process"),
          cause.host(), generation_,
          std::chrono::duration_cast<std::chrono::milliseconds>(delay).count(),
          options_.max_restarts - restarts_used_, options_.max_restarts);
  Record("restart_scheduled",
         {{"generation", generation_},
          {"delay_ms", std::chrono::duration_cast<std::chrono::milliseconds>(delay).count()},
          {"restart", restarts_used_},
          {"max_restarts", options_.max_restarts}});
  root_cause_.reset();
  restart_timer_ = clock_.After(delay, [this] {
    restart_timer_.reset();
    generation_requested_at_ = clock_.Now();
    Form();  // same ranks unless the membership changed meanwhile
  });
}

}  // namespace gangrun::scheduler
