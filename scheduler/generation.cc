// Generations: forming the job, starting a generation on every node, following its workers,
// stopping it, and deciding what comes after it (the kStopping row of scheduler.h's table).
// Part of the Scheduler actor (scheduler.h): the same strand, the same state.

#include <algorithm>

#include "common/logging.h"
#include "proto/conversions.h"
#include "scheduler/adoption.h"
#include "scheduler/scheduler.h"
#include "scheduler/torch_store.h"

namespace gangrun::scheduler {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

void Scheduler::Form() {
  if (AwaitHealth()) {  // every member checks itself first; the last answer forms
    ledger_.OnHealthChecks(true);
    return;
  }
  ledger_.OnHealthChecks(false);
  if (options_.may_start && !options_.may_start()) {
    // No lease confirmed by the store within its TTL: another scheduler may act for the job.
    // Nothing starts until the lease is confirmed (or the launcher steps down).
    if (!fence_timer_) {
      common::Logger("scheduler")
          ->warn(
              "not starting generation {}: the store has not confirmed this scheduler's "
              "lease; waiting",
              generation_ + 1);
    }
    fence_timer_ = clock_.After(std::chrono::milliseconds(200), [this] {
      if (Forming()) Form();
    });
    return;
  }
  fence_timer_.reset();
  if (!MembershipComplete()) {
    // An exclusion left a place that no spare took: wait for a node to take it.
    if (state_ == JobState::kForming && generation_ > 0) WaitForReplacement();
    return;
  }
  if (RejectUnreachableNodeRanks()) return;  // the job waits for the right nodes
  std::vector<NodeJoin> joins;
  std::vector<KnownNode*> states;
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
    return Finish(std::move(outcome));
  }
  formation_.End();
  membership_changed_ = false;
  tally_.world = membership_.workers;
  for (size_t i = 0; i < states.size(); ++i) states[i]->slot = (*slots)[i];
  if (state_ == JobState::kAwaitingReplacement) {
    lost_node_.clear();
    restarts_.CountReplacement();  // the lost node's generation counts against the budget
    Enter(JobState::kForming, "a node took the lost one's place");
  }
  StartGeneration();
}

void Scheduler::StartGeneration() {
  restarts_.OnGenerationStarted();
  std::vector<KnownNode*> states;
  KnownNode* rank0 = nullptr;
  ended_scan_from_ = 0;
  for (auto& [id, node] : nodes_) {
    if (!node.joined) continue;
    node.ended = false;
    node.workers.clear();
    node.reported_at.clear();
    for (int i = 0; i < node.join.local_worker_num; ++i) {
      auto& worker = node.workers[node.slot.first_rank + i];
      worker.set_rank(node.slot.first_rank + i);
      worker.set_state(v1::WORKER_STATE_STARTING);
    }
    states.push_back(&node);
    if (node.slot.node_rank == 0) rank0 = &node;
  }
  GANGRUN_CHECK(rank0 != nullptr, "a formed job has a node of rank 0");
  ++generation_;  // its only writer: generation numbers only increase
  Enter(JobState::kRunning, "generation " + std::to_string(generation_) + " starts");
  lost_node_.clear();  // its place is taken
  spare_pool_.ClearHoles();
  stopping_.reset();
  hang_capture_.Cancel();
  tally_.stopped.clear();
  tally_.started = 0;
  tally_.succeeded = 0;
  ledger_.OnGenerationStarted(generation_, tally_.world, /*adopted=*/false);
  common::Logger("scheduler")
      ->info("generation {}: {} node(s), {} worker(s){}", generation_, states.size(), tally_.world,
             restarts_.used() > 0 ? " (" + restarts_.Count() + ")" : std::string());
  Record(Event::kGenerationStarted, {{"generation", generation_},
                                     {"nodes", states.size()},
                                     {"workers", tally_.world},
                                     {"restart", restarts_.used()},
                                     {"max_restarts", restarts_.max()}});
  WriteRecord();
  if (owner_.torch_store != nullptr) owner_.torch_store->ForgetAttemptsBefore(restarts_.used());
  for (KnownNode* node : states) {
    v1::NodeCommand command;
    auto* assignment = command.mutable_start()->mutable_assignment();
    assignment->set_node_rank(node->slot.node_rank);
    assignment->set_node_count(static_cast<int>(states.size()));
    assignment->set_first_rank(node->slot.first_rank);
    assignment->set_local_worker_num(node->join.local_worker_num);
    assignment->set_world_size(tally_.world);
    assignment->set_master_addr(rank0->join.host_address);
    if (!rank0->addresses.empty()) {
      assignment->add_master_addresses(rank0->join.host_address);
      for (const auto& address : rank0->addresses) assignment->add_master_addresses(address);
    }
    assignment->set_master_port(rank0->free_port);
    if (owner_.torch_store != nullptr) {
      assignment->set_torch_store_port(owner_.torch_store->port());
    }
    assignment->set_run_id(options_.run_id);
    command.mutable_start()->set_restart_count(restarts_.used());
    *command.mutable_start()->mutable_progress_rules() = options_.progress_rules;
    SendTo(*node, std::move(command));
  }
}

