// The scheduler as people see it: its status (`gangrun status`, /metrics), progress lines,
// node descriptions, stop requests (a launcher's signal, `gangrun stop`) and the outcome. Part of
// the Scheduler actor (scheduler.h): the same strand, the same state.

#include <algorithm>

#include "common/logging.h"
#include "common/net.h"
#include "scheduler/job_record.h"
#include "scheduler/scheduler.h"

namespace gangrun::scheduler {

std::string Scheduler::Describe(const KnownNode& node) const {
  std::string text = "node '" + node.join.node_name + "' (" + node.join.host_address;
  const bool formed = state_ != JobState::kForming && state_ != JobState::kAwaitingReplacement;
  if (spare_pool_.Has(node.id)) {
    text += ", spare";
  } else if (formed) {
    text += ", node rank " + std::to_string(node.slot.node_rank);
  }
  if (node.pid > 0) text += ", launcher pid " + std::to_string(node.pid);
  return text + ")";
}

std::string Scheduler::WaitingLine() const {
  std::vector<NodeJoin> joined;
  for (const auto& [id, node] : nodes_) {
    if (node.joined) joined.push_back(node.join);
  }
  return Formation::WaitingLine(joined, options_.world_size, formation_.RefusedText());
}

void Scheduler::NoteRefused(const std::string& peer, const std::string& why) {
  GANGRUN_ON_STRAND(strand_);
  auto host = common::ParseHostPort(peer, "peer");
  const std::string who = host.ok() ? host->host : peer;
  if (formation_.Refused(who, why)) {
    common::Logger("scheduler")->warn("refused a launcher at {}: {}", who, why);
  }
}

void Scheduler::LogProgress() {
  // One line per join for small jobs; at most one a second for large ones.
  const common::TimePoint now = clock_.Now();
  if (nodes_.size() > 8 && now - last_progress_log_ < std::chrono::seconds(1)) return;
  last_progress_log_ = now;
  const std::string line = WaitingLine();
  if (line.empty()) return;
  common::Logger("scheduler")->info("{}{}", line, formation_.Left());
}

void Scheduler::RemindWaiting(const std::string& left) {
  if (!Forming()) return formation_.StopReminding();
  const std::string line = WaitingLine();
  if (line.empty()) return;
  common::Logger("scheduler")->info("still {}; {}", line, left);
  // The launchers that joined wait too: each says the same line (a joiner has no count).
  v1::NodeCommand command;
  command.mutable_waiting()->set_line(line + "; " + left);
  for (auto& [id, node] : nodes_) {
    if (node.joined && !node.lost) SendTo(node, command);
  }
}

v1::GetStatusResponse Scheduler::Status() const {
  GANGRUN_ON_STRAND(strand_);
  v1::GetStatusResponse status;
  status.set_phase(PhaseOf(state_));
  status.set_generation(generation_);
  status.set_world_size(options_.world_size);
  status.set_min_world_size(min_world());
  status.set_restarts(restarts_.used());
  status.set_max_restarts(restarts_.max());
  if (outcome_) *status.mutable_outcome() = *outcome_;
  if (owner_.telemetry != nullptr) status.set_job_id(owner_.telemetry->job_id());
  if (options_.store_note) status.set_store_note(options_.store_note());
  status.set_last_generation_end(last_note_);
  for (const auto& verdict : restarts_.verdicts()) *status.add_verdicts() = verdict;
  *status.mutable_ledger() = ledger_.ToProto();
  const common::TimePoint now = clock_.Now();
  for (const auto& [id, node] : nodes_) {
    if (!node.joined && !spare_pool_.Has(node.id)) continue;
    auto* n = status.add_nodes();
    n->set_node_name(node.join.node_name);
    n->set_host_address(node.join.host_address);
    n->set_node_rank(generation_ == 0 ? -1 : node.slot.node_rank);
    n->set_first_rank(generation_ == 0 ? -1 : node.slot.first_rank);
    n->set_local_worker_num(node.join.local_worker_num);
    n->set_launcher_pid(node.pid);
    n->set_state(spare_pool_.Has(node.id) ? v1::NODE_STATE_SPARE
                 : generation_ == 0       ? v1::NODE_STATE_JOINED
                 : node.ended             ? v1::NODE_STATE_ENDED
                                          : v1::NODE_STATE_RUNNING);
    if (spare_pool_.Has(node.id)) {
      n->set_node_rank(-1);
      n->set_first_rank(-1);
      status.set_spare_nodes(status.spare_nodes() + 1);
    }
    const common::TimePoint heard = liveness_.HeardAt(node.id);
    n->set_heartbeat_age_seconds(std::chrono::duration<double>(now - heard).count());
    for (const auto& [rank, worker] : node.workers) {
      auto* w = n->add_workers();
      *w = worker;
      auto reported = node.reported_at.find(rank);
      if (reported != node.reported_at.end()) {
        w->set_progress_age_seconds(std::chrono::duration<double>(now - reported->second).count());
      }
    }
  }
  for (size_t cause = 0; cause < failures_.size(); ++cause) {
    (*status.mutable_failures())[FailureCauseName(static_cast<FailureCause>(cause))] =
        failures_[cause];
  }
  if (const auto left = time_limit_.Left(); left && state_ != JobState::kFinished) {
    status.set_time_left_seconds(common::SecondsOf(*left));
  }
  AddProgress(status);
  return status;
}

void Scheduler::Stop(int signal, const std::string& reason) {
  GANGRUN_ON_STRAND(strand_);
  if (state_ == JobState::kFinished) return;
  v1::StopRequest request;
  request.set_reason(reason);
  request.set_signal(signal);
  OnStopRequest(request);
}

void Scheduler::OnStopRequest(const v1::StopRequest& request) {
  common::Logger("scheduler")->info("stop requested: {}", request.reason());
  Record(Event::kStopRequested, {{"reason", request.reason()}, {"signal", request.signal()}});
  if (!stop_requested_) stop_requested_ = request;
  switch (state_) {
    case JobState::kForming:
    case JobState::kBackingOff:
    case JobState::kAwaitingReplacement:
      return Finish(CurrentOutcome());
    case JobState::kRunning:
    case JobState::kCapturing:
      return BeginStopping({StopReason::Kind::kStopRequested, request.reason(), {}, {}});
    case JobState::kStopping:  // the generation's end finishes the job
    case JobState::kFinished:
      return;
  }
}

v1::JobOutcome Scheduler::CurrentOutcome() const {
  v1::JobOutcome outcome;
  std::vector<int> stopped = tally_.stopped;
  std::sort(stopped.begin(), stopped.end());
  const bool fatal_loss =
      stopping_ && stopping_->kind == StopReason::Kind::kNodeLost && lost_node_.empty();
  if (time_limit_.reached()) {
    outcome.set_kind(v1::JobOutcome::KIND_TIME_LIMIT);
    outcome.set_message(time_limit_.Why());
  } else if (stopping_ && stopping_->kind == StopReason::Kind::kWorkerFailed) {
    outcome.set_kind(v1::JobOutcome::KIND_WORKER_FAILED);
    outcome.set_message(restarts_.note());
    *outcome.mutable_root_cause() = stopping_->root_cause;
  } else if (!lost_node_.empty() && !restarts_.note().empty()) {
    outcome.set_kind(v1::JobOutcome::KIND_NODE_LOST);
    outcome.set_message(lost_node_ + "; " + restarts_.note());
  } else if (stopping_ && stopping_->kind == StopReason::Kind::kHung) {
    outcome.set_kind(v1::JobOutcome::KIND_HUNG);
    outcome.set_message(restarts_.note().empty() ? stopping_->message
                                                 : stopping_->message + "; " + restarts_.note());
    *outcome.mutable_root_cause() = stopping_->root_cause;
    for (const auto& group : stopping_->groups) *outcome.add_stack_groups() = group;
  } else if (fatal_loss) {
    outcome.set_kind(v1::JobOutcome::KIND_NODE_LOST);
    outcome.set_message(stopping_->message);
  } else if (stop_requested_) {
    outcome.set_kind(v1::JobOutcome::KIND_STOPPED_BY_SIGNAL);
    outcome.set_signal(stop_requested_->signal());
    outcome.set_message(stop_requested_->reason());
  } else {
    outcome.set_kind(v1::JobOutcome::KIND_SUCCEEDED);
    return outcome;
  }
  for (int rank : stopped) outcome.add_stopped_ranks(rank);
  return outcome;
}

// The store's record of the job (store/run_store.h): what a scheduler that takes the job over
// needs, and what `gangrun status --store` shows of a job whose scheduler is gone.
void Scheduler::WriteRecord() const {
  if (!owner_.on_record) return;
  // At most kRecordedMembers members are listed (about 90 bytes each: etcd refuses requests
  // above 1.5 MiB); the count is always there.
  constexpr size_t kRecordedMembers = 2000;
  nlohmann::json members = nlohmann::json::array();
  int member_count = 0;
  for (const auto& [id, node] : nodes_) {
    if (!node.joined) continue;
    if (++member_count > static_cast<int>(kRecordedMembers)) continue;
    members.push_back({{"host", node.join.node_name},
                       {"address", node.join.host_address},
                       {"node_rank", node.slot.node_rank},
                       {"local_worker_num", node.join.local_worker_num},
                       {"pid", node.pid}});
  }
  nlohmann::json record = {{"generation", generation_},       {"restarts_used", restarts_.used()},
                           {"max_restarts", restarts_.max()}, {"world_size", options_.world_size},
                           {"min_world_size", min_world()},   {"personality", options_.personality},
                           {"member_count", member_count},    {"members", std::move(members)}};
  if (restarts_.forgiven() > 0) record["restarts_forgiven"] = restarts_.forgiven();
  if (!restarts_.verdicts().empty()) {
    nlohmann::json verdicts = nlohmann::json::array();
    for (const auto& verdict : restarts_.verdicts()) {
      verdicts.push_back({{"generation", verdict.generation()},
                          {"fingerprint", verdict.fingerprint()},
                          {"verdict", verdict.verdict()},
                          {"rule", verdict.rule()}});
    }
    record["verdicts"] = std::move(verdicts);
  }
  if (outcome_) {
    record["outcome"] = RecordedOutcome(*outcome_);
  }
  owner_.on_record(std::move(record));
}

}  // namespace gangrun::scheduler
