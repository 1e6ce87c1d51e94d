// The daemon as operators see it: its status (agents and every job) and its metrics. Part of
// the Daemon actor (daemon.h): the same strand, the same state.

#include <algorithm>

#include "daemon/daemon.h"
#include "launcher/launch_spec.h"
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
  const double now = common::UnixNow();
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
    standings_.Describe(agent.info.name(), now, *a);
  }
  // Agents held out of placement that are not registered now (after a failover, say).
  for (auto state : {AgentStandings::State::kQuarantined, AgentStandings::State::kDrained}) {
    for (const std::string& name : standings_.In(state)) {
      if (AgentNamed(name) != agents_.end()) continue;
      auto* a = status.add_agents();
      a->set_name(name);
      standings_.Describe(name, now, *a);
    }
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
  // Registered agents by standing, and the changes of standing by the state entered.
  std::map<std::string, int> standing;
  for (const auto& [id, agent] : agents_) {
    if (!agent.registered) continue;
    const AgentStandings::Record* record = standings_.Find(agent.info.name());
    ++standing[AgentStandings::Name(record != nullptr ? record->state
                                                      : AgentStandings::State::kOk)];
  }
  for (auto state : {AgentStandings::State::kOk, AgentStandings::State::kQuarantined,
                     AgentStandings::State::kDrained}) {
    const std::string name = AgentStandings::Name(state);
    extra["gangrun_agent_standing"].push_back("gangrun_agent_standing{state=\"" + name + "\"} " +
                                              std::to_string(standing[name]));
    auto changes = standing_changes_.find(name);
    extra["gangrun_agent_standing_changes_total"].push_back(
        "gangrun_agent_standing_changes_total{to=\"" + name + "\"} " +
        std::to_string(changes == standing_changes_.end() ? 0 : changes->second));
  }
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

absl::StatusOr<scheduler::LogsSource*> Daemon::LogsOf(const std::string& job_id) {
  auto running = SchedulerOf(job_id);
  if (running.ok()) return *running;
  auto ended = ended_places_.find(job_id);
  if (job_id.empty() || ended == ended_places_.end()) {
    if (job_id.empty() || FindJob(job_id) != nullptr) return running.status();
    return absl::NotFoundError("no job '" + job_id + "' is running here or ended here lately");
  }
  std::vector<EndedJobLogs::Agent> agents;
  std::vector<std::string> missing;
  for (const std::string& name : ended->second.agents) {
    auto agent = AgentNamed(name);
    if (agent == agents_.end()) {
      if (std::find(missing.begin(), missing.end(), name) == missing.end()) {
        missing.push_back(name);
      }
    } else if (std::none_of(agents.begin(), agents.end(),
                            [&](const auto& asked) { return asked.id == agent->first; })) {
      agents.push_back({agent->first, name});
    }
  }
  v1::JobLogPlace place = ended->second.place;
  place.set_reader(++log_readers_opened_);
  while (log_readers_.size() >= kMaxLogReaders) log_readers_.erase(log_readers_.begin());
  EndedJobLogs::Daemon daemon{[this](int agent_id, v1::AgentCommand command) {
                                auto it = agents_.find(agent_id);
                                if (it != agents_.end() && it->second.registered) {
                                  it->second.handle->Send(command);
                                }
                              },
                              [this](int agent_id) {
                                auto it = agents_.find(agent_id);
                                return it != agents_.end() && it->second.registered;
                              }};
  auto& reader = log_readers_[place.reader()];
  reader = std::make_unique<EndedJobLogs>(clock_, place, ended->second.world_size,
                                          std::move(agents), std::move(missing), std::move(daemon));
  return reader.get();
}

void Daemon::KeepEndedPlace(const std::string& job_id, const v1::LaunchSpec& spec,
                            std::vector<std::string> agents, int world_size) {
  EndedPlace& ended = ended_places_[job_id];
  ended.agents = std::move(agents);
  ended.place.set_job_id(job_id);
  ended.place.set_log_dir(launcher::LaunchOption(spec, "log_dir"));
  ended.place.set_cwd(spec.cwd());
  ended.world_size = world_size;
  ended_places_order_.push_back(job_id);
  constexpr size_t kMaxEndedPlaces = 1000;  // about 200 bytes each
  while (ended_places_order_.size() > kMaxEndedPlaces) {
    ended_places_.erase(ended_places_order_.front());
    ended_places_order_.pop_front();
  }
}

void Daemon::Stacks(const v1::StacksRequest& request, Scheduler::StacksDone done) {
  auto scheduler = SchedulerOf(request.job_id());
  if (!scheduler.ok()) return done(scheduler.status());
  (*scheduler)->RequestStacks(request, std::move(done));
}

}  // namespace gangrun::daemon
