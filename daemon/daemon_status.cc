// The daemon as operators see it: its status (agents and every job) and its metrics. Part of
// the Daemon actor (daemon.h): the same strand, the same state.

#include "daemon/daemon.h"
#include "proto/conversions.h"
#include "scheduler/metrics.h"

namespace gangrun::daemon {

v1::DaemonStatusResponse Daemon::Status() const {
  v1::DaemonStatusResponse status;
  status.set_jobs_submitted(jobs_submitted_);
  if (!active_) {
    status.set_standby(true);
    status.set_active(options_.store->active_address());
  }
  for (const auto& [id, agent] : agents_) {
    if (!agent.registered) continue;
    auto* a = status.add_agents();
    a->set_agent_id(id);
    a->set_name(agent.info.name());
    a->set_address(agent.info.address());
    a->set_slots(agent.info.slots());
    a->set_used_slots(agent.used_slots);
    a->set_pid(agent.info.pid());
    for (const auto& [job_id, slots] : agent.jobs) a->add_jobs(job_id);
  }
  for (const auto& [id, job] : jobs_) {
    if (job->scheduler) {
      *status.add_jobs() = job->scheduler->Status();
    } else {
      auto* waiting = status.add_jobs();
      waiting->set_job_id(id);
      waiting->set_phase(v1::JOB_PHASE_WAITING);
      waiting->set_world_size(job->config.world_size);
      waiting->set_min_world_size(job->config.world_size);
    }
  }
  for (const auto& finished : finished_) *status.add_finished() = finished;
  return status;
}

std::string Daemon::Metrics() const {
  std::vector<scheduler::JobView> views;
  int running = 0, waiting = 0, used = 0, slots = 0, agents = 0;
  for (const auto& [id, job] : jobs_) {
    if (job->scheduler) {
      views.push_back({job->scheduler.get(), job->telemetry.get(), job->store.get()});
      ++running;
    } else {
      ++waiting;
    }
  }
  for (const auto& [id, agent] : agents_) {
    if (!agent.registered) continue;
    ++agents;
    slots += agent.info.slots();
    used += agent.used_slots;
  }
  std::map<std::string, std::vector<std::string>> extra;
  extra["gangrun_agents"] = {"gangrun_agents " + std::to_string(agents)};
  extra["gangrun_agent_slots"] = {
      "gangrun_agent_slots{state=\"used\"} " + std::to_string(used),
      "gangrun_agent_slots{state=\"free\"} " + std::to_string(slots - used)};
  extra["gangrun_jobs"] = {"gangrun_jobs{state=\"running\"} " + std::to_string(running),
                           "gangrun_jobs{state=\"waiting\"} " + std::to_string(waiting)};
  extra["gangrun_jobs_submitted_total"] = {"gangrun_jobs_submitted_total " +
                                           std::to_string(jobs_submitted_)};
  for (v1::JobOutcome::Kind kind : proto::Values<v1::JobOutcome::Kind>()) {
    auto it = jobs_finished_.find(proto::Name(kind));
    extra["gangrun_jobs_finished_total"].push_back(
        "gangrun_jobs_finished_total{outcome=\"" + proto::Name(kind) + "\"} " +
        std::to_string(it == jobs_finished_.end() ? 0 : it->second));
  }
  return scheduler::RenderMetrics(views, extra);
}

absl::StatusOr<Scheduler*> Daemon::SchedulerOf(const std::string& job_id) {
  GANGRUN_ON_STRAND(strand_);
  std::vector<Job*> running;
  for (const auto& [id, job] : jobs_) {
    if ((job_id.empty() || id == job_id) && job->scheduler && !job->closing && !job->outcome) {
      running.push_back(job.get());
    }
  }
  if (running.empty()) {
    return absl::NotFoundError(job_id.empty() ? "no job is running"
                                              : "no running job '" + job_id + "'");
  }
  if (running.size() > 1) {
    return absl::InvalidArgumentError(std::to_string(running.size()) +
                                      " jobs are running: name one with --job");
  }
  return running.front()->scheduler.get();
}

void Daemon::Stacks(const v1::StacksRequest& request, Scheduler::StacksDone done) {
  auto scheduler = SchedulerOf(request.job_id());
  if (!scheduler.ok()) return done(scheduler.status());
  (*scheduler)->RequestStacks(request, std::move(done));
}

}  // namespace gangrun::daemon
