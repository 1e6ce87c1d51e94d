// The daemon on a store (daemon/store_link.h; README "The daemon on a store"): each job's
// record at every job event, the adoption of the jobs another daemon ran (their launchers kept
// their workers and rejoin the job's new scheduler: no worker restarts), the agents that come
// back with their launchers, and the submitters that follow their job here. Part of the
// Daemon actor (daemon.h): the same strand, the same state.

#include <algorithm>
#include <chrono>
#include <csignal>
#include <set>

#include "absl/strings/escaping.h"
#include "common/logging.h"
#include "daemon/daemon.h"
#include "proto/conversions.h"
#include "scheduler/job_record.h"
#include "scheduler/peer_checks.h"

namespace gangrun::daemon {

namespace {
// Ended jobs remembered for submitters that follow them (the store keeps every record).
constexpr size_t kMaxEndedKept = 1000;
// How long an adopted job waits for its agents and its submitter to come back.
constexpr std::chrono::seconds kComeBackTime{30};
}  // namespace

nlohmann::json ProgressOf(const nlohmann::json& record) {
  return {{"generation", record.value("generation", 0)},
          {"restarts_used", record.value("restarts_used", 0)},
          {"restarts_forgiven", record.value("restarts_forgiven", 0)}};
}

absl::Status Daemon::Standby() const {
  if (active_) return absl::OkStatus();
  const std::string active = options_.store->active_address();
  return absl::UnavailableError("this daemon stands by (store " + options_.store->url() + "): " +
                                (active.empty() ? std::string("no daemon is active now")
                                                : "the active daemon is at " + active));
}

void Daemon::SaveJob(const Job& job, const v1::FinishedJob* ended) {
  if (options_.store == nullptr || !active_) return;
  nlohmann::json placed = nlohmann::json::array();
  for (const auto& [agent, workers] : job.placed_on) {
    placed.push_back({{"agent", agent}, {"workers", workers}});
  }
  nlohmann::json record = {{"id", job.id},
                           {"submission", absl::Base64Escape(job.spec.SerializeAsString())},
                           {"state", ended != nullptr ? "ended"
                                     : job.scheduler  ? "running"
                                                      : "pending"},
                           {"placement", std::move(placed)},
                           {"spares", job.spares},
                           {"submitted_unix", job.submitted_unix},
                           {"world_size", job.config.world_size}};
  record.update(ProgressOf(job.progress));
  if (job.progress.contains("verdicts")) record["verdicts"] = job.progress["verdicts"];
  if (ended != nullptr) {  // what EndJob kept of it, as FinishedFromRecord reads it back
    record["outcome"] = scheduler::RecordedOutcome(ended->outcome());
    record["ended_unix"] = ended->ended_unix();
    record["generation"] = ended->generations();
    record["restarts_used"] = ended->restarts();
    record["generation_ends"] =
        std::vector<std::string>(ended->generation_ends().begin(), ended->generation_ends().end());
  }
  options_.store->SaveJob(job.id, std::move(record));
}

void Daemon::BecomeActive(std::vector<nlohmann::json> jobs, std::vector<nlohmann::json> agents) {
  GANGRUN_ON_STRAND(strand_);
  active_ = true;
  for (const nlohmann::json& agent : agents) {
    standings_.Restore(agent["name"].get<std::string>(), agent);
  }
  if (!standings_.In(AgentStandings::State::kQuarantined).empty()) ArmProbes();
  std::vector<const nlohmann::json*> ended_records;
  for (const nlohmann::json& record : jobs) {
    try {
      const std::string id = record.value("id", "");
      if (record.contains("outcome")) {
        ended_[id] = scheduler::OutcomeFromRecord(record["outcome"]);
        ended_records.push_back(&record);
        continue;
      }
      AdoptJob(record);
    } catch (const nlohmann::json::exception& error) {
      // A record this daemon did not write as it expects (another version, a hand edit).
      common::Logger("daemon")->error("a job record in the store is malformed ({}); skipped: {}",
                                      error.what(), record.dump().substr(0, 200));
    }
  }
  while (ended_.size() > kMaxEndedKept) ended_.erase(ended_.begin());
  // The history `status` lists: the newest kMaxFinishedKept, by when they ended.
  std::sort(ended_records.begin(), ended_records.end(), [](const auto* a, const auto* b) {
    return a->value("ended_unix", 0.0) < b->value("ended_unix", 0.0);
  });
  for (const nlohmann::json* record : ended_records) {
    try {
      const std::string id = record->value("id", "");
      recorded_ended_.emplace(record->value("ended_unix", 0.0), id);
      KeepFinished(FinishedFromRecord(*record));
      // Where its logs are, for `gangrun logs --job`.
      std::string bytes;
      v1::SubmitJob spec;
      if (absl::Base64Unescape(record->value("submission", ""), &bytes) &&
          spec.ParseFromString(bytes)) {
        std::vector<std::string> agents;
        for (const auto& placed : record->value("placement", nlohmann::json::array())) {
          agents.push_back(placed.value("agent", ""));
        }
        KeepEndedPlace(id, spec.spec(), std::move(agents), record->value("world_size", 0));
      }
    } catch (const nlohmann::json::exception&) {
    }
  }
  PruneHistory();
  TryPlace();
}

void Daemon::AdoptJob(const nlohmann::json& record) {
  const std::string id = record.value("id", "");
  auto log = common::Logger("daemon");
  std::string bytes;
  v1::SubmitJob spec;
  if (!absl::Base64Unescape(record.value("submission", ""), &bytes) ||
      !spec.ParseFromString(bytes)) {
    log->error("job {}: its record in the store cannot be read; it is not adopted", id);
    return;
  }
  auto configured = configure_(spec);
  if (!configured.ok()) {
    log->error("job {}: {}; it is not adopted", id, std::string(configured.status().message()));
    return;
  }
  auto job = std::make_unique<Job>();
  job->id = id;
  job->spec = spec;
  job->config = *configured;
  job->config.scheduler.run_id = id;
  job->config.scheduler.personality = "gangrun";
  job->adopted = true;
  job->progress = ProgressOf(record);
  job->submitted_unix = record.value("submitted_unix", 0.0);
  Job& adopted = *job;
  jobs_[id] = std::move(job);
  if (record.value("state", "") != "running") {
    // Its submit had no job id yet: it submits the job again to this daemon, so this record
    // ends here (queued again, it would run twice).
    log->info("job {}: was waiting for slots when its daemon moved; its submit submits it again",
              id);
    return EndJob(id, proto::Outcome(v1::JobOutcome::KIND_FORMATION_FAILED,
                                     "its daemon moved before the job was placed"));
  } else {
    for (const auto& placed : record.value("placement", nlohmann::json::array())) {
      const std::string agent = placed.value("agent", "");
      const int workers = placed.value("workers", 0);
      adopted.placed_on.emplace_back(agent, workers);
      adopted.agents_away[agent] = workers;
    }
    adopted.spares = record.value("spares", size_t{0});
    adopted.launchers_running = static_cast<int>(adopted.placed_on.size());
    adopted.config.scheduler.spare_nodes = static_cast<int>(adopted.spares);
    // Its launchers find this scheduler once the old one's lease is gone and rejoin with
    // the generation they run; the places not back by then are lost nodes. A job recorded
    // before its first generation may have started it all the same (the record is written
    // while its nodes start it): its launchers rejoin with it, or join as they first did and
    // it forms afresh.
    adopted.config.scheduler.adopt_timeout = adopted.config.scheduler.node_timeout * 2 +
                                             std::chrono::seconds(store::kDaemonLeaseSeconds);
    adopted.config.scheduler.restarts_forgiven = adopted.progress.value("restarts_forgiven", 0);
    adopted.config.scheduler.adopt_or_form = adopted.progress.value("generation", 0) == 0;
    if (absl::Status started = StartScheduler(adopted); !started.ok()) {
      log->error("job {}: cannot adopt it: {}", id, std::string(started.message()));
      adopted.launchers_running = 0;
      EndJob(id, proto::Outcome(v1::JobOutcome::KIND_NODE_LOST,
                                "its daemon moved and the next one could not take it over: " +
                                    std::string(started.message())));
      return;
    }
    log->warn("job {}: adopted on {} agent(s) (generation {}); its scheduler is on port {}", id,
              adopted.placed_on.size(), adopted.progress.value("generation", 0),
              adopted.server->port());
  }
  adopted.adoption_timer = clock_.After(kComeBackTime, [this, id] { AdoptionOver(id); });
}

void Daemon::AdoptionOver(const std::string& job_id) {
  Job* job = FindJob(job_id);
  if (job == nullptr) return;
  // A job whose nodes came back but whose submit did not is stopped, as a job whose submit
  // went away; one with no node back may still run under the lost daemon: left alone.
  const bool taken_over = job->scheduler && job->scheduler->generation() > 0;
  if (job->submit_id == 0 && !job->outcome && taken_over) {
    Stop(job_id, SIGTERM, "its gangrun submit did not follow it to this daemon");
  }
  if ((!job->agents_away.empty() || (job->submit_id == 0 && !taken_over)) && !job->outcome) {
    // An agent whose stream to the lost daemon has not broken yet (a paused daemon's stays
    // open until gRPC's keep-alive gives up): its launchers run; the job's scheduler, not
    // this count, says whether they are in the job.
    job->adoption_timer = clock_.After(kComeBackTime, [this, job_id] { AdoptionOver(job_id); });
    return;
  }
  // The job is over and these agents never came back: their launchers are gone with them.
  job->launchers_running -= static_cast<int>(job->agents_away.size());
  job->agents_away.clear();
  MaybeJobDone(*job);
}

void Daemon::OnAgentBack(int agent_id, Agent& agent) {
  const std::string& name = agent.info.name();
  const std::set<std::string> running(agent.info.running_jobs().begin(),
                                      agent.info.running_jobs().end());
  auto take = [&](Job& job) {
    auto away = job.agents_away.find(name);
    const int workers = away->second;
    job.agents_away.erase(away);
    agent.used_slots += workers;
    agent.jobs[job.id] = workers;
    job.placement.emplace_back(agent_id, workers);
  };
  for (const v1::LauncherExited& exited : agent.info.exited()) {
    Job* job = FindJob(exited.job_id());
    if (job == nullptr || !job->agents_away.count(name)) continue;
    take(*job);
    OnLauncherExited(agent_id, exited);
  }
  for (const std::string& job_id : running) {
    Job* job = FindJob(job_id);
    if (job != nullptr && job->agents_away.count(name)) {
      take(*job);
      continue;
    }
    if (job == nullptr) {
      // A job the store does not hold (or holds as ended): nobody coordinates it any more.
      v1::AgentCommand stop;
      stop.mutable_stop()->set_job_id(job_id);
      stop.mutable_stop()->set_signal(SIGTERM);
      agent.handle->Send(stop);
    }
  }
  std::vector<std::string> gone;  // placed there, neither running nor reported
  for (const auto& [job_id, job] : jobs_) {
    if (job->agents_away.count(name)) gone.push_back(job_id);
  }
  for (const std::string& job_id : gone) {
    Job* job = FindJob(job_id);
    if (job == nullptr) continue;
    v1::LauncherExited exited;  // it ended while no daemon heard of it
    exited.set_job_id(job_id);
    exited.set_error("its launcher ended while no daemon was active");
    take(*job);
    OnLauncherExited(agent_id, exited);
  }
}

void Daemon::OnFollow(int submit_id, const std::string& job_id) {
  auto submitter = submitters_.find(submit_id);
  if (submitter == submitters_.end()) return;
  hello_timers_.erase(submit_id);
  v1::SubmitReply reply;
  if (!scheduler::IsCleanName(job_id)) {
    reply.set_rejected("a follow needs a job id");
    submitter->second->Send(reply);
    submitter->second->Close();
    return;
  }
  if (Job* job = FindJob(job_id); job != nullptr && !job->closing) {
    job->submit_id = submit_id;
    auto* accepted = reply.mutable_accepted();
    accepted->set_job_id(job_id);
    if (job->server) accepted->set_port(job->server->port());
    for (const auto& [agent, workers] : job->placed_on) accepted->add_agents(agent);
    common::Logger("daemon")->info("job {}: its gangrun submit follows it here", job_id);
    submitter->second->Send(reply);
    if (job->outcome) MaybeJobDone(*job);
    return;
  }
  if (auto ended = ended_.find(job_id); ended != ended_.end()) {
    *reply.mutable_finished() = ended->second;
  } else {
    reply.set_rejected("no job " + job_id + " on this daemon or in its store");
  }
  submitter->second->Send(reply);
  submitter->second->Close();
}

}  // namespace gangrun::daemon
