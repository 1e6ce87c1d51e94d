#include "launcher/job_runner.h"

#include <unistd.h>

#include <boost/asio/post.hpp>
#include <csignal>
#include <fstream>

#include "absl/algorithm/container.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/descendants.h"
#include "common/env_names.h"
#include "common/event_loop.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/status.h"
#include "node/keeper_client.h"
#include "node/log_files.h"
#include "node/remote_link.h"
#include "node/worker_channels.h"
#include "rpc/credentials.h"
#include "rpc/server.h"

namespace gangrun::launcher {
namespace {

bool Tailed(const Options& options, int rank, int local_rank) {
  if (!options.console_local_ranks.empty() && options.console_local_ranks.count(local_rank) == 0) {
    return false;
  }
  for (int selected : options.tail_worker_log) {
    if (selected == -1 || selected == rank) return true;
  }
  return false;
}

// VmHWM of this process image (getrusage's ru_maxrss survives exec and may report the
// parent's peak when we were started with vfork).
long PeakResidentKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

}  // namespace

ReadyNotifier::~ReadyNotifier() {
  if (fd_ >= 0) close(fd_);
}

void ReadyNotifier::Running() { Send("R"); }

void ReadyNotifier::Ended(const v1::JobOutcome& outcome) {
  Send("O" + outcome.SerializeAsString());
}

void ReadyNotifier::Send(const std::string& bytes) {
  if (fd_ < 0) return;
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd_);
  fd_ = -1;
}

JobRunner::JobRunner(const Options& options, const HostFacts& facts, const RunContext& context)
    : options_(options),
      facts_(facts),
      context_(context),
      ready_(context.ready_fd),
      clock_(io_.get_executor()),
      signals_(io_, SIGINT, SIGTERM, SIGHUP) {}

JobRunner::~JobRunner() {
  if (joined_) *joined_ = true;  // a store's watch ends
  if (reaper_.joinable()) reaper_.join();
  remote_.reset();  // ends the stream before the node goes away
  node_.reset();
  // The schedulers call into the store role (their fence, status note and record): they go
  // first; the store role then writes what is left (the last record, the resignation).
  { SchedulerRole gone = std::move(role_); }  // in the order its members are destroyed
  retired_.reset();
  store_role_.reset();
}

absl::Status JobRunner::Build() {
  absl::Status made = common::MakeDirs(facts_.log_dir, 0700);  // mode 0700, as msrun's
  if (!made.ok()) return absl::InvalidArgumentError("--log_dir: " + std::string(made.message()));
  RETURN_IF_ERROR(common::BecomeChildSubreaper());
  // A fork of this process, while it still has one thread (no gRPC server or channel yet).
  ASSIGN_OR_RETURN(keeper_, node::KeeperClient::Start(io_, {}));
  if (!options_.store.empty() && !Simulating(options_)) {
    ASSIGN_OR_RETURN(store_role_, StoreRole::Open(io_, clock_, options_, facts_));
  }
  if (store_role_ && options_.store_follow) {
    // A daemon's job: its scheduler is the daemon's; the store says where it went.
    facts_.is_master = false;
    RETURN_IF_ERROR(MakeRemote(JoinHostPort(facts_.master_ip, facts_.scheduler_port)));
  } else if (store_role_) {
    store_role_->SetOnStepDown([this](const std::string& why) { StepDown(why); });
    ASSIGN_OR_RETURN(StoreTarget target, store_role_->Begin());
    if (target.ended) {
      // The job ended as this launcher took it over (a fixed job whose scheduler's host was
      // lost with no restart left): it ends with that outcome, as its other launchers do.
      outcome_ = *target.ended;
      return absl::OkStatus();
    }
    role_ = std::move(target.role);
    facts_.is_master = false;  // no MindSpore scheduler process (msrun has no --store)
    RETURN_IF_ERROR(MakeRemote(target.address));
  } else {
    ASSIGN_OR_RETURN(role_, MaybeHostScheduler(io_, clock_, options_, facts_));
    facts_.is_master = role_.scheduler != nullptr;  // only the hosting launcher runs MS_SCHED
    if (!role_.scheduler) {
      RETURN_IF_ERROR(MakeRemote(JoinHostPort(facts_.master_ip, facts_.scheduler_port)));
    }
  }
  if (options_.health_port >= 0) {
    auto health =
        rpc::Server::Start("0.0.0.0:" + std::to_string(options_.health_port), nullptr, {});
    if (!health.ok()) {
      return absl::UnavailableError("--health_port: cannot listen on port " +
                                    std::to_string(options_.health_port));
    }
    health_ = std::move(*health);
    SetNodeHealth(false);
  }
  ASSIGN_OR_RETURN(supervision_, Supervision());
  RETURN_IF_ERROR(MakeNode());
  keeper_->SetLostHandler([this] { OnKeeperLost(); });
  return absl::OkStatus();
}

