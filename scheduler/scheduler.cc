#include "scheduler/scheduler.h"

#include <algorithm>

#include "common/logging.h"
#include "common/status.h"

namespace gangrun::scheduler {

Scheduler::Scheduler(common::Clock& clock, Options options)
    : clock_(clock), options_(std::move(options)) {
  identity_.world_size = options_.world_size;
  identity_.min_world_size = min_world();
  identity_.run_id = options_.run_id;
  identity_.personality = options_.personality;
}

Scheduler::~Scheduler() = default;

void Scheduler::Start() {
  generation_requested_at_ = clock_.Now();
  if (options_.cluster_timeout >= common::Duration::zero()) {
    formation_timer_ = clock_.After(options_.cluster_timeout, [this] { OnFormationTimeout(); });
  }
  CheckHeartbeats();
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
    if (it == nodes_.end() || phase_ == Phase::kFinished) continue;
    auto silence =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - it->second.last_seen);
    OnNodeLost(id, it->second, "no heartbeat for " + std::to_string(silence.count()) + " ms");
  }
  if (phase_ == Phase::kFinished) return;
  sweep_due_ = now + period;
  heartbeat_timer_ = clock_.After(period, [this] { CheckHeartbeats(); });
}

void Scheduler::OnSchedulerStalled(common::Duration stalled) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(stalled).count();
  common::Logger("scheduler")
      ->warn(
          "the scheduler did not run for {} ms (its host stalled or its launcher was "
          "stopped); the nodes are not blamed for that silence",
          ms);
  Record("scheduler_stalled", {{"stalled_ms", ms}});
  const common::TimePoint now = clock_.Now();
  for (auto& [id, node] : nodes_) node.last_seen = now;
  stall_note_ = " (after this scheduler did not run for " + std::to_string(ms) + " ms)";
  stall_note_until_ = now + options_.node_timeout;
}

void Scheduler::OnNodeLost(int node_id, NodeState& node, const std::string& cause) {
  const std::string why = clock_.Now() < stall_note_until_ ? cause + stall_note_ : cause;
  node.lost = true;
  common::Logger("scheduler")->error("lost {}: {}", Describe(node), why);
  Record("node_lost",
         {{"node", node.join.node_name},
          {"address", node.join.host_address},
          {"pid", node.pid},
          {"generation", generation_},
          {"cause", why.rfind("no heartbeat", 0) == 0 ? "heartbeat_timeout" : "connection_lost"},
          {"reason", why}});
  if (phase_ == Phase::kForming) {
    membership_.Remove(node.join);
    nodes_.erase(node_id);  // its workers no longer count; another node may take its place
    LogProgress();
    return;
  }
  const std::string what = Describe(node) + " was lost: " + why;
  if (Elastic() && stop_signal_ == 0 && !node_lost_ &&
      membership_.workers - node.join.local_worker_num >= min_world()) {
    // An elastic job shrinks: the survivors form a smaller job (no restart is used).
    membership_.Remove(node.join);
    nodes_.erase(node_id);
    Reform(what);
    return;
  }
  if (stop_signal_ == 0 && !node_lost_ && restarts_used_ < options_.max_restarts) {
    // Survivors stop and wait for a node to take its place (the same host's launcher
    // started again, typically); the restart budget stays with the scheduler.
    awaiting_replacement_ = what;
    membership_.Remove(node.join);
    nodes_.erase(node_id);
    if (phase_ == Phase::kRunning) {
      phase_ = Phase::kStopping;
      AbortAll(what);
    }
    MaybeGenerationOver();
    return;
  }
  if (phase_ == Phase::kRunning) {
    v1::JobOutcome outcome;
    outcome.set_kind(v1::JobOutcome::KIND_NODE_LOST);
    outcome.set_message(what);
    node_lost_ = std::move(outcome);
    phase_ = Phase::kStopping;
    AbortAll(what);
  }
  OnGenerationEnded(node);  // a lost node has no workers left to wait for
}

