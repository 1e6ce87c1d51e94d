// The scheduler's entry points and what a lost node means. Part of the
// Scheduler actor (scheduler.h): the same strand, the same state.

#include "scheduler/scheduler.h"

#include <algorithm>

#include "common/logging.h"
#include "scheduler/adoption.h"
#include "scheduler/torch_store.h"

namespace gangrun::scheduler {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

Scheduler::Scheduler(common::Clock& clock, Options options)
    : clock_(clock),
      options_(std::move(options)),
      formation_(clock_, options_.cluster_timeout,
                 {[this] { OnFormationTimeout(); },
                  [this](const std::string& left) { RemindWaiting(left); }}),
      logs_(*this, clock_),
      stacks_requests_(*this, clock_, options_.progress_rules.stack_timeout_seconds()),
      hang_capture_(*this, clock_, options_.progress_rules.stack_timeout_seconds(),
                    [this](HangVerdict verdict) { OnHangJudged(std::move(verdict)); }),
      ledger_(clock_, options_.queued_since),
      restarts_(*this,
                {options_.max_restarts, options_.restart_backoff_initial,
                 options_.restart_backoff_cap, options_.recovery, options_.restarts_forgiven}),
      spare_pool_(options_.spare_nodes),
      health_rounds_(*this,
                     [this] {
                       if (Forming()) Form();
                     }),
      liveness_(*this, clock_,
                {options_.node_timeout, options_.heartbeat_interval, options_.join_timeout},
                {[this](int id) { return StandingOf(id); },
                 [this](int id, const std::string& why) { OnSilent(id, why); },
                 [this](int id) { CloseUnjoined(id); }}),
      time_limit_(
          *this, clock_,
          {options_.time_limit, options_.time_limit_signal, options_.time_limit_signal_before},
          [this](int signal, const std::string& why) { SignalWorkers(signal, why); },
          [this](const std::string& why) { OnTimeLimit(why); }) {
  identity_.world_size = options_.world_size;
  identity_.min_world_size = min_world();
  identity_.run_id = options_.run_id;
  identity_.personality = options_.personality;
  ledger_.SetOnChange([this](const Ledger::Change& change) {
    const double seconds = common::SecondsOf(change.seconds);
    if (change.moved) {
      return Record(Event::kPhaseMoved, {{"generation", change.generation},
                                         {"from", std::string(LedgerPhaseName(change.from))},
                                         {"to", std::string(LedgerPhaseName(change.to))},
                                         {"seconds", seconds}});
    }
    nlohmann::json fields = {{"generation", generation_},
                             {"phase", std::string(LedgerPhaseName(change.to))}};
    if (change.from != change.to) {
      fields["previous"] = std::string(LedgerPhaseName(change.from));
      fields["previous_seconds"] = seconds;
    }
    Record(Event::kPhase, std::move(fields));
  });
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

void Scheduler::WatchConnections(ActivityReader reader) {
  GANGRUN_ON_STRAND(strand_);
  liveness_.Watch(std::move(reader));
}

Liveness::Standing Scheduler::StandingOf(int node_id) const {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return Liveness::Standing::kIgnored;
  const KnownNode& node = it->second;
  if (!node.joined && !spare_pool_.Has(node_id) && !node.excluded)
    return Liveness::Standing::kUnjoined;
  const bool judged =
      (node.joined && !node.lost && !node.ended) || (spare_pool_.Has(node_id) && !node.lost);
  return judged ? Liveness::Standing::kJudged : Liveness::Standing::kIgnored;
}

void Scheduler::Forget(int node_id) {
  liveness_.Forget(node_id);
  spare_pool_.Remove(node_id);
  nodes_.erase(node_id);
}

void Scheduler::OnSilent(int node_id, const std::string& why) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || state_ == JobState::kFinished) return;
  OnNodeLost(node_id, it->second, FailureCause::kHeartbeatTimeout, why);
}