absl::Status JobRunner::MakeRemote(const std::string& target) {
  if (auto parsed = common::ParseHostPort(target, "the scheduler"); parsed.ok()) {
    facts_.scheduler_host = parsed->host;  // GANGRUN_SCHEDULER of the workers from now on
    facts_.scheduler_port = parsed->port;
  }
  node::RemoteLinkOptions link;
  link.target = target;
  link.token = facts_.token;
  ASSIGN_OR_RETURN(link.credentials, rpc::MakeChannelCredentials(options_.access));
  link.heartbeat_interval = common::DurationOf(options_.heartbeat_interval);
  link.node_timeout = common::DurationOf(options_.node_timeout);
  remote_ = node::MakeRemoteSchedulerLink(io_, clock_, link);
  return absl::OkStatus();
}

absl::Status JobRunner::MakeNode() {
  ASSIGN_OR_RETURN(node::Node::Options node_options, NodeOptions());
  node::SchedulerLink& link =
      role_.link ? static_cast<node::SchedulerLink&>(*role_.link) : *remote_;
  node_ = std::make_unique<node::Node>(
      *keeper_, clock_, link, node_options,
      [this](const v1::RankAssignment& assignment, uint64_t generation, int restart_count) {
        // The rank-0 host's address this host has a route to (README "Addresses").
        const std::string master = common::FirstRoutable(
            {assignment.master_addresses().begin(), assignment.master_addresses().end()});
        if (master.empty() || master == assignment.master_addr()) {
          return PlanProcesses(options_, facts_, assignment, generation, restart_count);
        }
        v1::RankAssignment routed = assignment;
        routed.set_master_addr(master);
        return PlanProcesses(options_, facts_, routed, generation, restart_count);
      },
      NodeCallbacks(), supervision_);
  if (role_.link) role_.link->Connect(node_.get());
  return absl::OkStatus();
}

void JobRunner::ConnectRemote() {
  common::Logger("launcher")
      ->info("joining the scheduler at {}",
             JoinHostPort(facts_.scheduler_host, facts_.scheduler_port));
  auto joined = std::make_shared<std::atomic<bool>>(false);
  if (joined_) *joined_ = true;  // an earlier watch ends
  joined_ = joined;
  remote_->Connect(
      [this, joined](const v1::NodeCommand& command) {
        *joined = true;
        node_->OnCommand(command);
      },
      [this](const std::string& reason, bool unauthenticated) {
        OnSchedulerLost(reason, unauthenticated);
      });
  if (store_role_ && !role_.scheduler && !options_.store_follow) {
    store_role_->WatchUntilJoined(joined, [this, joined] {
      if (*joined || !node_) return;
      OnSchedulerLost(
          "the store names another scheduler now (the one this launcher found had "
          "lost its lease)",
          false);
    });
  }
}