int Scheduler::AddNode(NodeLink* link) {
  int id = next_node_id_++;
  nodes_[id].link = link;
  nodes_[id].last_seen = clock_.Now();
  nodes_[id].connected_at = clock_.Now();
  return id;
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

void Scheduler::OnNodeDisconnected(int node_id) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return;
  NodeState& node = it->second;
  node.link = nullptr;
  if (!node.joined || node.lost || phase_ == Phase::kFinished) {
    nodes_.erase(it);
    return;
  }
  if (phase_ == Phase::kForming) {
    OnNodeLost(node_id, node, "its connection broke");
    return;
  }
  if (restart_timer_) {
    // Lost while waiting to restart: the next generation cannot have it.
    restart_timer_.reset();
    v1::JobOutcome outcome;
    outcome.set_kind(v1::JobOutcome::KIND_NODE_LOST);
    outcome.set_message(Describe(node) + " was lost before generation " +
                        std::to_string(generation_ + 1) + " could start");
    node_lost_ = std::move(outcome);
    Finish(CurrentOutcome());
    return;
  }
  // A node whose part is done may go, unless a later generation could need it.
  if (node.ended && !Elastic() && restarts_used_ >= options_.max_restarts) return;
  OnNodeLost(node_id, node, "its connection broke");
}

void Scheduler::OnNodeEvent(int node_id, const v1::NodeEvent& event) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || phase_ == Phase::kFinished) return;
  NodeState& node = it->second;
  node.last_seen = clock_.Now();
  if (event.has_heartbeat()) return;
  if (event.has_join()) {
    OnJoin(node_id, node, event.join());
    return;
  }
  if (event.has_stop_request()) {
    v1::StopRequest request;
    request.set_signal(StopSignal(event.stop_request().signal()));
    request.set_reason(Sanitize(event.stop_request().reason(), kMaxReasonBytes));
    OnStopRequest(request);
    return;
  }
  if (!node.joined || event.generation() != generation_) {
    common::Logger("scheduler")
        ->warn("ignoring an event of generation {} from node {} (generation is {})",
               event.generation(), node_id, generation_);
    return;
  }
  if (!CheckEvent(node, event)) return;
  if (event.has_worker_started()) {
    const int rank = event.worker_started().rank();
    if (rank >= 0) {
      auto& worker = node.workers[rank];
      worker.set_pid(event.worker_started().pid());
      worker.set_state("running");
    }
    if (rank >= 0 && started_ranks_ + 1 == current_world_) {
      const auto latency = clock_.Now() - generation_requested_at_;
      if (telemetry_ != nullptr) telemetry_->ObserveRendezvous(latency);
      Record(
          "generation_running",
          {{"generation", generation_},
           {"workers", current_world_},
           {"latency_ms", std::chrono::duration_cast<std::chrono::milliseconds>(latency).count()}});
    }
    if (rank >= 0 && ++started_ranks_ == current_world_ && failed_at_ &&
        failed_at_->first < generation_) {
      // The restart latency: failure heard -> every worker of the new generation running.
      common::Logger("scheduler")
          ->info("generation {} running on every node {} ms after the failure", generation_,
                 std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now() -
                                                                       failed_at_->second)
                     .count());
      failed_at_.reset();
    }
  } else if (event.has_worker_exited()) {
    OnWorkerExited(node, event.worker_exited());
  } else if (event.has_generation_ended()) {
    OnGenerationEnded(node);
  }
}

void Scheduler::Form() {
  if (RejectUnreachableNodeRanks()) return;  // the job waits for the right nodes
  std::vector<NodeJoin> joins;
  std::vector<NodeState*> states;
  for (auto& [id, node] : nodes_) {
    if (!node.joined) continue;
    joins.push_back(node.join);
    states.push_back(&node);
  }
  if (Elastic()) {
    // Nodes come and go: explicit node ranks order the nodes but need not be contiguous.
    std::vector<int> explicit_ranks;
    for (const auto& join : joins) {
      if (join.requested_rank >= 0) explicit_ranks.push_back(join.requested_rank);
    }
    std::sort(explicit_ranks.begin(), explicit_ranks.end());
    for (auto& join : joins) {
      if (join.requested_rank < 0) continue;
      join.requested_rank = static_cast<int>(
          std::lower_bound(explicit_ranks.begin(), explicit_ranks.end(), join.requested_rank) -
          explicit_ranks.begin());
    }
  }
  auto slots = AssignRanks(joins, membership_.workers);
  if (!slots.ok()) {
    v1::JobOutcome outcome;
    outcome.set_kind(v1::JobOutcome::KIND_FORMATION_FAILED);
    outcome.set_message(std::string(slots.status().message()));
    Finish(std::move(outcome));
    return;
  }
  formation_timer_.reset();
  last_call_timer_.reset();
  membership_changed_ = false;
  current_world_ = membership_.workers;
  for (size_t i = 0; i < states.size(); ++i) states[i]->slot = (*slots)[i];
  if (awaiting_replacement_) {
    awaiting_replacement_.reset();
    ++restarts_used_;  // the lost node's generation counts against the budget
  }
  StartGeneration();
}