void Scheduler::OnWorkerStarted(KnownNode& node, const v1::WorkerStarted& started) {
  const int rank = started.rank();
  if (rank < 0) return;  // the MindSpore scheduler process: not one of the job's ranks
  auto& worker = node.workers[rank];
  worker.set_pid(started.pid());
  worker.set_state(v1::WORKER_STATE_RUNNING);
  if (++tally_.started != tally_.world) return;
  const auto latency = clock_.Now() - timing_.requested_at;
  if (owner_.telemetry != nullptr) owner_.telemetry->ObserveRendezvous(latency);
  Record(Event::kGenerationRunning, {{"generation", generation_},
                                     {"workers", tally_.world},
                                     {"latency_ms", duration_cast<milliseconds>(latency).count()}});
  if (failed_at_ && failed_at_->first < generation_) {
    // The restart latency: failure heard -> every worker of the new generation running.
    common::Logger("scheduler")
        ->info("generation {} running on every node {} ms after the failure", generation_,
               duration_cast<milliseconds>(clock_.Now() - failed_at_->second).count());
    failed_at_.reset();
  }
}

void Scheduler::OnWorkerExited(KnownNode& node, const v1::WorkerExited& exited) {
  const bool failed = !proto::FromProto(exited.exit()).success();
  if (!exited.log_lost().empty()) OnLogOutputLost(node, exited);
  if (exited.rank() >= 0) logs_.ReadRestOf(exited.rank());
  if (exited.rank() >= 0) {
    auto& worker = node.workers[exited.rank()];
    worker.set_pid(exited.pid());
    worker.set_state(!failed                  ? v1::WORKER_STATE_SUCCEEDED
                     : exited.stopped_by_us() ? v1::WORKER_STATE_STOPPED
                                              : v1::WORKER_STATE_FAILED);
    *worker.mutable_exit() = exited.exit();
  }
  if (!failed && !exited.stopped_by_us() && exited.rank() >= 0) ++tally_.succeeded;
  if (Live() && failed && !exited.stopped_by_us()) {
    StopReason reason{StopReason::Kind::kWorkerFailed, "", {}, {}};
    reason.root_node = node.id;
    reason.no_restart = restarts_.NoRestart(exited.exit());
    reason.root_cause.set_host(node.join.node_name);
    reason.root_cause.set_rank(exited.rank());
    reason.root_cause.set_pid(exited.pid());
    *reason.root_cause.mutable_exit() = exited.exit();
    reason.root_cause.set_log_path(exited.log_path());
    *reason.root_cause.mutable_log_tail() = exited.log_tail();
    *reason.root_cause.mutable_kernel_log() = exited.kernel_log();
    *reason.root_cause.mutable_device_holders() = exited.device_holders();
    if (exited.has_error()) *reason.root_cause.mutable_error() = exited.error();
    reason.message = (exited.rank() >= 0 ? "rank " + std::to_string(exited.rank())
                                         : std::string("the MindSpore scheduler process")) +
                     " on " + node.join.node_name + " failed";
    failed_at_ = std::make_pair(generation_, clock_.Now());
    if (state_ == JobState::kRunning) ReclassifyStall();  // a collective's timeout, say
    CountFailure(FailureCause::kWorkerExit);
    Record(Event::kWorkerFailed, {{"generation", generation_},
                                  {"rank", exited.rank()},
                                  {"node", node.join.node_name},
                                  {"pid", exited.pid()},
                                  {"exit_code", exited.exit().exit_code()},
                                  {"signal", exited.exit().signal()},
                                  {"log", exited.log_path()}});
    return BeginStopping(std::move(reason));
  }
  // Stopped because of the failure: not the rank whose watchdog timer killed it.
  const bool root_cause = stopping_ && stopping_->root_cause.rank() == exited.rank() &&
                          !exited.stopped_by_us() && !stopping_->root_cause.host().empty();
  if (state_ == JobState::kStopping && exited.rank() >= 0 && !root_cause) {
    tally_.stopped.push_back(exited.rank());
  }
}

void Scheduler::OnLogOutputLost(const KnownNode& node, const v1::WorkerExited& exited) {
  const std::string warning = "worker log output may be incomplete on " + Describe(node) + ": " +
                              Sanitize(exited.log_lost(), kMaxReasonBytes);
  if (!log_warnings_.insert(warning).second) return;  // said once per node and cause
  common::Logger("scheduler")->warn("{}", warning);
  Record(Event::kLogOutputLost, {{"generation", generation_},
                                 {"rank", exited.rank()},
                                 {"node", node.join.node_name},
                                 {"reason", Sanitize(exited.log_lost(), kMaxReasonBytes)}});
}

void Scheduler::OnGenerationEnded(KnownNode& node) {
  node.ended = true;
  MaybeGenerationOver();
}

