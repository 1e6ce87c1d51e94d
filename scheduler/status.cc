// The scheduler as people see it: its status (`gangrun status`, /metrics), progress lines,
// node descriptions, stop requests (a launcher's signal, `gangrun stop`) and the outcome. Part of
// the Scheduler actor (scheduler.h): the same strand, the same state.

#include <algorithm>

#include "common/logging.h"
#include "scheduler/scheduler.h"

namespace gangrun::scheduler {

std::string Scheduler::Describe(const NodeState& node) const {
  std::string text = "node '" + node.join.node_name + "' (" + node.join.host_address;
  if (phase_ != Phase::kForming) text += ", node rank " + std::to_string(node.slot.node_rank);
  if (node.pid > 0) text += ", launcher pid " + std::to_string(node.pid);
  return text + ")";
}

void Scheduler::LogProgress() {
  // One line per join for small jobs; at most one a second for large ones.
  const common::TimePoint now = clock_.Now();
  if (nodes_.size() > 8 && now - last_progress_log_ < std::chrono::seconds(1)) return;
  last_progress_log_ = now;
  int workers = 0, count = 0;
  std::string names;
  for (const auto& [id, node] : nodes_) {
    if (!node.joined) continue;
    workers += node.join.local_worker_num;
    ++count;
    if (count <= 8) names += (names.empty() ? "" : ", ") + node.join.node_name;
  }
  if (count > 8) names += ", ...";
  if (workers < options_.world_size) {
    common::Logger("scheduler")
        ->info("waiting for {} of {} workers ({} node(s) joined{}{})",
               options_.world_size - workers, options_.world_size, count, names.empty() ? "" : ": ",
               names);
  }
}

v1::GetStatusResponse Scheduler::Status() const {
  v1::GetStatusResponse status;
  static const char* kPhases[] = {"forming", "running", "stopping", "finished"};
  status.set_phase(restart_timer_ ? "restarting" : kPhases[static_cast<int>(phase_)]);
  status.set_generation(generation_);
  status.set_world_size(options_.world_size);
  status.set_min_world_size(min_world());
  status.set_restarts(restarts_used_);
  status.set_max_restarts(options_.max_restarts);
  if (outcome_) *status.mutable_outcome() = *outcome_;
  if (telemetry_ != nullptr) status.set_job_id(telemetry_->job_id());
  const common::TimePoint now = clock_.Now();
  for (const auto& [id, node] : nodes_) {
    if (!node.joined) continue;
    auto* n = status.add_nodes();
    n->set_node_name(node.join.node_name);
    n->set_host_address(node.join.host_address);
    n->set_node_rank(generation_ == 0 ? -1 : node.slot.node_rank);
    n->set_first_rank(generation_ == 0 ? -1 : node.slot.first_rank);
    n->set_local_worker_num(node.join.local_worker_num);
    n->set_launcher_pid(node.pid);
    n->set_state(generation_ == 0 ? "joined" : node.ended ? "ended" : "running");
    common::TimePoint heard = node.last_seen;
    if (node.link != nullptr) heard = std::max(heard, node.link->LastHeartbeat());
    n->set_heartbeat_age_seconds(std::chrono::duration<double>(now - heard).count());
    for (const auto& [rank, worker] : node.workers) *n->add_workers() = worker;
  }
  return status;
}

void Scheduler::Stop(int signal, const std::string& reason) {
  if (phase_ == Phase::kFinished) return;
  v1::StopRequest request;
  request.set_reason(reason);
  request.set_signal(signal);
  OnStopRequest(request);
}

void Scheduler::OnStopRequest(const v1::StopRequest& request) {
  common::Logger("scheduler")->info("stop requested: {}", request.reason());
  Record("stop_requested", {{"reason", request.reason()}, {"signal", request.signal()}});
  if (stop_signal_ == 0) {
    stop_signal_ = request.signal();
    stop_reason_ = request.reason();
  }
  if (phase_ == Phase::kForming || restart_timer_) {
    restart_timer_.reset();
    Finish(CurrentOutcome());
  } else if (phase_ == Phase::kRunning) {
    phase_ = Phase::kStopping;
    AbortAll(request.reason());
  }
}

v1::JobOutcome Scheduler::CurrentOutcome() const {
  v1::JobOutcome outcome;
  std::vector<int> stopped = stopped_ranks_;
  std::sort(stopped.begin(), stopped.end());
  if (!root_cause_ && node_lost_) {
    outcome = *node_lost_;
  } else if (root_cause_) {
    outcome.set_kind(v1::JobOutcome::KIND_WORKER_FAILED);
    *outcome.mutable_root_cause() = *root_cause_;
  } else if (stop_signal_ != 0) {
    outcome.set_kind(v1::JobOutcome::KIND_STOPPED_BY_SIGNAL);
    outcome.set_signal(stop_signal_);
    outcome.set_message(stop_reason_);
  } else {
    outcome.set_kind(v1::JobOutcome::KIND_SUCCEEDED);
    return outcome;
  }
  for (int rank : stopped) outcome.add_stopped_ranks(rank);
  return outcome;
}

}  // namespace gangrun::scheduler