void Scheduler::StartGeneration() {
  std::vector<NodeState*> states;
  NodeState* rank0 = nullptr;
  for (auto& [id, node] : nodes_) {
    if (!node.joined) continue;
    node.ended = false;
    node.workers.clear();
    for (int i = 0; i < node.join.local_worker_num; ++i) {
      auto& worker = node.workers[node.slot.first_rank + i];
      worker.set_rank(node.slot.first_rank + i);
      worker.set_state("starting");
    }
    states.push_back(&node);
    if (node.slot.node_rank == 0) rank0 = &node;
  }
  phase_ = Phase::kRunning;
  stopped_ranks_.clear();
  started_ranks_ = 0;
  succeeded_ranks_ = 0;
  ++generation_;
  common::Logger("scheduler")
      ->info("generation {}: {} node(s), {} worker(s){}", generation_, states.size(),
             current_world_,
             restarts_used_ > 0 ? " (restart " + std::to_string(restarts_used_) + " of " +
                                      std::to_string(options_.max_restarts) + ")"
                                : std::string());
  Record("generation_started", {{"generation", generation_},
                                {"nodes", states.size()},
                                {"workers", current_world_},
                                {"restart", restarts_used_},
                                {"max_restarts", options_.max_restarts}});
  for (NodeState* node : states) {
    v1::NodeCommand command;
    auto* assignment = command.mutable_start()->mutable_assignment();
    assignment->set_node_rank(node->slot.node_rank);
    assignment->set_node_count(static_cast<int>(states.size()));
    assignment->set_first_rank(node->slot.first_rank);
    assignment->set_local_worker_num(node->join.local_worker_num);
    assignment->set_world_size(current_world_);
    assignment->set_master_addr(rank0->join.host_address);
    assignment->set_master_port(rank0->free_port);
    assignment->set_run_id(options_.run_id);
    command.mutable_start()->set_restart_count(restarts_used_);
    SendTo(*node, std::move(command));
  }
}

void Scheduler::OnWorkerExited(NodeState& node, const v1::WorkerExited& exited) {
  const bool failed = exited.exit().exit_code() != 0 || exited.exit().signal() != 0;
  if (!exited.log_lost().empty()) OnLogOutputLost(node, exited);
  if (exited.rank() >= 0) {
    auto& worker = node.workers[exited.rank()];
    worker.set_pid(exited.pid());
    worker.set_state(!failed ? "succeeded" : exited.stopped_by_us() ? "stopped" : "failed");
    *worker.mutable_exit() = exited.exit();
  }
  if (!failed && !exited.stopped_by_us() && exited.rank() >= 0) ++succeeded_ranks_;
  if (phase_ == Phase::kRunning && failed && !exited.stopped_by_us()) {
    v1::RootCause cause;
    cause.set_host(node.join.node_name);
    cause.set_rank(exited.rank());
    cause.set_pid(exited.pid());
    *cause.mutable_exit() = exited.exit();
    cause.set_log_path(exited.log_path());
    *cause.mutable_log_tail() = exited.log_tail();
    root_cause_ = std::move(cause);
    failed_at_ = std::make_pair(generation_, clock_.Now());
    phase_ = Phase::kStopping;
    Record("worker_failed", {{"generation", generation_},
                             {"rank", exited.rank()},
                             {"node", node.join.node_name},
                             {"pid", exited.pid()},
                             {"exit_code", exited.exit().exit_code()},
                             {"signal", exited.exit().signal()},
                             {"log", exited.log_path()}});
    std::string who = exited.rank() >= 0 ? "rank " + std::to_string(exited.rank())
                                         : std::string("the MindSpore scheduler process");
    AbortAll(who + " on " + node.join.node_name + " failed");
    return;
  }
  if (phase_ == Phase::kStopping && exited.rank() >= 0) stopped_ranks_.push_back(exited.rank());
}

void Scheduler::OnLogOutputLost(const NodeState& node, const v1::WorkerExited& exited) {
  const std::string warning = "worker log output may be incomplete on " + Describe(node) + ": " +
                              Sanitize(exited.log_lost(), kMaxReasonBytes);
  if (!log_warnings_.insert(warning).second) return;  // said once per node and cause
  common::Logger("scheduler")->warn("{}", warning);
  Record("log_output_lost", {{"generation", generation_},
                             {"rank", exited.rank()},
                             {"node", node.join.node_name},
                             {"reason", Sanitize(exited.log_lost(), kMaxReasonBytes)}});
}

void Scheduler::OnGenerationEnded(NodeState& node) {
  node.ended = true;
  MaybeGenerationOver();
}

