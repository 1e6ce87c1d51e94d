#include "scheduler/daemon.h"

#include <csignal>
#include <random>
#include <sstream>

#include "common/logging.h"
#include "common/status.h"
#include "scheduler/metrics.h"
#include "scheduler/peer_checks.h"

namespace gangrun::scheduler {
namespace {

std::string RandomPrefix() {
  std::random_device random;
  std::ostringstream out;
  out << std::hex << (random() & 0xffffff);
  return out.str();
}

v1::JobOutcome Outcome(v1::JobOutcome::Kind kind, const std::string& message) {
  v1::JobOutcome outcome;
  outcome.set_kind(kind);
  outcome.set_message(message);
  return outcome;
}

std::string KindName(const v1::JobOutcome& outcome) {
  std::string name = v1::JobOutcome::Kind_Name(outcome.kind());
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name.substr(5);  // without "kind_"
}

}  // namespace

Daemon::Daemon(boost::asio::io_context& io, common::Clock& clock, Options options,
               Configure configure)
    : io_(io),
      clock_(clock),
      options_(std::move(options)),
      configure_(std::move(configure)),
      telemetry_("daemon", options_.event_log),
      id_prefix_(RandomPrefix()) {}

Daemon::~Daemon() = default;

template <typename Handle>
void Daemon::ExpectHello(int id, std::shared_ptr<Handle> handle) {
  hello_timers_[id] = clock_.After(kHelloTimeout, [this, id, handle] {
    hello_timers_.erase(id);
    common::Logger("daemon")->warn("closing a stream that said nothing within {} s",
                                   kHelloTimeout.count());
    handle->Close();  // its end arrives as OnAgentGone / OnSubmitterGone
  });
}

int Daemon::AddAgent(std::shared_ptr<AgentStream::Handle> handle) {
  int id = next_id_++;
  agents_[id].handle = handle;
  ExpectHello(id, std::move(handle));
  return id;
}

void Daemon::OnAgentEvent(int agent_id, const v1::AgentEvent& event) {
  auto it = agents_.find(agent_id);
  if (it == agents_.end()) return;
  Agent& agent = it->second;
  if (event.has_register_()) {
    v1::AgentCommand reply;
    absl::Status valid = agent.registered ? absl::FailedPreconditionError("already registered")
                                          : CheckAgentRegister(event.register_());
    if (!valid.ok()) {
      common::Logger("daemon")->warn("refused an agent: {}", std::string(valid.message()));
      reply.mutable_rejected()->set_reason(std::string(valid.message()));
      agent.handle->Send(reply);
      agent.handle->Close();
      return;
    }
    agent.registered = true;
    hello_timers_.erase(agent_id);
    agent.info = event.register_();
    reply.mutable_registered()->set_agent_id(agent_id);
    agent.handle->Send(reply);
    common::Logger("daemon")->info("agent {} '{}' ({}) registered with {} slot(s)", agent_id,
                                   agent.info.name(), agent.info.address(), agent.info.slots());
    telemetry_.Record(Event::kAgentRegistered, {{"agent", agent_id},
                                                {"name", agent.info.name()},
                                                {"address", agent.info.address()},
                                                {"slots", agent.info.slots()},
                                                {"pid", agent.info.pid()}});
    TryPlace();
    return;
  }
  if (event.has_output()) {
    if (Job* job = FindJob(event.output().job_id())) RelayOutput(*job, event.output().data());
    return;
  }
  if (event.has_exited()) OnLauncherExited(agent_id, event.exited());
}

void Daemon::OnAgentGone(int agent_id) {
  auto it = agents_.find(agent_id);
  if (it == agents_.end()) return;
  if (it->second.registered) {
    common::Logger("daemon")->warn("agent {} '{}' disconnected", agent_id, it->second.info.name());
    telemetry_.Record(Event::kAgentLost, {{"agent", agent_id}, {"name", it->second.info.name()}});
  }
  std::vector<std::string> job_ids;
  for (const auto& [job_id, slots] : it->second.jobs) job_ids.push_back(job_id);
  for (const auto& job_id : job_ids) {
    v1::LauncherExited exited;
    exited.set_job_id(job_id);
    exited.set_error("agent '" + it->second.info.name() + "' disconnected");
    OnLauncherExited(agent_id, exited);
  }
  agents_.erase(agent_id);
  hello_timers_.erase(agent_id);
}

int Daemon::AddSubmitter(std::shared_ptr<SubmitStream::Handle> handle) {
  int id = next_id_++;
  submitters_[id] = handle;
  ExpectHello(id, std::move(handle));
  return id;
}

void Daemon::OnSubmitEvent(int submit_id, const v1::SubmitEvent& event) {
  auto submitter = submitters_.find(submit_id);
  if (submitter == submitters_.end()) return;
  if (event.has_stop()) {
    std::vector<std::string> ids;
    for (auto& [id, job] : jobs_) {
      if (job->submit_id == submit_id) ids.push_back(id);
    }
    for (const auto& id : ids) {
      Stop(id, StopSignal(event.stop().signal()), Sanitize(event.stop().reason(), kMaxReasonBytes));
    }
    return;
  }
  if (!event.has_job()) return;
  hello_timers_.erase(submit_id);
  auto reject = [&](const std::string& why) {
    v1::SubmitReply reply;
    reply.set_rejected(why);
    submitter->second->Send(reply);
    submitter->second->Close();
  };
  const v1::SubmitJob& spec = event.job();
  if (absl::Status valid = CheckSubmitJob(spec); !valid.ok()) {
    return reject(std::string(valid.message()));
  }
  auto configured = configure_(spec);
  if (!configured.ok()) return reject(std::string(configured.status().message()));
  auto job = std::make_unique<Job>();
  job->config = *configured;
  job->config.scheduler.world_size = spec.spec().worker_num();
  job->id = id_prefix_ + "-" + std::to_string(next_id_++);
  job->config.scheduler.run_id = job->id;
  job->config.scheduler.personality = "gangrun";
  job->submit_id = submit_id;
  job->spec = spec;
  ++jobs_submitted_;
  common::Logger("daemon")->info("job {} submitted: {} worker(s), task {}", job->id,
                                 spec.spec().worker_num(), spec.spec().task_script());
  telemetry_.Record(Event::kJobSubmitted, {{"job_id", job->id},
                                           {"workers", spec.spec().worker_num()},
                                           {"task", spec.spec().task_script()}});
  if (spec.spec().cluster_time_out() >= 0) {
    job->wait_timer =
        clock_.After(std::chrono::seconds(spec.spec().cluster_time_out()), [this, id = job->id] {
          Job* waiting = FindJob(id);
          if (waiting == nullptr || waiting->scheduler) return;
          EndJob(id, Outcome(v1::JobOutcome::KIND_FORMATION_FAILED,
                             "no " + std::to_string(waiting->spec.spec().worker_num()) +
                                 " free worker slots on the registered agents within the "
                                 "cluster timeout"));
        });
  }
  pending_.push_back(job->id);
  jobs_[job->id] = std::move(job);
  TryPlace();
}

void Daemon::OnSubmitterGone(int submit_id) {
  submitters_.erase(submit_id);
  hello_timers_.erase(submit_id);
  std::vector<std::string> ids;
  for (const auto& [id, job] : jobs_) {
    if (job->submit_id == submit_id) ids.push_back(id);
  }
  for (const auto& id : ids) Stop(id, SIGTERM, "its gangrun submit went away");
}

Daemon::Job* Daemon::FindJob(const std::string& id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

void Daemon::Reply(const Job& job, const v1::SubmitReply& reply) {
  auto it = submitters_.find(job.submit_id);
  if (it != submitters_.end()) it->second->Send(reply);
}

void Daemon::RelayOutput(Job& job, const std::string& data) {
  auto it = submitters_.find(job.submit_id);
  if (it == submitters_.end()) return;
  v1::SubmitReply reply;
  if (job.dropped_output > 0) {
    reply.set_output("gangrun: " + std::to_string(job.dropped_output) +
                     " bytes of output were not shown: this submit did not keep up\n" + data);
  } else {
    reply.set_output(data);
  }
  if (it->second->TrySend(reply, kMaxQueuedOutput)) {
    job.dropped_output = 0;
  } else {
    job.dropped_output += data.size();
  }
}

absl::StatusOr<std::vector<std::pair<int, int>>> Daemon::Place(const Job& job) const {
  std::vector<std::pair<int, int>> placement;
  int remaining = job.spec.spec().worker_num();
  const int per_agent = job.spec.local_worker_num_given() ? job.spec.spec().local_worker_num() : 0;
  int free_total = 0, agents = 0;
  for (const auto& [id, agent] : agents_) {
    if (!agent.registered) continue;
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
    if (!agent.registered) continue;
    const int slots = agent.info.slots();
    capacity += per_agent > 0 ? (slots >= per_agent ? per_agent : 0) : slots;
  }
  const std::string want =
      std::to_string(job.spec.spec().worker_num()) + " worker slots" +
      (per_agent > 0 ? " (" + std::to_string(per_agent) + " per agent)" : std::string());
  if (capacity < job.spec.spec().worker_num()) {
    return absl::ResourceExhaustedError(
        "waiting for agents: the job needs " + want + ", more than the " +
        std::to_string(capacity) + " that the " + std::to_string(agents) +
        " registered agent(s) have in all; later jobs that fit run meanwhile");
  }
  return absl::UnavailableError("waiting for " + want + " to be free; " +
                                std::to_string(free_total) + " free on " + std::to_string(agents) +
                                " agent(s)");
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
      absl::Status started = StartJob(*job, std::move(*placement));
      if (!started.ok()) {
        EndJob(job->id,
               Outcome(v1::JobOutcome::KIND_FORMATION_FAILED, std::string(started.message())));
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

absl::Status Daemon::StartJob(Job& job, std::vector<std::pair<int, int>> placement) {
  job.telemetry = std::make_unique<Telemetry>(job.id, options_.event_log);
  job.scheduler = std::make_unique<Scheduler>(clock_, job.config.scheduler);
  job.scheduler->SetTelemetry(job.telemetry.get());
  job.store = std::make_unique<KvStore>(clock_, job.config.kv);
  ServerOptions server_options{options_.listen_host + ":0", options_.token, options_.credentials};
  if (options_.listen_host.find(':') != std::string::npos) {
    server_options.listen_address = "[" + options_.listen_host + "]:0";
  }
  ASSIGN_OR_RETURN(job.server,
                   SchedulerServer::Start(io_, *job.scheduler, *job.store, server_options));
  job.scheduler->SetOnFinished([this, id = job.id](const v1::JobOutcome& outcome) {
    if (Job* finished = FindJob(id)) {
      finished->outcome = outcome;
      MaybeJobDone(*finished);
    }
  });
  job.scheduler->Start();
  job.placement = std::move(placement);
  v1::SubmitReply accepted;
  accepted.mutable_accepted()->set_job_id(job.id);
  accepted.mutable_accepted()->set_port(job.server->port());
  nlohmann::json names = nlohmann::json::array();
  for (size_t rank = 0; rank < job.placement.size(); ++rank) {
    auto [agent_id, workers] = job.placement[rank];
    Agent& agent = agents_.at(agent_id);
    agent.used_slots += workers;
    agent.jobs[job.id] = workers;
    accepted.mutable_accepted()->add_agents(agent.info.name());
    names.push_back(agent.info.name());
    v1::AgentCommand command;
    auto* run = command.mutable_run();
    run->set_job_id(job.id);
    // What the daemon chooses for every launcher of the job.
    v1::LaunchSpec& spec = *run->mutable_spec();
    spec = job.spec.spec();
    spec.set_worker_num(job.spec.spec().worker_num());
    spec.set_worker_num_min(0);
    spec.set_local_worker_num(workers);
    spec.set_node_rank(static_cast<int>(rank));
    spec.set_master_port(job.server->port());
    spec.set_join(true);
    spec.set_run_id(job.id);
    agent.handle->Send(command);
    ++job.launchers_running;
  }
  common::Logger("daemon")->info("job {} placed on {} agent(s), scheduler port {}", job.id,
                                 job.placement.size(), job.server->port());
  telemetry_.Record(Event::kJobStarted,
                    {{"job_id", job.id}, {"agents", names}, {"port", job.server->port()}});
  Reply(job, accepted);
  return absl::OkStatus();
}

void Daemon::OnLauncherExited(int agent_id, const v1::LauncherExited& exited) {
  auto agent = agents_.find(agent_id);
  if (agent != agents_.end()) {
    auto slot = agent->second.jobs.find(exited.job_id());
    if (slot == agent->second.jobs.end()) return;
    agent->second.used_slots -= slot->second;
    agent->second.jobs.erase(slot);
  }
  Job* job = FindJob(exited.job_id());
  if (job == nullptr) return;
  --job->launchers_running;
  const bool clean =
      exited.error().empty() && exited.exit().signal() == 0 && exited.exit().exit_code() == 0;
  if (!job->outcome && !clean && job->launcher_failure.empty()) {
    std::string name = agent != agents_.end() ? agent->second.info.name() : "?";
    job->launcher_failure =
        "the launcher on agent '" + name + "' ended before the job did: " +
        (!exited.error().empty()  ? exited.error()
         : exited.exit().signal() ? "killed by signal " + std::to_string(exited.exit().signal())
                                  : "exit code " + std::to_string(exited.exit().exit_code()));
    common::Logger("daemon")->warn("job {}: {}", job->id, job->launcher_failure);
    job->scheduler->Stop(SIGTERM, job->launcher_failure);
  }
  MaybeJobDone(*job);
  TryPlace();
}

void Daemon::MaybeJobDone(Job& job) {
  if (!job.outcome || job.launchers_running > 0 || job.closing) return;
  v1::JobOutcome outcome = *job.outcome;
  if (!job.launcher_failure.empty() && outcome.kind() != v1::JobOutcome::KIND_WORKER_FAILED) {
    outcome = Outcome(job.scheduler->generation() == 0 ? v1::JobOutcome::KIND_FORMATION_FAILED
                                                       : v1::JobOutcome::KIND_NODE_LOST,
                      job.launcher_failure);
  }
  EndJob(job.id, outcome);
}

void Daemon::EndJob(const std::string& job_id, const v1::JobOutcome& outcome) {
  Job* job = FindJob(job_id);
  if (job == nullptr || job->closing) return;
  job->closing = true;
  ++jobs_finished_[KindName(outcome)];
  common::Logger("daemon")->info("job {} ended: {}{}", job_id, KindName(outcome),
                                 outcome.message().empty() ? "" : " (" + outcome.message() + ")");
  telemetry_.Record(
      Event::kJobEnded,
      {{"job_id", job_id}, {"outcome", KindName(outcome)}, {"message", outcome.message()}});
  v1::SubmitReply reply;
  *reply.mutable_finished() = outcome;
  auto submitter = submitters_.find(job->submit_id);
  if (submitter != submitters_.end()) {
    submitter->second->Send(reply);
    submitter->second->Close();
  }
  auto erase = [this, job_id] {
    jobs_.erase(job_id);
    TryPlace();
    if (jobs_.empty() && on_idle_) std::exchange(on_idle_, nullptr)();
  };
  if (job->server) {
    job->store->CancelAll();
    job->server->ShutdownAsync(io_, erase);
  } else {
    erase();
  }
}

int Daemon::Stop(const std::string& job_id, int signal, const std::string& reason) {
  int stopped = 0;
  std::vector<std::string> ids;
  for (const auto& [id, job] : jobs_) {
    if ((job_id.empty() || id == job_id) && !job->closing && !job->outcome) ids.push_back(id);
  }
  for (const auto& id : ids) {
    Job* job = FindJob(id);
    ++stopped;
    if (job->scheduler) {
      job->scheduler->Stop(signal > 0 ? signal : SIGTERM, reason);
    } else {
      v1::JobOutcome outcome = Outcome(v1::JobOutcome::KIND_STOPPED_BY_SIGNAL, reason);
      outcome.set_signal(signal > 0 ? signal : SIGTERM);
      EndJob(id, outcome);
    }
  }
  return stopped;
}

void Daemon::Shutdown(std::function<void()> done) {
  if (jobs_.empty()) {
    done();
    return;
  }
  on_idle_ = std::move(done);
  Stop("", SIGTERM, "the gangrun scheduler daemon is shutting down");
}

v1::DaemonStatusResponse Daemon::Status() const {
  v1::DaemonStatusResponse status;
  status.set_jobs_submitted(jobs_submitted_);
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
      waiting->set_world_size(job->spec.spec().worker_num());
      waiting->set_min_world_size(job->spec.spec().worker_num());
    }
  }
  return status;
}

std::string Daemon::Metrics() const {
  std::vector<JobView> views;
  int running = 0, waiting = 0, used = 0, slots = 0, agents = 0;
  for (const auto& [id, job] : jobs_) {
    if (job->scheduler) {
      views.push_back({job->scheduler.get(), job->telemetry.get()});
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
  for (const char* kind :
       {"succeeded", "worker_failed", "stopped_by_signal", "formation_failed", "node_lost"}) {
    auto it = jobs_finished_.find(kind);
    extra["gangrun_jobs_finished_total"].push_back(
        std::string("gangrun_jobs_finished_total{outcome=\"") + kind + "\"} " +
        std::to_string(it == jobs_finished_.end() ? 0 : it->second));
  }
  return RenderMetrics(views, extra);
}

}  // namespace gangrun::scheduler