void Scheduler::CloseUnjoined(int node_id) {
  auto it = nodes_.find(node_id);
  if (it != nodes_.end()) {
    v1::NodeCommand command;
    command.mutable_rejected()->set_reason("no join request within the join timeout");
    SendAndClose(it->second, std::move(command));
  }
  Forget(node_id);
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
  if (owner_.telemetry != nullptr) {
    owner_.telemetry->RecordTransition(std::string(JobStateName(state_)),
                                       std::string(JobStateName(to)), std::string(why));
  }
  state_ = to;
  ledger_.OnState(to);
  if (!Forming()) formation_.StopReminding();
}

void Scheduler::Start() {
  GANGRUN_ON_STRAND(strand_);
  timing_.requested_at = started_at_ = clock_.Now();
  ledger_.Open();
  if (options_.takeover) {
    generation_ = options_.takeover->generation;
    restarts_.Resume(options_.takeover->restarts_used);
    common::Logger("scheduler")
        ->warn("taking the job over after generation {}: {}", generation_, options_.takeover->lost);
    if (generation_ > 0 && !Elastic()) {
      // As for any lost node of a fixed-size job: the survivors and a node in the lost one's
      // place (its launcher started again, or a spare) form the next generation, a restart.
      lost_node_ = options_.takeover->lost;
      time_limit_.Arm();
      liveness_.Start();
      return WaitForReplacement();
    }
  }
  if (options_.adopt_timeout) {
    adoption_ = std::make_unique<Adoption>();
    ArmAdoption();
    time_limit_.Arm();
    liveness_.Start();
    return;
  }
  formation_.Begin(started_at_);
  time_limit_.Arm();
  liveness_.Start();
}

int Scheduler::AddNode(NodeLink* link) {
  GANGRUN_ON_STRAND(strand_);
  int id = next_node_id_++;
  nodes_[id].id = id;
  nodes_[id].link = link;
  liveness_.Add(id, link);
  return id;
}

