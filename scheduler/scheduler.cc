// The scheduler's entry points and what a lost node means. Part of the
// Scheduler actor (scheduler.h): the same strand, the same state.

#include "scheduler/scheduler.h"

#include <algorithm>

#include "common/logging.h"
#include "scheduler/adoption.h"

namespace gangrun::scheduler {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

Scheduler::Scheduler(common::Clock& clock, Options options)
    : clock_(clock), options_(std::move(options)), policy_(options_.recovery) {
  identity_.world_size = options_.world_size;
  identity_.min_world_size = min_world();
  identity_.run_id = options_.run_id;
  identity_.personality = options_.personality;
}

Scheduler::~Scheduler() = default;

std::map<int, NodeDirectory::Place> Scheduler::RankPlaces() const {
  std::map<int, Place> places;
  for (const auto& [id, node] : nodes_) {
    if (!node.joined || node.link == nullptr) continue;
    for (const auto& [rank, worker] : node.workers) {
      places[rank] = Place{id, node.join.node_name, worker.pid(), !node.ended};
    }
  }
  return places;
}

std::string Scheduler::HostOf(int node_id) const {
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? std::string() : it->second.join.node_name;
}

bool Scheduler::Reachable(int node_id) const {
  auto it = nodes_.find(node_id);
  return it != nodes_.end() && it->second.link != nullptr && !it->second.lost;
}

void Scheduler::Send(int node_id, v1::NodeCommand command) {
  if (Reachable(node_id)) SendTo(nodes_.at(node_id), std::move(command));
}

void Scheduler::RequestStacks(const v1::StacksRequest& request, StacksDone done) {
  GANGRUN_ON_STRAND(strand_);
  stacks_requests_.Request(request, std::move(done));
}

absl::StatusOr<uint64_t> Scheduler::OpenLogs(const v1::LogsRequest& request,
                                             std::shared_ptr<LogsSink> sink) {
  GANGRUN_ON_STRAND(strand_);
  return logs_.Open(request, std::move(sink));
}

void Scheduler::LogsWritten(uint64_t id) {
  GANGRUN_ON_STRAND(strand_);
  logs_.Written(id);
}

void Scheduler::CloseLogs(uint64_t id) {
  GANGRUN_ON_STRAND(strand_);
  logs_.Close(id);
}

void Scheduler::Enter(JobState to, std::string_view why) {
  CheckEdge(state_, to);
  common::Logger("scheduler")
      ->debug("{} -> {}: {}", JobStateName(state_), JobStateName(to), std::string(why));
  if (telemetry_ != nullptr) {
    telemetry_->RecordTransition(std::string(JobStateName(state_)), std::string(JobStateName(to)),
                                 std::string(why));
  }
  state_ = to;
  ledger_.OnState(to);
  if (!Forming()) wait_reminder_.Stop();
}

void Scheduler::Start() {
  GANGRUN_ON_STRAND(strand_);
  generation_requested_at_ = started_at_ = clock_.Now();
  if (options_.takeover) {
    generation_ = options_.takeover->generation;
    restarts_used_ = options_.takeover->restarts_used;
    common::Logger("scheduler")
        ->warn("taking the job over after generation {}: {}", generation_, options_.takeover->lost);
    if (generation_ > 0 && !Elastic()) {
      // As for any lost node of a fixed-size job: the survivors and a node in the lost one's
      // place (its launcher started again, or a spare) form the next generation, a restart.
      lost_node_ = options_.takeover->lost;
      time_limit_.Arm();
      CheckHeartbeats();
      return WaitForReplacement();
    }
  }
  if (options_.adopt_timeout) {
    adoption_ = std::make_unique<Adoption>();
    ArmAdoption();
    time_limit_.Arm();
    CheckHeartbeats();
    return;
  }
  ArmFormationTimeout();
  time_limit_.Arm();
  CheckHeartbeats();
}

void Scheduler::ArmFormationTimeout() {
  formation_timer_.reset();
  formation_deadline_.reset();
  if (options_.cluster_timeout >= common::Duration::zero()) {
    formation_deadline_ = started_at_ + options_.cluster_timeout;
  }
  wait_reminder_.Start(formation_deadline_);
  if (options_.cluster_timeout >= common::Duration::zero()) {
    const common::Duration left = options_.cluster_timeout - (clock_.Now() - started_at_);
    formation_timer_ =
        clock_.After(std::max(left, common::Duration::zero()), [this] { OnFormationTimeout(); });
  }
}

int Scheduler::AddNode(NodeLink* link) {
  GANGRUN_ON_STRAND(strand_);
  int id = next_node_id_++;
  nodes_[id].id = id;
  nodes_[id].link = link;
  nodes_[id].last_seen = nodes_[id].last_message = clock_.Now();
  nodes_[id].connected_at = clock_.Now();
  return id;
}

void Scheduler::OnNodeEvent(int node_id, const v1::NodeEvent& event) {
  GANGRUN_ON_STRAND(strand_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return;
  // `gangrun logs` reads the last of the logs while the job ends.
  if (event.has_log_read() && it->second.joined) return logs_.OnLogRead(node_id, event.log_read());
  if (state_ == State::kFinished) return;
  NodeState& node = it->second;
  node.last_seen = node.last_message = clock_.Now();
  if (event.has_heartbeat()) return;
  if (event.has_join()) return OnJoin(node_id, node, event.join());
  if (event.has_health_checked()) return OnHealthChecked(node, event.health_checked());
  if (event.has_forward_signal() && (node.joined || node.spare)) {
    return OnForwardSignal(node, event.forward_signal().signal());
  }
  if (event.has_stop_request() && !node.joined) {
    // Only a node may ask to stop the job this way; anyone else uses Scheduler.Stop, with the
    // job's credentials.
    common::Logger("scheduler")->warn("ignoring a stop request from a session that never joined");
    return;
  }
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
    if (node.spare && state_ != State::kFinished) {
      common::Logger("scheduler")->warn("spare {} left", Describe(node));
    }
    nodes_.erase(it);
    HealthAnswered(node_id);  // a spare's answer will not come
    return;
  }
  if (state_ == State::kBackingOff) {
    membership_.Remove(node.join);
    if (TakeSpareFor(node)) {
      // The next generation has the spare in its place.
      RecordLoss(node, FailureCause::kConnectionLost,
                 "its connection broke while the job backed off");
      policy_.Forget(node_id);
      nodes_.erase(it);
      HealthAnswered(node_id);
      return;
    }
    membership_.Add(node.join);
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

void Scheduler::RecordLoss(const NodeState& node, FailureCause cause, const std::string& why) {
  common::Logger("scheduler")->error("lost {}: {}", Describe(node), why);
  CountFailure(cause);
  Record(Event::kNodeLost, {{"node", node.join.node_name},
                            {"address", node.join.host_address},
                            {"pid", node.pid},
                            {"generation", generation_},
                            {"cause", FailureCauseName(cause)},
                            {"reason", why}});
}

// What a lost node means depends on the state: while forming, only that its workers no
// longer count; while a generation runs, an elastic job shrinks, a job with restarts left
// waits for a replacement, and any other job ends (NODE_LOST).
void Scheduler::OnNodeLost(int node_id, NodeState& node, FailureCause cause,
                           const std::string& reason) {
  const std::string why = clock_.Now() < stall_note_until_ ? reason + stall_note_ : reason;
  node.lost = true;
  HealthAnswered(node_id);  // a lost node answers no health round
  policy_.Forget(node_id);
  // Lost is final: a node that comes back after this (a cut that heals) is refused its old
  // session and ends, instead of finding a job that no longer counts it.
  if (node.link != nullptr) node.link->Drop();
  node.link = nullptr;
  RecordLoss(node, cause, why);
  const std::string what = Describe(node) + " was lost: " + why;
  if (node.spare || node.excluded) {
    nodes_.erase(node_id);  // not in the job: nothing else changes
    return;
  }
  // Its silence was spent detecting the loss, not training.
  if (Live() && cause == FailureCause::kHeartbeatTimeout) {
    ledger_.Reclassify(LedgerPhase::kDetecting, clock_.Now() - node.last_seen);
  }
  if (state_ == State::kForming || state_ == State::kAwaitingReplacement) {
    membership_.Remove(node.join);
    const bool replaced = generation_ > 0 && TakeSpareFor(node);
    nodes_.erase(node_id);  // its workers no longer count; another node may take its place
    if (replaced && MembershipComplete() && !AwaitHealth()) return Form();
    return LogProgress();
  }
  const bool recoverable =
      !stop_requested_ &&
      !(stopping_ && stopping_->kind == StopReason::Kind::kNodeLost && lost_node_.empty());
  const bool spare_fits = recoverable && SpareFor(node.join.local_worker_num) != nullptr;
  if (Elastic() && recoverable &&
      (spare_fits || membership_.workers - node.join.local_worker_num >= min_world())) {
    // An elastic job keeps its size with a spare, or shrinks: the survivors form a smaller job
    // (no restart is used).
    membership_.Remove(node.join);
    const bool replaced = TakeSpareFor(node);
    nodes_.erase(node_id);
    return Reform(replaced ? what + "; a spare takes its place" : what);
  }
  if (recoverable && BudgetLeft()) {
    // Survivors stop and a spare takes the lost node's place, or they wait for a node to take
    // it (the same host's launcher started again, typically); the restart budget stays with
    // the scheduler.
    lost_node_ = what;
    membership_.Remove(node.join);
    TakeSpareFor(node);
    nodes_.erase(node_id);
    BeginStopping({StopReason::Kind::kNodeLost, what, {}, {}});
    return MaybeGenerationOver();
  }
  BeginStopping({StopReason::Kind::kNodeLost, what, {}, {}});
  OnGenerationEnded(node);  // a lost node has no workers left to wait for
}

}  // namespace gangrun::scheduler