absl::StatusOr<node::Node::Options> JobRunner::NodeOptions() const {
  node::Node::Options o;
  o.node_name = facts_.hostname;
  o.host_address = facts_.local_ip;
  o.addresses = OtherAddresses(options_, facts_);  // for hosts that do not reach local_ip
  o.topology_domain = options_.topology_domain;
  // An agent's launcher: its agent's --topology_domain (a job's own does not travel).
  if (const char* domain = std::getenv(env::kLaunchingDomain)) o.topology_domain = domain;
  // An agent's launcher: the failures of this node are that agent's (README "Agents' standing").
  if (const char* agent = std::getenv(env::kLaunchingAgent)) o.agent = agent;
  o.node_rank = Simulating(options_) ? -1 : options_.node_rank;
  o.local_worker_num = options_.local_worker_num;
  o.world_size = Simulating(options_) ? 0 : options_.worker_num;
  o.min_world_size = Simulating(options_) ? 0 : options_.min_workers();
  o.run_id = options_.run_id;
  o.personality = PersonalityName(options_.personality);
  o.grace = common::DurationOf(options_.grace_period);
  o.log_dir = facts_.log_dir;
  o.heartbeat_interval = common::DurationOf(options_.heartbeat_interval);
  if (options_.cluster_time_out >= 0) {
    // A little longer than the scheduler's own timeout, whose message is the better one.
    o.formation_timeout = common::DurationOf(options_.cluster_time_out + 2.0);
  }
  ASSIGN_OR_RETURN(o.free_port, common::PickFreePort(facts_.local_ip, {options_.master_port,
                                                                       facts_.scheduler_port}));
  // With a store the scheduler may move: this launcher's node stands alone, as every node.
  o.hosts_scheduler = role_.scheduler != nullptr && !store_role_;
  if (!options_.health_check.empty()) o.health_check = HealthCheckSpec();
  o.health_check_timeout = common::DurationOf(options_.health_check_timeout);
  o.kernel_log = options_.kernel_log;
  std::vector<std::string> device_files =
      absl::StrSplit(options_.device_files, ',', absl::SkipEmpty());
  o.device_files = std::move(device_files);
  return o;
}

// --health_check: `sh -c COMMAND` with the launcher's environment and this node's facts; the
// node adds what changes (its node rank, the generation, whether it is a spare).
node::ProcessSpec JobRunner::HealthCheckSpec() const {
  node::ProcessSpec spec;
  spec.exec_path = "/bin/sh";
  spec.argv = {"sh", "-c", options_.health_check};
  spec.env = facts_.base_env;
  auto add = [&spec](const char* name, const std::string& value) {
    spec.env.push_back(std::string(name) + "=" + value);
  };
  add(env::kNodeName, facts_.hostname);
  add(env::kHostAddress, facts_.local_ip);
  add(env::kLocalWorkerNum, std::to_string(options_.local_worker_num));
  add(env::kLogDir, facts_.log_dir);
  add(env::kRunId, options_.run_id);
  spec.log_path = facts_.InLogDir("health_check.log");
  return spec;
}

absl::StatusOr<node::Supervision> JobRunner::Supervision() {
  auto channels = node::WorkerChannels::Create(io_, *keeper_);
  if (channels.ok()) {
    channels_ = std::move(*channels);
    return channels_->supervision();
  }
  if (options_.hang_rules()) {
    return absl::FailedPreconditionError("cannot supervise progress: " +
                                         std::string(channels.status().message()));
  }
  common::Logger("launcher")
      ->warn("workers get no GANGRUN_PROGRESS or TORCHELASTIC_TIMER_FILE: {}",
             std::string(channels.status().message()));
  return node::Supervision{};
}

node::Node::Callbacks JobRunner::NodeCallbacks() {
  node::Node::Callbacks callbacks;
  callbacks.on_process_started = [this](const node::ProcessSpec& spec, pid_t pid) {
    OnProcessStarted(spec, pid);
  };
  callbacks.on_process_exited = [this](const node::ProcessSpec& spec, pid_t, common::ExitStatus) {
    follower_->Finish(spec.log_path);
    filters_->Finish(spec.log_path);
  };
  callbacks.on_generation_running = [this](uint64_t generation) {
    OnGenerationRunning(generation);
  };
  callbacks.on_finished = [this](const v1::JobOutcome& outcome) { OnFinished(outcome); };
  return callbacks;
}