void Scheduler::BeginStopping(StopReason reason) {
  if (!Live()) return;  // already stopping: the first reason stands
  Enter(JobState::kStopping, reason.message);
  hang_capture_.Cancel();
  // A hang's verdict (where every group of ranks was, ~300 characters) is said once, in the
  // job's report; the progress lines of the stop carry its first clause.
  const std::string message =
      reason.kind == StopReason::Kind::kHung
          ? "the job hung: " + reason.message.substr(0, reason.message.find("; "))
          : reason.message;
  stopping_ = std::move(reason);
  AbortAll(message);
}

void Scheduler::MaybeGenerationOver() {
  if (!Live() && state_ != JobState::kStopping) return;
  // Nodes below ended_scan_from_ have ended (only a generation's start un-ends them): each
  // node's end costs O(1) amortised, not a scan of every node.
  for (auto it = nodes_.lower_bound(ended_scan_from_); it != nodes_.end(); ++it) {
    if (it->second.joined && !it->second.ended) {
      ended_scan_from_ = it->first;
      return;
    }
  }
  nlohmann::json ended = {{"generation", generation_}};
  if (timing_.abort_sent_at) {
    const auto latency = clock_.Now() - *timing_.abort_sent_at;
    if (owner_.telemetry != nullptr) owner_.telemetry->ObserveStop(latency);
    ended["stop_latency_ms"] = duration_cast<milliseconds>(latency).count();
    timing_.abort_sent_at.reset();
  }
  Record(Event::kGenerationEnded, std::move(ended));
  timing_.requested_at = clock_.Now();
  const bool worker_failed = stopping_ && (stopping_->kind == StopReason::Kind::kWorkerFailed ||
                                           stopping_->kind == StopReason::Kind::kHung);
  if (stop_requested_ || time_limit_.reached()) return Finish(CurrentOutcome());
  if (!lost_node_.empty()) return AfterFailedGeneration(false);
  if (!worker_failed && tally_.succeeded == tally_.world) {
    return Finish(CurrentOutcome());  // done, whatever joined or left meanwhile
  }
  if (worker_failed) return AfterFailedGeneration(true);
  if (stopping_ && stopping_->kind == StopReason::Kind::kNodeLost) return Finish(CurrentOutcome());
  if (membership_changed_) {
    Enter(JobState::kForming, "the membership changed");
    return Form();
  }
  Finish(CurrentOutcome());
}

void Scheduler::AbortAll(const std::string& reason) {
  common::Logger("scheduler")->info("aborting generation {}: {}", generation_, reason);
  if (!timing_.abort_sent_at) timing_.abort_sent_at = clock_.Now();
  Record(Event::kGenerationAborted, {{"generation", generation_}, {"reason", reason}});
  for (auto& [id, node] : nodes_) {
    if (!node.joined || node.link == nullptr) continue;
    v1::NodeCommand command;
    command.mutable_abort()->set_reason(reason);
    SendTo(node, std::move(command));
  }
}

void Scheduler::Finish(v1::JobOutcome outcome) {
  Enter(JobState::kFinished, proto::Name(outcome.kind()));
  *outcome.mutable_ledger() = ledger_.ToProto();
  outcome.mutable_ledger()->set_what_if(
      WhatIf(outcome.ledger(), {options_.spare_nodes, options_.node_timeout,
                                options_.heartbeat_interval, liveness_.LongestSilence()}));
  logs_.EndFollowing();
  for (const auto& warning : log_warnings_) outcome.add_warnings(warning);
  outcome_ = outcome;
  nlohmann::json fields = {{"generation", generation_},
                           {"outcome", proto::Name(outcome.kind())},
                           {"restarts", restarts_.used()}};
  if (!outcome.message().empty()) fields["message"] = outcome.message();
  if (outcome.has_root_cause()) fields["rank"] = outcome.root_cause().rank();
  if (outcome.signal() != 0) fields["signal"] = outcome.signal();
  fields["ledger"] = LedgerJson(outcome.ledger());
  Record(Event::kJobFinished, std::move(fields));
  WriteRecord();
  formation_.End();
  if (adoption_) adoption_->timer.reset();
  fence_timer_.reset();
  liveness_.Stop();
  restart_timer_.reset();
  for (auto& [id, node] : nodes_) {
    v1::NodeCommand command;
    *command.mutable_finished()->mutable_outcome() = outcome;
    SendAndClose(node, std::move(command));
  }
  if (owner_.on_finished) owner_.on_finished(outcome);
}

void Scheduler::SendAndClose(KnownNode& node, v1::NodeCommand command) {
  SendTo(node, std::move(command));
  if (node.link != nullptr) node.link->Close();
}

void Scheduler::SendTo(KnownNode& node, v1::NodeCommand command) {
  if (node.link == nullptr) return;
  command.set_generation(generation_);
  node.link->Send(command);
}

}  // namespace gangrun::scheduler
