// The scheduler's entry points, its heartbeat sweep and what a lost node means. Part of the
// Scheduler actor (scheduler.h): the same strand, the same state.

#include "scheduler/scheduler.h"

#include <algorithm>

#include "common/logging.h"

namespace gangrun::scheduler {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

Scheduler::Scheduler(common::Clock& clock, Options options)
    : clock_(clock), options_(std::move(options)) {
  identity_.world_size = options_.world_size;
  identity_.min_world_size = min_world();
  identity_.run_id = options_.run_id;
  identity_.personality = options_.personality;
}

Scheduler::~Scheduler() = default;

void Scheduler::Start() {
  GANGRUN_ON_STRAND(strand_);
  generation_requested_at_ = clock_.Now();
  if (options_.cluster_timeout >= common::Duration::zero()) {
    formation_timer_ = clock_.After(options_.cluster_timeout, [this] { OnFormationTimeout(); });
  }
  CheckHeartbeats();
}

int Scheduler::AddNode(NodeLink* link) {
  GANGRUN_ON_STRAND(strand_);
  int id = next_node_id_++;
  nodes_[id].link = link;
  nodes_[id].last_seen = clock_.Now();
  nodes_[id].connected_at = clock_.Now();
  return id;
}

void Scheduler::OnNodeEvent(int node_id, const v1::NodeEvent& event) {
  GANGRUN_ON_STRAND(strand_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || state_ == State::kFinished) return;
  NodeState& node = it->second;
  node.last_seen = clock_.Now();
  if (event.has_heartbeat()) return;
  if (event.has_join()) return OnJoin(node_id, node, event.join());
  if (event.has_stop_request()) {
    v1::StopRequest request;
    request.set_signal(StopSignal(event.stop_request().signal()));
    request.set_reason(Sanitize(event.stop_request().reason(), kMaxReasonBytes));
    return OnStopRequest(request);
  }
  if (!node.joined || event.generation() != generation_) {
    common::Logger("scheduler")
        ->warn("ignoring an event of generation {} from node {} (generation is {})",
               event.generation(), node_id, generation_);
    return;
  }
  if (!CheckEvent(node, event)) return;
  if (event.has_worker_started()) {
    OnWorkerStarted(node, event.worker_started());
  } else if (event.has_worker_exited()) {
    OnWorkerExited(node, event.worker_exited());
  } else if (event.has_generation_ended()) {
    OnGenerationEnded(node);
  } else if (event.has_progress()) {
    OnProgress(node, event.progress());
  } else if (event.has_rank_hung()) {
    OnRankHung(node, event.rank_hung());
  } else if (event.has_timer_expired()) {
    OnTimerExpired(node, event.timer_expired());
  } else if (event.has_stacks_captured()) {
    OnStacksCaptured(node_id, event.stacks_captured());
  }
}

void Scheduler::OnNodeDisconnected(int node_id) {
  GANGRUN_ON_STRAND(strand_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return;
  NodeState& node = it->second;
  node.link = nullptr;
  if (!node.joined || node.lost || state_ == State::kFinished) {
    nodes_.erase(it);
    return;
  }
  if (state_ == State::kBackingOff) {
    // Lost while waiting to restart: the next generation cannot have it.
    v1::JobOutcome outcome;
    outcome.set_kind(v1::JobOutcome::KIND_NODE_LOST);
    outcome.set_message(Describe(node) + " was lost before generation " +
                        std::to_string(generation_ + 1) + " could start");
    CountFailure(FailureCause::kConnectionLost);
    return Finish(std::move(outcome));
  }
  // A node whose part is done may go, unless a later generation could need it.
  const bool done = node.ended && (Live() || state_ == State::kStopping);
  if (done && !Elastic() && !BudgetLeft()) return;
  OnNodeLost(node_id, node, FailureCause::kConnectionLost, "its connection broke");
}

// Worked example: node_timeout 5 s gives a sweep every 1.25 s; a node last heard at t=10
// is lost by the first sweep after t=15, i.e. by t=16.25 at the latest. A sweep due at t=20
// that runs at t=29 (this process was stopped or its host stalled for 9 s) blames nobody:
// every node is treated as heard at t=29 and is lost only if it stays silent until t=34.
void Scheduler::CheckHeartbeats() {
  if (options_.node_timeout <= common::Duration::zero()) return;
  const common::TimePoint now = clock_.Now();
  const common::Duration period = options_.node_timeout / 4;
  if (sweep_due_ != common::TimePoint() && now - sweep_due_ > options_.node_timeout / 2) {
    OnSchedulerStalled(now - sweep_due_ + period);
  }
  CloseSilentSessions(now);
  std::vector<int> silent;
  for (auto& [id, node] : nodes_) {
    if (node.link == nullptr || node.link->InProcess()) continue;
    node.last_seen = std::max(node.last_seen, node.link->LastHeartbeat());
    if (node.joined && !node.lost && !node.ended && now - node.last_seen >= options_.node_timeout) {
      silent.push_back(id);
    }
  }
  for (int id : silent) {
    auto it = nodes_.find(id);
    if (it == nodes_.end() || state_ == State::kFinished) continue;
    auto silence = duration_cast<milliseconds>(now - it->second.last_seen);
    OnNodeLost(id, it->second, FailureCause::kHeartbeatTimeout,
               "no heartbeat for " + std::to_string(silence.count()) + " ms");
  }
  if (state_ == State::kFinished) return;
  sweep_due_ = now + period;
  heartbeat_timer_ = clock_.After(period, [this] { CheckHeartbeats(); });
}

void Scheduler::OnSchedulerStalled(common::Duration stalled) {
  const auto ms = duration_cast<milliseconds>(stalled).count();
  common::Logger("scheduler")
      ->warn(
          "the scheduler did not run for {} ms (its host stalled or its launcher was "
          "stopped); the nodes are not blamed for that silence",
          ms);
  Record(Event::kSchedulerStalled, {{"stalled_ms", ms}});
  const common::TimePoint now = clock_.Now();
  for (auto& [id, node] : nodes_) node.last_seen = now;
  stall_note_ = " (after this scheduler did not run for " + std::to_string(ms) + " ms)";
  stall_note_until_ = now + options_.node_timeout;
}

void Scheduler::CloseSilentSessions(common::TimePoint now) {
  std::vector<int> silent;
  for (const auto& [id, node] : nodes_) {
    if (!node.joined && node.link != nullptr && !node.link->InProcess() &&
        now - node.connected_at >= options_.join_timeout) {
      silent.push_back(id);
    }
  }
  for (int id : silent) {
    common::Logger("scheduler")
        ->warn("closing a session that did not join within {} s",
               std::chrono::duration_cast<std::chrono::seconds>(options_.join_timeout).count());
    v1::NodeCommand command;
    command.mutable_rejected()->set_reason("no join request within the join timeout");
    SendAndClose(nodes_.at(id), std::move(command));
    nodes_.erase(id);
  }
}

// What a lost node means depends on the state: while forming, only that its workers no
// longer count; while a generation runs, an elastic job shrinks, a job with restarts left
// waits for a replacement, and any other job ends (NODE_LOST).
void Scheduler::OnNodeLost(int node_id, NodeState& node, FailureCause cause,
                           const std::string& reason) {
  const std::string why = clock_.Now() < stall_note_until_ ? reason + stall_note_ : reason;
  node.lost = true;
  common::Logger("scheduler")->error("lost {}: {}", Describe(node), why);
  CountFailure(cause);
  Record(Event::kNodeLost, {{"node", node.join.node_name},
                            {"address", node.join.host_address},
                            {"pid", node.pid},
                            {"generation", generation_},
                            {"cause", FailureCauseName(cause)},
                            {"reason", why}});
  const std::string what = Describe(node) + " was lost: " + why;
  if (state_ == State::kForming || state_ == State::kAwaitingReplacement) {
    membership_.Remove(node.join);
    nodes_.erase(node_id);  // its workers no longer count; another node may take its place
    return LogProgress();
  }
  const bool recoverable =
      !stop_requested_ &&
      !(stopping_ && stopping_->kind == StopReason::Kind::kNodeLost && lost_node_.empty());
  if (Elastic() && recoverable && membership_.workers - node.join.local_worker_num >= min_world()) {
    // An elastic job shrinks: the survivors form a smaller job (no restart is used).
    membership_.Remove(node.join);
    nodes_.erase(node_id);
    return Reform(what);
  }
  if (recoverable && BudgetLeft()) {
    // Survivors stop and wait for a node to take its place (the same host's launcher
    // started again, typically); the restart budget stays with the scheduler.
    lost_node_ = what;
    membership_.Remove(node.join);
    nodes_.erase(node_id);
    BeginStopping({StopReason::Kind::kNodeLost, what, {}, {}});
    return MaybeGenerationOver();
  }
  BeginStopping({StopReason::Kind::kNodeLost, what, {}, {}});
  OnGenerationEnded(node);  // a lost node has no workers left to wait for
}

}  // namespace gangrun::scheduler