absl::StatusOr<v1::JobOutcome> JobRunner::Run() {
  RETURN_IF_ERROR(Build());
  if (outcome_) {
    common::Logger("launcher")->warn("the job is over: {}", outcome_->message());
    Report();
    return *outcome_;
  }
  console_ = std::make_unique<common::ConsoleScope>(io_);
  filters_ = std::make_unique<LogFilters>(io_, SplitFilters(options_.duplicate_stdout_filters),
                                          SplitFilters(options_.duplicate_stderr_filters));
  follower_ = std::make_unique<node::LogFollower>(
      io_, [](const std::string& lines) { common::Stdout().Write(lines); });
  for (int sig : options_.signals_to_forward) signals_.add(sig);
  WaitForSignal();
  if (role_.scheduler) role_.scheduler->Start();
  if (remote_) ConnectRemote();
  node_->Start();
  // A scheduler of many nodes takes their heartbeats in batches (common/event_loop.h).
  common::RunEventLoop(io_, [this] { return role_.server && role_.server->Busy(); });
  signals_.cancel();
  remote_.reset();  // ends the stream before the node goes away
  if (health_) health_->ShutdownNow();
  if (!outcome_) return absl::InternalError("the job ended without an outcome");
  Report();
  return *outcome_;
}

void JobRunner::OnProcessStarted(const node::ProcessSpec& spec, pid_t pid) {
  auto log = common::Logger("launcher");
  if (spec.rank < 0) {
    log->info("MindSpore scheduler process started (pid {}), log {}", pid, spec.log_path);
    return;
  }
  if (options_.personality == Personality::kMsrun) {
    common::Stdout().Write("Start worker process with rank id:" + std::to_string(spec.rank) +
                           ", log file:" + spec.log_path + ". Environment variable [RANK_ID=" +
                           std::to_string(spec.rank) + "] is exported.\n");
  }
  ran_worker_ = true;
  // Each rank's start is a debug line (GANGRUN_LOG_LEVEL=debug); the generation's line says
  // once that they all run, with their ranks and where their logs are.
  log->debug("rank {} started (pid {}), log {}", spec.rank, pid, spec.log_path);
  started_ranks_.push_back(spec.rank);
  started_log_ = spec.log_path;
  filters_->Follow(spec.log_path);
  if (options_.join && Tailed(options_, spec.rank, spec.local_rank)) {
    std::string prefix = absl::StrReplaceAll(options_.log_prefix,
                                             {{"{host}", facts_.hostname},
                                              {"{rank}", std::to_string(spec.rank)},
                                              {"{local_rank}", std::to_string(spec.local_rank)}});
    follower_->Follow(spec.log_path, prefix);
  }
}

void JobRunner::OnGenerationRunning(uint64_t generation) {
  std::sort(started_ranks_.begin(), started_ranks_.end());
  std::string ranks;
  if (!started_ranks_.empty()) {
    ranks = started_ranks_.size() == 1 ? "rank " + std::to_string(started_ranks_.front())
                                       : "ranks " + std::to_string(started_ranks_.front()) + "-" +
                                             std::to_string(started_ranks_.back());
    const size_t slash = started_log_.rfind('/');
    ranks += ", logs in " +
             (slash == std::string::npos ? std::string(".") : started_log_.substr(0, slash));
  }
  common::Logger("launcher")
      ->info("generation {}: all {} local process(es) running{}", generation,
             options_.local_worker_num, ranks.empty() ? "" : " (" + ranks + ")");
  started_ranks_.clear();
  ready_.Running();
  SetNodeHealth(true);
}

