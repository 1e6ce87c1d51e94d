// Adoption: a daemon's job whose daemon moved (README "The daemon on a store"). Its nodes kept
// their workers and join the new scheduler saying which generation they run; once every
// place is back the generation goes on as it was (no worker restarts), and what happened
// meanwhile (exits, ended nodes) is replayed. A place not back within the adoption timeout
// counts as a node lost in that generation, with the job's own rules. Part of the Scheduler
// actor (scheduler.h): the same strand, the same state.

#include "scheduler/adoption.h"

#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace gangrun::scheduler {

void Scheduler::OnResume(KnownNode& node, const v1::JoinRequest& join) {
  const v1::ResumeGeneration& resume = join.resume();
  const v1::RankAssignment& assignment = resume.start().assignment();
  auto refuse = [&](const std::string& why) {
    Reject(node, join, absl::FailedPreconditionError(DescribeJoin(join) + " " + why));
  };
  if (!adoption_ || generation_ != 0 || state_ != JobState::kForming) {
    return refuse("runs a generation that this scheduler does not take over");
  }
  if (absl::Status valid = CheckJoinRequest(join, identity_); !valid.ok()) {
    return Reject(node, join, valid);
  }
  Adoption& adoption = *adoption_;
  const int local = join.local_worker_num();
  if (resume.generation() == 0 || assignment.local_worker_num() != local ||
      assignment.world_size() <= 0 || assignment.world_size() > options_.world_size ||
      assignment.first_rank() < 0 || assignment.first_rank() + local > assignment.world_size() ||
      resume.started_size() > local || resume.exited_size() > local) {
    return refuse("says it runs a generation that does not fit the job");
  }
  if (adoption.generation == 0) {
    adoption.generation = resume.generation();
    adoption.restart_count = resume.start().restart_count();
    adoption.world_size = assignment.world_size();
    adoption.node_count = assignment.node_count();
  } else if (resume.generation() != adoption.generation ||
             assignment.world_size() != adoption.world_size) {
    return refuse("runs generation " + std::to_string(resume.generation()) + ", not " +
                  std::to_string(adoption.generation) + " as the others do");
  }
  NodeJoin candidate{join.node_name(), join.host_address(), assignment.node_rank(), local};
  if (absl::Status fits = CheckJoin(membership_, candidate, adoption.world_size); !fits.ok()) {
    return Reject(node, join, fits);
  }
  node.joined = true;
  node.join = candidate;
  node.slot = {assignment.node_rank(), assignment.first_rank()};
  node.free_port = join.free_port();
  node.addresses.assign(join.addresses().begin(), join.addresses().end());
  node.pid = join.pid();
  node.health_check = join.health_check();
  membership_.Add(candidate);
  for (int i = 0; i < local; ++i) {
    auto& worker = node.workers[node.slot.first_rank + i];
    worker.set_rank(node.slot.first_rank + i);
    worker.set_state(v1::WORKER_STATE_STARTING);
  }
  for (const auto& started : resume.started()) {
    auto it = node.workers.find(started.rank());
    if (it == node.workers.end()) continue;
    it->second.set_pid(started.pid());
    it->second.set_state(v1::WORKER_STATE_RUNNING);
  }
  for (const auto& exited : resume.exited()) {
    v1::NodeEvent event;  // checked as the same exit sent on its own would be
    *event.mutable_worker_exited() = exited;
    if (CheckEvent(node, event)) adoption.exited[node.id].push_back(exited);
  }
  adoption.ended[node.id] = resume.ended();
  adoption.workers_back += local;
  Record(Event::kNodeJoined, {{"node", join.node_name()},
                              {"address", join.host_address()},
                              {"pid", join.pid()},
                              {"node_rank", assignment.node_rank()},
                              {"workers", local},
                              {"resumes_generation", adoption.generation}});
  common::Logger("scheduler")
      ->info("{} is back with generation {} running: {} of {} workers", Describe(node),
             adoption.generation, adoption.workers_back, adoption.world_size);
  if (adoption.workers_back == adoption.world_size) CompleteAdoption("");
}