void Scheduler::MaybeGenerationOver() {
  for (const auto& [id, other] : nodes_) {
    if (other.joined && !other.ended) return;
  }
  if (phase_ == Phase::kForming || phase_ == Phase::kFinished) return;
  nlohmann::json ended = {{"generation", generation_}};
  if (abort_sent_at_) {
    const auto latency = clock_.Now() - *abort_sent_at_;
    if (telemetry_ != nullptr) telemetry_->ObserveStop(latency);
    ended["stop_latency_ms"] =
        std::chrono::duration_cast<std::chrono::milliseconds>(latency).count();
    abort_sent_at_.reset();
  }
  Record("generation_ended", std::move(ended));
  generation_requested_at_ = clock_.Now();
  if (awaiting_replacement_) {
    WaitForReplacement();
    return;
  }
  if (!root_cause_ && succeeded_ranks_ == current_world_) {
    Finish(CurrentOutcome());  // done, whatever joined or left meanwhile
    return;
  }
  if (!root_cause_ && membership_changed_ && stop_signal_ == 0 && !node_lost_) {
    Form();
    return;
  }
  if (root_cause_ && !node_lost_ && stop_signal_ == 0 && restarts_used_ < options_.max_restarts) {
    ScheduleRestart();
    return;
  }
  Finish(CurrentOutcome());
}

void Scheduler::OnFormationTimeout() {
  if (phase_ != Phase::kForming) return;
  if (awaiting_replacement_) {
    v1::JobOutcome outcome;
    outcome.set_kind(v1::JobOutcome::KIND_NODE_LOST);
    outcome.set_message(*awaiting_replacement_ +
                        "; no node took its place within the cluster "
                        "timeout");
    Finish(std::move(outcome));
    return;
  }
  int workers = 0;
  std::string present;
  for (const auto& [id, node] : nodes_) {
    if (!node.joined) continue;
    workers += node.join.local_worker_num;
    present += (present.empty() ? "" : ", ") + Describe(node);
  }
  v1::JobOutcome outcome;
  outcome.set_kind(v1::JobOutcome::KIND_FORMATION_FAILED);
  outcome.set_message("the cluster did not form within the cluster timeout: " +
                      std::to_string(workers) + " of " + std::to_string(options_.world_size) +
                      " workers joined (present: " + (present.empty() ? "none" : present) + "); " +
                      std::to_string(options_.world_size - workers) + " worker(s) never came");
  Finish(std::move(outcome));
}

void Scheduler::AbortAll(const std::string& reason) {
  common::Logger("scheduler")->info("aborting generation {}: {}", generation_, reason);
  if (!abort_sent_at_) abort_sent_at_ = clock_.Now();
  Record("generation_aborted", {{"generation", generation_}, {"reason", reason}});
  for (auto& [id, node] : nodes_) {
    if (!node.joined || node.link == nullptr) continue;
    v1::NodeCommand command;
    command.mutable_abort()->set_reason(reason);
    SendTo(node, std::move(command));
  }
}

void Scheduler::Finish(v1::JobOutcome outcome) {
  phase_ = Phase::kFinished;
  for (const auto& warning : log_warnings_) outcome.add_warnings(warning);
  outcome_ = outcome;
  static const char* kKinds[] = {"unspecified",       "succeeded",        "worker_failed",
                                 "stopped_by_signal", "formation_failed", "node_lost"};
  nlohmann::json fields = {{"generation", generation_},
                           {"outcome", kKinds[outcome.kind()]},
                           {"restarts", restarts_used_}};
  if (!outcome.message().empty()) fields["message"] = outcome.message();
  if (outcome.has_root_cause()) fields["rank"] = outcome.root_cause().rank();
  if (outcome.signal() != 0) fields["signal"] = outcome.signal();
  Record("job_finished", std::move(fields));
  formation_timer_.reset();
  heartbeat_timer_.reset();
  restart_timer_.reset();
  last_call_timer_.reset();
  for (auto& [id, node] : nodes_) {
    v1::NodeCommand command;
    *command.mutable_finished()->mutable_outcome() = outcome;
    SendAndClose(node, std::move(command));
  }
  if (on_finished_) on_finished_(outcome);
}

void Scheduler::SendAndClose(NodeState& node, v1::NodeCommand command) {
  SendTo(node, std::move(command));
  if (node.link != nullptr) node.link->Close();
}

void Scheduler::SendTo(NodeState& node, v1::NodeCommand command) {
  if (node.link == nullptr) return;
  command.set_generation(generation_);
  node.link->Send(command);
}

}  // namespace gangrun::scheduler
