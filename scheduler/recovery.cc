// The scheduler's recovery paths: restarts with backoff, waiting for a lost node's
// replacement, and elastic membership (re-forming, releasing nodes, `gangrun scale`).
// Part of the Scheduler actor (scheduler.h): the same strand, the same state.

#include <algorithm>

#include "common/logging.h"
#include "proto/conversions.h"
#include "scheduler/peer_checks.h"
#include "scheduler/scheduler.h"

namespace gangrun::scheduler {

void Scheduler::WaitForReplacement() {
  Enter(JobState::kAwaitingReplacement, lost_node_);
  stopping_.reset();
  formation_.Begin(clock_.Now());
  if (MembershipComplete()) return Form();  // a spare took the place
  if (!options_.await_replacement && spare_pool_.admitted() >= options_.spare_nodes &&
      !rejoin_timer_) {
    // Nothing would start a launcher for it (a daemon's job) and every spare has come: the
    // job ends now. (A spare still on its way takes the place when it joins; a place held for
    // its launcher goes to a spare when the hold ends.)
    v1::JobOutcome outcome;
    outcome.set_kind(v1::JobOutcome::KIND_NODE_LOST);
    outcome.set_message(lost_node_ + "; no spare is left to take its place");
    return Finish(std::move(outcome));
  }
  common::Logger("scheduler")
      ->warn("{}; waiting for a node to take its place ({} of {} restarts left)", lost_node_,
             restarts_.max() - restarts_.BudgetUsed(), restarts_.max());
  LogProgress();
}

void Scheduler::OnFormationTimeout() {
  if (state_ == JobState::kAwaitingReplacement && rejoin_timer_) {
    // No launcher came back within --cluster_time_out: the places held for one go to the
    // spares now, before the hold's end.
    common::Logger("scheduler")->warn("--cluster_time_out passed: the spares take the held places");
    rejoin_timer_.reset();
    FillHoles(/*end_holds=*/true);
    if (state_ != JobState::kAwaitingReplacement) return;
  }
  if (state_ == JobState::kAwaitingReplacement) {
    v1::JobOutcome outcome;
    outcome.set_kind(v1::JobOutcome::KIND_NODE_LOST);
    outcome.set_message(lost_node_ + "; no node took its place within the cluster timeout");
    return Finish(std::move(outcome));
  }
  if (state_ != JobState::kForming) return;
  int workers = 0;
  std::string present;
  for (const auto& [id, node] : nodes_) {
    if (!node.joined) continue;
    workers += node.join.local_worker_num;
    present += (present.empty() ? "" : ", ") + Describe(node);
  }
  v1::JobOutcome outcome;
  outcome.set_kind(v1::JobOutcome::KIND_FORMATION_FAILED);
  // The report says "the cluster did not form: " before it.
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(options_.cluster_timeout).count();
  outcome.set_message(
      "--cluster_time_out (" + std::to_string(seconds) + " s) passed with " +
      std::to_string(workers) + " of " + std::to_string(options_.world_size) +
      " workers joined (present: " + (present.empty() ? "none" : present) + "); " +
      std::to_string(options_.world_size - workers) + " worker(s) never came" +
      (formation_.RefusedText().empty() ? "" : "; refused: " + formation_.RefusedText()));
  CountFailure(FailureCause::kFormationTimeout);
  Finish(std::move(outcome));
}

void Scheduler::Reform(const std::string& why) {
  membership_changed_ = true;
  Record(Event::kMembershipChanged, {{"reason", why}, {"workers", membership_.workers}});
  BeginStopping(
      {StopReason::Kind::kReform,
       why + ": the job re-forms with " + std::to_string(membership_.workers) + " workers",
       {},
       {}});
  MaybeGenerationOver();
}

void Scheduler::Release(int node_id, const std::string& why) {
  KnownNode& node = nodes_.at(node_id);
  Record(Event::kNodeReleased, {{"node", node.join.node_name}, {"reason", why}});
  v1::NodeCommand command;
  v1::JobOutcome* outcome = command.mutable_finished()->mutable_outcome();
  outcome->set_kind(v1::JobOutcome::KIND_SUCCEEDED);
  outcome->set_message(why);
  SendAndClose(node, std::move(command));
  membership_.Remove(node.join);
  Forget(node_id);
}

absl::Status Scheduler::Scale(int target) {
  if (!Elastic()) {
    return absl::FailedPreconditionError("the job is not elastic (--worker_num MIN:MAX)");
  }
  if (target > kMaxWorldSize) {
    return absl::InvalidArgumentError("cannot scale to " + std::to_string(target) + ": at most " +
                                      std::to_string(kMaxWorldSize) + " workers");
  }
  if (target < min_world()) {
    return absl::InvalidArgumentError("cannot scale to " + std::to_string(target) +
                                      ": the job's minimum is " + std::to_string(min_world()));
  }
  if (state_ == JobState::kFinished) return absl::FailedPreconditionError("the job is over");
  common::Logger("scheduler")->info("scaling the job to at most {} workers", target);
  Record(Event::kScaled, {{"worker_num", target}});
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
  const bool forming = state_ == JobState::kForming || state_ == JobState::kAwaitingReplacement;
  if (released && !forming) Reform("scaled to " + std::to_string(target));
  return absl::OkStatus();
}

std::string Scheduler::EndedWhy() const {
  if (!lost_node_.empty() && (!stopping_ || stopping_->kind == StopReason::Kind::kNodeLost)) {
    return lost_node_;
  }
  if (!stopping_) return "the generation ended";
  const v1::RootCause& cause = stopping_->root_cause;
  const std::string who = cause.rank() >= 0 ? "rank " + std::to_string(cause.rank())
                                            : std::string("the MindSpore scheduler process");
  const std::string where = cause.host().empty() ? "" : " on " + cause.host();
  const std::string log = cause.log_path().empty() ? "" : " (log: " + cause.log_path() + ")";
  switch (stopping_->kind) {
    case StopReason::Kind::kWorkerFailed:
      return who + where + " " + proto::FromProto(cause.exit()).ToString() + log;
    case StopReason::Kind::kHung:
      return "the job hung: " + stopping_->message +
             (cause.rank() >= 0 ? "; look at " + who + where + " first" + log : "");
    default:
      return stopping_->message;
  }
}

void Scheduler::NoteEnded(const std::string& then) {
  last_note_ = "generation " + std::to_string(generation_) + " ended: " + EndedWhy() + "; " + then;
  if (owner_.on_note) owner_.on_note(last_note_);
}

void Scheduler::ScheduleRestart() {
  const common::Duration delay = restarts_.Next();
  const v1::RootCause& cause = stopping_->root_cause;
  const std::string what =
      stopping_->kind == StopReason::Kind::kHung
          ? "the job hung"
          : (cause.rank() >= 0 ? "rank " + std::to_string(cause.rank())
                               : std::string("the MindSpore scheduler process")) +
                " on " + cause.host() + " failed";
  const auto delay_ms = std::chrono::duration_cast<std::chrono::milliseconds>(delay).count();
  common::Logger("scheduler")
      ->warn("{} in generation {}; restarting in {} ms ({} of {} restarts left after this one)",
             what, generation_, delay_ms, restarts_.max() - restarts_.BudgetUsed(),
             restarts_.max());
  NoteEnded("restarting in " +
            (delay_ms % 1000 == 0 ? std::to_string(delay_ms / 1000) + " s"
                                  : std::to_string(delay_ms) + " ms") +
            " (" + restarts_.Count() + ")");
  Record(Event::kRestartScheduled, {{"generation", generation_},
                                    {"delay_ms", delay_ms},
                                    {"restart", restarts_.used()},
                                    {"max_restarts", restarts_.max()}});
  Enter(JobState::kBackingOff, what);
  stopping_.reset();
  AwaitHealth();  // the nodes check themselves while the backoff runs
  restart_timer_ = clock_.After(delay, [this] {
    restart_timer_.reset();
    timing_.requested_at = clock_.Now();
    Enter(JobState::kForming, "the backoff passed");
    Form();  // same ranks unless the membership changed meanwhile
  });
}

// After a failed generation: the restarts' judgement (scheduler/restarts.h), then what it
// says (the kStopping row of the table).
void Scheduler::AfterFailedGeneration(bool worker_failed) {
  using Action = Restarts::Decision::Action;
  const Restarts::Decision decision =
      restarts_.Judge(worker_failed ? &*stopping_ : nullptr, !lost_node_.empty());
  switch (decision.action) {
    case Action::kStop:
      NoteEnded(decision.note);
      return Finish(CurrentOutcome());
    case Action::kWaitForNode:
      NoteEnded(decision.note);
      return WaitForReplacement();
    case Action::kExclude:
      if (Exclude(stopping_->root_node, FailureCause::kExcluded, decision.note)) {
        return WaitForReplacement();  // no spare took its place
      }
      break;
    case Action::kRestart:
      break;
  }
  ScheduleRestart();
}

}  // namespace gangrun::scheduler