void Scheduler::OnNodeEvent(int node_id, const v1::NodeEvent& event) {
  GANGRUN_ON_STRAND(strand_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return;
  // `gangrun logs` reads the last of the logs while the job ends.
  if (event.has_log_read() && it->second.joined) return logs_.OnLogRead(node_id, event.log_read());
  if (state_ == JobState::kFinished) return;
  KnownNode& node = it->second;
  liveness_.Heard(node_id);
  if (event.has_heartbeat()) return;
  if (event.has_join()) return OnJoin(node_id, node, event.join());
  if (event.has_health_checked()) return OnHealthChecked(node, event.health_checked());
  if (event.has_forward_signal() && (node.joined || spare_pool_.Has(node_id))) {
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
  KnownNode& node = it->second;
  node.link = nullptr;
  liveness_.Unlink(node_id);
  if (!node.joined || node.lost || state_ == JobState::kFinished) {
    if (spare_pool_.Has(node_id) && state_ != JobState::kFinished) {
      common::Logger("scheduler")->warn("spare {} left", Describe(node));
    }
    Forget(node_id);
    health_rounds_.Answered(node_id);  // a spare's answer will not come
    return;
  }
  if (state_ == JobState::kBackingOff) {
    membership_.Remove(node.join);
    if (TakeSpareFor(node)) {
      // The next generation has the spare in its place.
      RecordLoss(node, FailureCause::kConnectionLost,
                 "its connection broke while the job backed off");
      restarts_.Forget(node_id);
      Forget(node_id);
      health_rounds_.Answered(node_id);
      return;
    }
    membership_.Add(node.join);
    // Lost while waiting to restart: the next generation cannot have it.
    v1::JobOutcome outcome;
    outcome.set_kind(v1::JobOutcome::KIND_NODE_LOST);
    outcome.set_message(Describe(node) + " was lost before generation " +
                        std::to_string(generation_ + 1) + " could start");
    CountFailure(FailureCause::kConnectionLost);
    Blame(node, "lost: " + outcome.message());
    return Finish(std::move(outcome));
  }
  // A node whose part is done may go, unless a later generation could need it.
  const bool done = node.ended && (Live() || state_ == JobState::kStopping);
  if (done && !Elastic() && !restarts_.BudgetLeft()) return;
  OnNodeLost(node_id, node, FailureCause::kConnectionLost, "its connection broke");
}

void Scheduler::RecordLoss(const KnownNode& node, FailureCause cause, const std::string& why) {
  common::Logger("scheduler")->error("lost {}: {}", Describe(node), why);
  CountFailure(cause);
  Record(Event::kNodeLost, {{"node", node.join.node_name},
                            {"address", node.join.host_address},
                            {"pid", node.pid},
                            {"generation", generation_},
                            {"cause", FailureCauseName(cause)},
                            {"reason", why}});
  Blame(node, "lost: " + why);
}

void Scheduler::Blame(const KnownNode& node, const std::string& why) {
  if (node.agent.empty() || stop_requested_ || !owner_.on_blame) return;
  owner_.on_blame(node.agent, why);
}

// What a lost node means depends on the state: while forming, only that its workers no
// longer count; while a generation runs, an elastic job shrinks, a job with restarts left
// waits for a replacement, and any other job ends (NODE_LOST).
void Scheduler::OnNodeLost(int node_id, KnownNode& node, FailureCause cause,
                           const std::string& reason) {
  const std::string why = reason + liveness_.StallNote();
  const common::TimePoint last_seen = liveness_.LastSeen(node_id);
  node.lost = true;
  health_rounds_.Answered(node_id);  // a lost node answers no health round
  restarts_.Forget(node_id);
  // Lost is final: a node that comes back after this (a cut that heals) is refused its old
  // session and ends, instead of finding a job that no longer counts it.
  if (node.link != nullptr) node.link->Drop();
  node.link = nullptr;
  liveness_.Unlink(node_id);
  RecordLoss(node, cause, why);
  const std::string what = Describe(node) + " was lost: " + why;
  if (spare_pool_.Has(node_id) || node.excluded) {
    Forget(node_id);  // not in the job: nothing else changes
    return;
  }
  // Its silence was spent detecting the loss, not training.
  if (Live() && cause == FailureCause::kHeartbeatTimeout) {
    ledger_.OnSilentLoss(clock_.Now() - last_seen);
  }
  if (state_ == JobState::kForming || state_ == JobState::kAwaitingReplacement) {
    membership_.Remove(node.join);
    const bool replaced = generation_ > 0 && TakeSpareFor(node, /*lost=*/true);
    Forget(node_id);  // its workers no longer count; another node may take its place
    if (replaced && MembershipComplete() && !AwaitHealth()) return Form();
    return LogProgress();
  }
  const bool recoverable =
      !stop_requested_ &&
      !(stopping_ && stopping_->kind == StopReason::Kind::kNodeLost && lost_node_.empty());
  const bool spare_fits =
      recoverable && spare_pool_.For(node.join.local_worker_num, node.domain).has_value();
  if (Elastic() && recoverable &&
      (spare_fits || membership_.workers - node.join.local_worker_num >= min_world())) {
    // An elastic job keeps its size with a spare, or shrinks: the survivors form a smaller job
    // (no restart is used).
    membership_.Remove(node.join);
    const bool replaced = TakeSpareFor(node);
    Forget(node_id);
    return Reform(replaced ? what + "; a spare takes its place" : what);
  }
  if (recoverable && restarts_.BudgetLeft()) {
    // Survivors stop and a spare takes the lost node's place, or they wait for a node to take
    // it (the same host's launcher started again, typically); the restart budget stays with
    // the scheduler.
    lost_node_ = what;
    membership_.Remove(node.join);
    TakeSpareFor(node, /*lost=*/true);
    Forget(node_id);
    BeginStopping({StopReason::Kind::kNodeLost, what, {}, {}});
    return MaybeGenerationOver();
  }
  BeginStopping({StopReason::Kind::kNodeLost, what, {}, {}});
  OnGenerationEnded(node);  // a lost node has no workers left to wait for
}

void Scheduler::SetTorchStore(TorchStore* store) {
  owner_.torch_store = store;
  if (store == nullptr) return;
  store->SetOnLongWait([this](const TorchStore::LongWait& wait) {
    OnTorchStoreWait(wait.keys, wait.waits, wait.waited);
  });
}

}  // namespace gangrun::scheduler