void JobRunner::OnFinished(const v1::JobOutcome& outcome) {
  // The keeper's loss is this job's outcome: what the scheduler made of the ranks that died
  // with it (a spawn it never answered reads as a rank that could not start) is not.
  if (keeper_lost_) return;
  if (seeking_) {
    // A job with a store: the node has stopped its workers; look for the next scheduler.
    seeking_ = false;
    lost_outcome_ = outcome;
    boost::asio::post(io_, [this] { Seek(); });
    return;
  }
  outcome_ = outcome;
  SetNodeHealth(false);
  keeper_->Shutdown(common::DurationOf(options_.grace_period), [this] { StopLoop(); });
}

void JobRunner::OnKeeperLost() {
  v1::JobOutcome lost;
  lost.set_kind(v1::JobOutcome::KIND_NODE_LOST);
  lost.set_message("the process keeper of " + facts_.hostname + " died; its workers died with it");
  outcome_ = lost;
  keeper_lost_ = true;
  // Its orphans were re-parented to us (we are a subreaper): finish them off, off the loop
  // (killing and reaping may take seconds), then end it.
  reaper_ = std::thread([this] {
    common::KillAndReapAllChildren(SIGKILL,
                                   std::chrono::steady_clock::now() + std::chrono::seconds(10));
    boost::asio::post(io_, [this] { StopLoop(); });
  });
}

// The last steps of the shutdown order: console drained, server stopped, loop stopped.
void JobRunner::StopLoop() {
  follower_->DrainAll();
  filters_->DrainAll();
  if (role_.store) role_.store->CancelAll();
  if (role_.server) {
    role_.server->ShutdownAsync(io_, [this] { io_.stop(); });
  } else {
    io_.stop();
  }
}

void JobRunner::WaitForSignal() {
  signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    OnSignal(sig);
    WaitForSignal();
  });
}

void JobRunner::OnSignal(int sig) {
  auto log = common::Logger("launcher");
  if (absl::c_linear_search(options_.signals_to_forward, sig)) {
    log->info("forwarding {} to every worker of the job", common::SignalName(sig));
    if (node_) node_->ForwardSignal(sig);
    return;
  }
  log->info("received {}: stopping the job", common::SignalName(sig));
  if (seek_pending_) {
    // No node now (the search for the next scheduler runs): this launcher ends at once.
    v1::JobOutcome stopped;
    stopped.set_kind(v1::JobOutcome::KIND_STOPPED_BY_SIGNAL);
    stopped.set_signal(sig);
    stopped.set_message("stopped by " + common::SignalName(sig) +
                        " while looking for the job's next scheduler");
    return EndWith(stopped);
  }
  if (node_) node_->RequestStop(sig);
}

void JobRunner::SetNodeHealth(bool serving) {
  if (health_) health_->SetServing(kNodeHealthService, serving);
}

void JobRunner::Report() {
  auto log = common::Logger("launcher");
  if (log->should_log(spdlog::level::debug)) {
    log->debug("peak resident memory {} KiB", PeakResidentKiB());
  }
  const bool msrun = options_.personality == Personality::kMsrun;
  if (outcome_->kind() == v1::JobOutcome::KIND_SUCCEEDED) {
    if (ran_worker_) {
      log->info("job succeeded: all {} local worker(s) exited 0", options_.local_worker_num);
    } else {
      log->info("job succeeded; this node ran no worker (it waited as a spare)");
    }
    if (msrun) common::Stdout().Write("All workers successfully exit!\n");
    common::Stderr().Write(FormatOutcome(*outcome_));  // its warnings, if any
    return;
  }
  std::string report = FormatOutcome(*outcome_);
  if (msrun && !options_.log_dir.empty()) {
    report += "Distributed job exited with exception. Please check logs in directory: " +
              options_.log_dir + ".\n";
  }
  common::Stderr().Write(report);
  ready_.Ended(*outcome_);
}

absl::StatusOr<v1::JobOutcome> RunJob(const Options& options, const HostFacts& facts,
                                      const RunContext& context) {
  JobRunner runner(options, facts, context);
  return runner.Run();
}

}  // namespace gangrun::launcher
