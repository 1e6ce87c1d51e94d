// Placing submitted jobs on agents' slots, and starting a placed job: its own Scheduler,
// KvStore and gRPC port in the daemon, and one launcher per chosen agent. Part of the Daemon
// actor (daemon.h): the same strand, the same state.

#include <algorithm>
#include <set>

#include "common/logging.h"
#include "common/net.h"
#include "common/status.h"
#include "daemon/daemon.h"
#include "launcher/launch_spec.h"
#include "proto/conversions.h"
#include "rpc/session_auth.h"

namespace gangrun::daemon {

absl::StatusOr<std::vector<std::pair<int, int>>> Daemon::Place(const Job& job) const {
  std::vector<std::pair<int, int>> placement;
  int remaining = job.config.world_size;
  const int per_agent = job.spec.local_worker_num_given() ? job.config.local_worker_num : 0;
  int free_total = 0, agents = 0, held = 0;
  for (const auto& [id, agent] : agents_) {
    if (!agent.registered) continue;
    if (!standings_.Placeable(agent.info.name())) {
      ++held;  // quarantined or drained: no job is placed on it
      continue;
    }
    ++agents;
    const int free = agent.info.slots() - agent.used_slots;
    free_total += free;
    if (remaining == 0 || free <= 0 || (per_agent > 0 && free < per_agent)) continue;
    const int take = per_agent > 0 ? per_agent : std::min(free, remaining);
    placement.emplace_back(id, take);
    remaining -= take;
  }
  if (remaining == 0) return placement;
  // Would it fit if every registered agent were idle?
  int capacity = 0;
  for (const auto& [id, agent] : agents_) {
    if (!agent.registered || !standings_.Placeable(agent.info.name())) continue;
    const int slots = agent.info.slots();
    capacity += per_agent > 0 ? (slots >= per_agent ? per_agent : 0) : slots;
  }
  const std::string want =
      std::to_string(job.config.world_size) + " worker slots" +
      (per_agent > 0 ? " (" + std::to_string(per_agent) + " per agent)" : std::string());
  const std::string held_out =
      held > 0
          ? " (" + std::to_string(held) + " more quarantined or drained: gangrun status says why)"
          : std::string();
  if (capacity < job.config.world_size) {
    return absl::ResourceExhaustedError(
        "waiting for agents: the job needs " + want + ", more than the " +
        std::to_string(capacity) + " that the " + std::to_string(agents) +
        " registered agent(s) have in all" + held_out + "; later jobs that fit run meanwhile");
  }
  return absl::UnavailableError("waiting for " + want + " to be free; " +
                                std::to_string(free_total) + " free on " + std::to_string(agents) +
                                " agent(s)" + held_out);
}

std::vector<std::pair<int, int>> Daemon::PlaceSpares(
    const Job& job, const std::vector<std::pair<int, int>>& nodes) const {
  std::vector<std::pair<int, int>> spares;
  const int wanted = job.config.scheduler.spare_nodes;
  if (wanted <= 0 || nodes.empty()) return spares;
  int size = 0;
  std::set<int> used;
  for (const auto& [id, workers] : nodes) {
    size = std::max(size, workers);
    used.insert(id);
  }
  for (const auto& [id, agent] : agents_) {
    if (static_cast<int>(spares.size()) == wanted) break;
    if (!agent.registered || used.count(id) || agent.info.slots() - agent.used_slots < size ||
        !standings_.Placeable(agent.info.name())) {
      continue;
    }
    spares.emplace_back(id, size);
  }
  if (static_cast<int>(spares.size()) < wanted) {
    common::Logger("daemon")->warn(
        "job {}: {} of {} spare launcher(s) placed: no other agent has {} free slot(s)", job.id,
        spares.size(), wanted, size);
  }
  return spares;
}

// First come, first served among the jobs the registered agents could ever run: the oldest
// such job that does not fit now holds the later ones back (so a stream of small jobs cannot
// starve it). A job larger than all registered slots together holds nobody back: it waits
// aside, saying so, until agents with enough slots register or its cluster timeout ends it.
void Daemon::TryPlace() {
  // Starting or ending a job may come back here; the outer call then goes round once more.
  if (placing_) {
    place_again_ = true;
    return;
  }
  placing_ = true;
  do {
    place_again_ = false;
    PlacePending();
  } while (place_again_);
  placing_ = false;
}

void Daemon::PlacePending() {
  std::vector<std::string> still_pending;
  bool blocked = false;
  const std::deque<std::string> pending = std::move(pending_);
  pending_.clear();
  for (const std::string& id : pending) {
    Job* job = FindJob(id);
    if (job == nullptr) continue;
    if (blocked) {
      still_pending.push_back(id);
      continue;
    }
    auto placement = Place(*job);
    if (placement.ok()) {
      job->wait_timer.reset();
      std::vector<std::pair<int, int>> spares = PlaceSpares(*job, *placement);
      job->spares = spares.size();
      placement->insert(placement->end(), spares.begin(), spares.end());
      absl::Status started = StartJob(*job, std::move(*placement));
      if (!started.ok()) {
        EndJob(job->id, proto::Outcome(v1::JobOutcome::KIND_FORMATION_FAILED,
                                       std::string(started.message())));
      }
      continue;
    }
    still_pending.push_back(id);
    const bool could_ever_fit = placement.status().code() == absl::StatusCode::kUnavailable;
    blocked = could_ever_fit;
    ReportWaiting(*job, std::string(placement.status().message()));
  }
  // Jobs submitted meanwhile (by a nested call) queue behind those still waiting.
  pending_.insert(pending_.begin(), still_pending.begin(), still_pending.end());
}

void Daemon::ReportWaiting(Job& job, const std::string& why) {
  if (job.waiting_reported == why) return;
  job.waiting_reported = why;
  common::Logger("daemon")->info("job {}: {}", job.id, why);
  v1::SubmitReply reply;
  reply.set_waiting(why);
  Reply(job, reply);
}

absl::Status Daemon::StartScheduler(Job& job) {
  if (options_.store != nullptr) {
    // As a one-shot job's scheduler on a store: no generation starts unless the store
    // confirmed this daemon's lease within its TTL; `status` says when it does not answer.
    StoreLink* store = options_.store;
    job.config.scheduler.may_start = [store] { return store->LeaseValid(); };
    job.config.scheduler.store_note = [store] { return store->Note(); };
  }
  if (!job.adopted) job.config.scheduler.queued_since = job.submitted_at;
  job.telemetry = std::make_unique<Telemetry>(job.id, options_.event_log);
  job.scheduler = std::make_unique<Scheduler>(clock_, job.config.scheduler);
  job.scheduler->SetTelemetry(job.telemetry.get());
  job.store = std::make_unique<KvStore>(clock_, job.config.kv);
  // The job's own token: its launchers and workers hold that one, never the daemon's.
  scheduler::ServerOptions server_options{options_.listen_host + ":0",
                                          rpc::JobToken(options_.token, job.id),
                                          options_.credentials, job.config.scheduler.run_id};
  if (options_.listen_host.find(':') != std::string::npos) {
    server_options.listen_address = "[" + options_.listen_host + "]:0";
  }
  ASSIGN_OR_RETURN(job.server,
                   SchedulerServer::Start(io_, *job.scheduler, *job.store, server_options));
  if (job.config.scheduler.agent_store) {
    scheduler::TorchStore::Options torch{options_.listen_host};
    torch.report_waits_after = job.config.scheduler.store_wait_report;
    ASSIGN_OR_RETURN(job.torch_store,
                     scheduler::TorchStore::Start(io_, clock_, *job.store, std::move(torch)));
    job.scheduler->SetTorchStore(job.torch_store.get());
  }
  // The job's owner reads on their own console why each generation ended.
  job.scheduler->SetOnNote([this, id = job.id](const std::string& text) {
    common::Logger("daemon")->info("job {}: {}", id, text);
    if (Job* noted = FindJob(id)) {
      noted->generation_ends.push_back(text.substr(0, 1024));
      if (noted->generation_ends.size() > kGenerationEndsKept) noted->generation_ends.pop_front();
      v1::SubmitReply reply;
      reply.set_note(text);
      Reply(*noted, reply);
    }
  });
  // The failures the job attributes to its agents: their standing across jobs.
  job.scheduler->SetOnBlame([this, id = job.id](const std::string& agent, const std::string& why) {
    BlameAgent(agent, id, why);
  });
  job.scheduler->SetOnFinished([this, id = job.id](const v1::JobOutcome& outcome) {
    if (Job* finished = FindJob(id)) {
      finished->outcome = outcome;
      MaybeJobDone(*finished);
    }
  });
  if (options_.store != nullptr) {
    job.scheduler->SetOnRecord([this, id = job.id](nlohmann::json record) {
      Job* recorded = FindJob(id);
      if (recorded == nullptr) return;
      recorded->progress = ProgressOf(record);
      // Each failed generation's verdict (scheduler/recovery_policy.h), in the store's record.
      if (record.contains("verdicts")) recorded->progress["verdicts"] = record["verdicts"];
      SaveJob(*recorded);
    });
    options_.store->Publish(job.id,
                            common::JoinHostPort(options_.advertise_host, job.server->port()));
  }
  job.scheduler->Start();
  return absl::OkStatus();
}

absl::Status Daemon::StartJob(Job& job, std::vector<std::pair<int, int>> placement) {
  // The spares the job has are those placed (fewer when other agents lacked the slots).
  job.config.scheduler.spare_nodes = static_cast<int>(job.spares);
  RETURN_IF_ERROR(StartScheduler(job));
  job.placement = std::move(placement);
  v1::SubmitReply accepted;
  accepted.mutable_accepted()->set_job_id(job.id);
  accepted.mutable_accepted()->set_port(job.server->port());
  accepted.mutable_accepted()->set_adoptable(options_.store != nullptr);
  nlohmann::json names = nlohmann::json::array();
  for (size_t rank = 0; rank < job.placement.size(); ++rank) {
    auto [agent_id, workers] = job.placement[rank];
    Agent& agent = agents_.at(agent_id);
    agent.used_slots += workers;
    agent.jobs[job.id] = workers;
    accepted.mutable_accepted()->add_agents(agent.info.name());
    names.push_back(agent.info.name());
    job.placed_on.emplace_back(agent.info.name(), workers);
    v1::AgentCommand command;
    auto* run = command.mutable_run();
    run->set_job_id(job.id);
    // What the daemon chooses for every launcher of the job.
    v1::LaunchSpec& spec = *run->mutable_spec();
    spec = job.spec.spec();
    launcher::SetLaunchOption(spec, "worker_num", std::to_string(job.config.world_size));
    launcher::SetLaunchOption(spec, "local_worker_num", std::to_string(workers));
    // A spare has no node rank until it takes a place.
    const bool spare = rank >= job.placement.size() - job.spares;
    launcher::SetLaunchOption(spec, "node_rank", spare ? "-1" : std::to_string(rank));
    launcher::SetLaunchOption(spec, "master_port", std::to_string(job.server->port()));
    launcher::SetLaunchOption(spec, "join", "True");
    launcher::SetLaunchOption(spec, "run_id", job.id);
    if (options_.store != nullptr) {
      // Its launchers keep their workers if this daemon is lost and follow the next one.
      launcher::SetLaunchOption(spec, "store", options_.store_url);
      launcher::SetLaunchOption(spec, "store_follow", "True");
      for (const auto& [name, file] :
           {std::pair<const char*, const std::string&>{"store_cacert", options_.store_cacert},
            {"store_cert", options_.store_cert},
            {"store_key", options_.store_key}}) {
        if (!file.empty()) launcher::SetLaunchOption(spec, name, file);
      }
    }
    agent.handle->Send(command);
    ++job.launchers_running;
  }
  common::Logger("daemon")->info("job {} placed on {} agent(s), scheduler port {}", job.id,
                                 job.placement.size(), job.server->port());
  telemetry_.Record(Event::kJobStarted,
                    {{"job_id", job.id}, {"agents", names}, {"port", job.server->port()}});
  Reply(job, accepted);
  SaveJob(job);
  return absl::OkStatus();
}

}  // namespace gangrun::daemon
