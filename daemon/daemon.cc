#include "daemon/daemon.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <random>
#include <sstream>

#include "absl/strings/escaping.h"
#include "common/logging.h"
#include "common/status.h"
#include "daemon/checks.h"
#include "proto/conversions.h"
#include "scheduler/job_record.h"
#include "scheduler/metrics.h"
#include "scheduler/peer_checks.h"

namespace gangrun::daemon {

namespace {

// The task as `status` shows it: the script and its arguments, cut at 200 characters.
std::string TaskLine(const v1::LaunchSpec& spec) {
  std::string line = spec.task_script();
  for (const auto& arg : spec.task_args()) line += " " + arg;
  if (line.size() > 200) line = line.substr(0, 197) + "...";
  return line;
}

}  // namespace

void Daemon::KeepFinished(v1::FinishedJob finished) {
  finished_.push_front(std::move(finished));
  const size_t kept = std::min<size_t>(kMaxFinishedKept, options_.history_count);
  while (finished_.size() > kept) finished_.pop_back();
}

void Daemon::PruneHistory() {
  const double oldest =
      options_.history_days > 0 ? common::UnixNow() - options_.history_days * 86400 : -1;
  std::vector<std::string> forget;
  while (!recorded_ended_.empty() &&
         (recorded_ended_.size() > static_cast<size_t>(options_.history_count) ||
          recorded_ended_.begin()->first < oldest)) {
    forget.push_back(recorded_ended_.begin()->second);
    recorded_ended_.erase(recorded_ended_.begin());
  }
  while (!finished_.empty() && finished_.back().ended_unix() < oldest) finished_.pop_back();
  if (oldest > 0) {
    history_timer_ = clock_.After(std::chrono::hours(1), [this] { PruneHistory(); });
  }
  if (forget.empty()) return;
  common::Logger("daemon")->info(
      "deleting {} finished job record(s) from the store (--history_count {}, --history_days {})",
      forget.size(), options_.history_count, options_.history_days);
  for (const std::string& id : forget) {
    ended_.erase(id);
    ended_places_.erase(id);  // its entry in ended_places_order_ goes with the oldest
  }
  if (options_.store != nullptr) options_.store->DeleteJobs(std::move(forget));
}

v1::FinishedJob Daemon::FinishedFromRecord(const nlohmann::json& record) {
  v1::FinishedJob finished;
  finished.set_job_id(record.value("id", ""));
  std::string bytes;
  v1::SubmitJob spec;
  if (absl::Base64Unescape(record.value("submission", ""), &bytes) && spec.ParseFromString(bytes)) {
    finished.set_command(TaskLine(spec.spec()));
    finished.set_user(Sanitize(spec.user(), 64));
  }
  *finished.mutable_outcome() = scheduler::OutcomeFromRecord(record["outcome"]);
  finished.set_generations(record.value("generation", uint64_t{0}));
  finished.set_restarts(record.value("restarts_used", 0));
  finished.set_submitted_unix(record.value("submitted_unix", 0.0));
  finished.set_ended_unix(record.value("ended_unix", 0.0));
  finished.set_world_size(record.value("world_size", 0));
  for (const auto& end : record.value("generation_ends", nlohmann::json::array())) {
    if (end.is_string() &&
        finished.generation_ends_size() < static_cast<int>(kGenerationEndsKept)) {
      finished.add_generation_ends(end.get<std::string>().substr(0, 1024));
    }
  }
  return finished;
}

namespace {

std::string RandomPrefix() {
  std::random_device random;
  std::ostringstream out;
  out << std::hex << (random() & 0xffffff);
  return out.str();
}

}  // namespace

Daemon::Daemon(boost::asio::io_context& io, common::Clock& clock, Options options,
               Configure configure)
    : io_(io),
      clock_(clock),
      options_(std::move(options)),
      configure_(std::move(configure)),
      telemetry_("daemon", options_.event_log),
      id_prefix_(RandomPrefix()),
      active_(options_.store == nullptr),
      standings_(options_.standing) {}

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

std::map<int, Daemon::Agent>::const_iterator Daemon::AgentNamed(const std::string& name) const {
  return std::find_if(agents_.begin(), agents_.end(), [&](const auto& entry) {
    return entry.second.registered && entry.second.info.name() == name;
  });
}

absl::Status Daemon::CheckAgentNameFree(const std::string& name) const {
  auto other = AgentNamed(name);
  if (other == agents_.end()) return absl::OkStatus();
  return absl::AlreadyExistsError(
      "an agent named '" + name + "' is already registered (pid " +
      std::to_string(other->second.info.pid()) + ", address " + other->second.info.address() +
      "); give each agent its own --name (a restarted agent's old session ends first)");
}

int Daemon::AddAgent(std::shared_ptr<AgentStream::Handle> handle) {
  GANGRUN_ON_STRAND(strand_);
  int id = next_id_++;
  agents_[id].handle = handle;
  ExpectHello(id, std::move(handle));
  return id;
}

void Daemon::OnAgentEvent(int agent_id, const v1::AgentEvent& event) {
  GANGRUN_ON_STRAND(strand_);
  auto it = agents_.find(agent_id);
  if (it == agents_.end()) return;
  Agent& agent = it->second;
  if (event.has_register_()) {
    v1::AgentCommand reply;
    absl::Status valid = agent.registered ? absl::FailedPreconditionError("already registered")
                                          : CheckAgentRegister(event.register_());
    if (valid.ok()) valid = CheckAgentNameFree(event.register_().name());
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
    if (options_.store != nullptr) OnAgentBack(agent_id, agent);
    TryPlace();
    return;
  }
  if (event.has_output()) {
    if (Job* job = FindJob(event.output().job_id())) RelayOutput(*job, event.output().data());
    return;
  }
  if (event.has_exited()) OnLauncherExited(agent_id, event.exited());
  if (event.has_probed() && agent.registered) OnProbed(agent, event.probed());
  if (event.has_logs_found()) {
    auto reader = log_readers_.find(event.logs_found().reader());
    if (reader != log_readers_.end()) reader->second->OnFound(agent_id, event.logs_found());
  }
  if (event.has_log_read()) {
    auto reader = log_readers_.find(event.log_read().reader());
    if (reader != log_readers_.end()) reader->second->OnLogRead(agent_id, event.log_read().read());
  }
}

void Daemon::OnAgentGone(int agent_id) {
  GANGRUN_ON_STRAND(strand_);
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
  GANGRUN_ON_STRAND(strand_);
  int id = next_id_++;
  submitters_[id] = handle;
  ExpectHello(id, std::move(handle));
  return id;
}

void Daemon::OnSubmitEvent(int submit_id, const v1::SubmitEvent& event) {
  GANGRUN_ON_STRAND(strand_);
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
  if (event.has_follow()) return OnFollow(submit_id, event.follow());
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
  job->id = id_prefix_ + "-" + std::to_string(next_id_++);
  job->config.scheduler.run_id = job->id;
  job->config.scheduler.personality = "gangrun";
  job->submit_id = submit_id;
  job->spec = spec;
  job->submitted_unix = common::UnixNow();
  job->submitted_at = clock_.Now();
  ++jobs_submitted_;
  common::Logger("daemon")->info("job {} submitted: {} worker(s), task {}", job->id,
                                 job->config.world_size, job->config.task);
  telemetry_.Record(
      Event::kJobSubmitted,
      {{"job_id", job->id}, {"workers", job->config.world_size}, {"task", job->config.task}});
  if (job->config.cluster_time_out >= 0) {
    job->wait_timer =
        clock_.After(std::chrono::seconds(job->config.cluster_time_out), [this, id = job->id] {
          Job* waiting = FindJob(id);
          if (waiting == nullptr || waiting->scheduler) return;
          EndJob(id, proto::Outcome(v1::JobOutcome::KIND_FORMATION_FAILED,
                                    "no " + std::to_string(waiting->config.world_size) +
                                        " free worker slots on the registered agents within the "
                                        "cluster timeout"));
        });
  }
  pending_.push_back(job->id);
  SaveJob(*job);
  jobs_[job->id] = std::move(job);
  TryPlace();
}

void Daemon::OnSubmitterGone(int submit_id) {
  GANGRUN_ON_STRAND(strand_);
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
  const common::ExitStatus exit = proto::FromProto(exited.exit());
  const bool clean = exited.error().empty() && exit.success();
  // An excluded node's launcher ends by the job's decision. In a job placed with spares, the
  // job's scheduler (which sees the connection break) gives a lost node's place to a spare, or
  // ends the job by its own rules.
  const bool excluded = !exit.signaled && exit.code == common::kExitExcluded;
  const bool expected = excluded || job->spares > 0;
  if (excluded && agent != agents_.end() && job->blamed.count(agent->second.info.name()) == 0) {
    // Excluded before its node joined (its health check failed at the start), so the job's
    // scheduler never heard of it.
    BlameAgent(agent->second.info.name(), job->id,
               "its launcher ended excluded (exit 6) before it joined: its health check failed");
  }
  if (!job->outcome && !clean && !expected && job->launcher_failure.empty()) {
    std::string name = agent != agents_.end() ? agent->second.info.name() : "?";
    job->launcher_failure = "the launcher on agent '" + name + "' ended before the job did: " +
                            (!exited.error().empty() ? exited.error() : "it " + exit.ToString());
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
    outcome =
        proto::Outcome(job.scheduler->generation() == 0 ? v1::JobOutcome::KIND_FORMATION_FAILED
                                                        : v1::JobOutcome::KIND_NODE_LOST,
                       job.launcher_failure);
  }
  EndJob(job.id, outcome);
}

void Daemon::EndJob(const std::string& job_id, const v1::JobOutcome& outcome) {
  Job* job = FindJob(job_id);
  if (job == nullptr || job->closing) return;
  job->closing = true;
  ended_[job_id] = outcome;
  ++jobs_finished_[proto::Name(outcome.kind())];
  v1::FinishedJob finished;
  finished.set_job_id(job_id);
  finished.set_command(TaskLine(job->spec.spec()));
  *finished.mutable_outcome() = outcome;
  finished.set_generations(job->scheduler ? job->scheduler->generation()
                                          : job->progress.value("generation", uint64_t{0}));
  finished.set_restarts(job->scheduler ? job->scheduler->Status().restarts()
                                       : job->progress.value("restarts_used", 0));
  finished.set_submitted_unix(job->submitted_unix);
  finished.set_ended_unix(common::UnixNow());
  finished.set_world_size(job->config.world_size);
  finished.set_user(Sanitize(job->spec.user(), 64));
  for (const std::string& end : job->generation_ends) finished.add_generation_ends(end);
  SaveJob(*job, &finished);
  if (options_.store != nullptr && active_) recorded_ended_.emplace(finished.ended_unix(), job_id);
  std::vector<std::string> agents;
  for (const auto& [name, workers] : job->placed_on) agents.push_back(name);
  KeepEndedPlace(job_id, job->spec.spec(), std::move(agents), job->config.world_size);
  KeepFinished(std::move(finished));
  PruneHistory();
  common::Logger("daemon")->info("job {} ended: {}{}", job_id, proto::Name(outcome.kind()),
                                 outcome.message().empty() ? "" : " (" + outcome.message() + ")");
  telemetry_.Record(Event::kJobEnded, {{"job_id", job_id},
                                       {"outcome", proto::Name(outcome.kind())},
                                       {"message", outcome.message()}});
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
  job->torch_store.reset();  // its connections and their waits in the store
  if (job->server) {
    job->store->CancelAll();
    job->server->ShutdownAsync(io_, erase);
  } else {
    erase();
  }
}

int Daemon::Stop(const std::string& job_id, int signal, const std::string& reason) {
  GANGRUN_ON_STRAND(strand_);
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
      v1::JobOutcome outcome = proto::Outcome(v1::JobOutcome::KIND_STOPPED_BY_SIGNAL, reason);
      outcome.set_signal(signal > 0 ? signal : SIGTERM);
      EndJob(id, outcome);
    }
  }
  return stopped;
}

void Daemon::Shutdown(std::function<void()> done) {
  GANGRUN_ON_STRAND(strand_);
  if (jobs_.empty()) {
    done();
    return;
  }
  on_idle_ = std::move(done);
  Stop("", SIGTERM, "the gangrun scheduler daemon is shutting down");
}

}  // namespace gangrun::daemon