void Scheduler::ArmAdoption() {
  adoption_->timer = clock_.After(*options_.adopt_timeout, [this] {
    if (!adoption_) return;
    const bool patient = options_.cluster_timeout < common::Duration::zero() ||
                         clock_.Now() - started_at_ < options_.cluster_timeout;
    if (adoption_->generation == 0 && patient) {
      // Nobody is back: the nodes may all still follow the lost daemon (cut off from the
      // store, not from them). Nothing is taken over, and nothing is recorded, until one is
      // (or --cluster_time_out passes); the daemon stops the job sooner when its agents say
      // no launcher of it runs any more.
      if (!std::exchange(adoption_->said_waiting, true)) {
        common::Logger("scheduler")
            ->warn("no node of the job is back yet; waiting for one before taking it over");
      }
      return ArmAdoption();
    }
    if (adoption_->generation == 0) {
      return CompleteAdoption("nobody came back within the cluster timeout");
    }
    const int missing = adoption_->world_size - adoption_->workers_back;
    CompleteAdoption(
        absl::StrFormat("%d worker(s) did not come back within %.1f s of the daemon's move",
                        missing, std::chrono::duration<double>(*options_.adopt_timeout).count()));
  });
}

void Scheduler::CompleteAdoption(const std::string& missing) {
  std::unique_ptr<Adoption> adoption = std::move(adoption_);
  adoption->timer.reset();
  if (adoption->generation == 0) {
    v1::JobOutcome lost;
    lost.set_kind(v1::JobOutcome::KIND_NODE_LOST);
    lost.set_message("no node of the job came back after its daemon moved: " + missing);
    return Finish(std::move(lost));
  }
  generation_ = adoption->generation;
  restarts_.Resume(adoption->restart_count);
  tally_.world = adoption->world_size;
  tally_.started = 0;
  tally_.succeeded = 0;
  tally_.stopped.clear();
  ended_scan_from_ = 0;
  for (auto& [id, node] : nodes_) {
    if (!node.joined) continue;
    node.ended = false;
    for (const auto& [rank, worker] : node.workers) {
      tally_.started += worker.state() == v1::WORKER_STATE_RUNNING;
    }
  }
  Enter(JobState::kRunning, "generation " + std::to_string(generation_) + " adopted");
  ledger_.OnGenerationStarted(generation_, tally_.world, /*adopted=*/true);
  common::Logger("scheduler")
      ->warn("generation {} goes on under this scheduler: {} of {} worker(s) back{}", generation_,
             adoption->workers_back, tally_.world,
             missing.empty() ? " (none restarted)" : "; " + missing);
  Record(Event::kGenerationRunning,
         {{"generation", generation_}, {"workers", adoption->workers_back}, {"adopted", true}});
  WriteRecord();
  // What happened while no scheduler heard of it, as if it had been heard.
  for (auto& [id, exits] : adoption->exited) {
    for (const auto& exited : exits) {
      auto node = nodes_.find(id);
      if (node != nodes_.end()) OnWorkerExited(node->second, exited);
    }
  }
  if (!missing.empty()) {
    const std::string what = missing;
    CountFailure(FailureCause::kConnectionLost);
    const bool recoverable = !stop_requested_;
    if (Elastic() && recoverable && membership_.workers >= min_world()) {
      Reform(what);
    } else if (recoverable && restarts_.BudgetLeft()) {
      lost_node_ = what;
      BeginStopping({StopReason::Kind::kNodeLost, what, {}, {}});
    } else {
      BeginStopping({StopReason::Kind::kNodeLost, what, {}, {}});
    }
  }
  for (const auto& [id, ended] : adoption->ended) {
    auto node = nodes_.find(id);
    if (ended && node != nodes_.end()) OnGenerationEnded(node->second);
  }
}

}  // namespace gangrun::scheduler
