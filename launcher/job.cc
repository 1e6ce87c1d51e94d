// RunJob: one host's part of a job, from the process keeper to the final report.
// Roles: the launcher whose --master_addr is this host hosts the scheduler (in-process, and
// on gRPC for the other nodes) and talks to it over an in-process link; every other launcher
// (another host, or another launcher on this host that found the port taken) joins it as a
// node over a gRPC stream. A simulation (--sim_level) runs the scheduler in-process only.
// Shutdown order: the scheduler ends the job (JobFinished) -> the keeper kills whatever is
// left below it and exits -> the console follower drains -> the gRPC server stops -> the
// io_context stops.

#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include "absl/strings/str_replace.h"
#include "common/clock.h"
#include "common/console.h"
#include "common/descendants.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/status.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "launcher/exit_codes.h"
#include "launcher/launcher.h"
#include "launcher/local_link.h"
#include "node/grpc_link.h"
#include "node/keeper_client.h"
#include "node/log_files.h"
#include "node/node.h"
#include "rpc/credentials.h"
#include "scheduler/grpc_server.h"
#include "scheduler/kv_store.h"
#include "scheduler/metrics.h"
#include "scheduler/scheduler.h"

namespace gangrun::launcher {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

common::Duration Seconds(double s) {
  return duration_cast<common::Duration>(std::chrono::duration<double>(s));
}

// mkdir -p; directories we create get mode 0700, as msrun's do. A failure here is a bad
// --log_dir (exit 2).
absl::Status MakeLogDir(const std::string& dir) {
  absl::Status made = common::MakeDirs(dir, 0700);
  if (made.ok()) return made;
  return absl::InvalidArgumentError("--log_dir: " + std::string(made.message()));
}

bool Tailed(const Options& options, int rank) {
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

// Reports "running" (0) or an early exit code to the foreground launcher, once.
class ReadyNotifier {
 public:
  explicit ReadyNotifier(int fd) : fd_(fd) {}
  ~ReadyNotifier() { Notify(1); }
  void Notify(int code) {
    if (fd_ < 0) return;
    unsigned char byte = static_cast<unsigned char>(code);
    while (write(fd_, &byte, 1) < 0 && errno == EINTR) {
    }
    close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// The scheduler side of this launcher, when it hosts one.
struct SchedulerRole {
  std::unique_ptr<scheduler::EventLog> event_log;  // with --event_log
  std::unique_ptr<scheduler::Telemetry> telemetry;
  std::unique_ptr<scheduler::Scheduler> scheduler;
  std::unique_ptr<scheduler::KvStore> store;
  std::unique_ptr<scheduler::SchedulerServer> server;  // null when simulating
  std::unique_ptr<scheduler::MetricsServer> metrics;   // with --metrics_port
  std::unique_ptr<LocalLink> link;
};

// Starts the scheduler if this host should run it. Returns an empty role when another
// launcher on this host already listens on the scheduler port (this one then joins it).
absl::StatusOr<SchedulerRole> MaybeHostScheduler(boost::asio::io_context& io, common::Clock& clock,
                                                 const Options& options, HostFacts& facts) {
  SchedulerRole role;
  const bool simulating = Simulating(options);
  if (!facts.is_master && !simulating) return role;
  if (std::getenv(kNodeOnlyEnv) != nullptr) return role;  // a daemon's job: it has the scheduler
  scheduler::Scheduler::Options scheduler_options = SchedulerOptionsFor(options);
  scheduler_options.run_id = facts.run_id;
  if (simulating) {
    scheduler_options.world_size = options.local_worker_num;
    scheduler_options.min_world_size = options.local_worker_num;
  }
  role.scheduler = std::make_unique<scheduler::Scheduler>(clock, scheduler_options);
  if (!options.event_log.empty()) {
    ASSIGN_OR_RETURN(role.event_log, scheduler::EventLog::Open(options.event_log));
  }
  role.telemetry = std::make_unique<scheduler::Telemetry>(facts.run_id, role.event_log.get());
  role.scheduler->SetTelemetry(role.telemetry.get());
  role.store = std::make_unique<scheduler::KvStore>(clock, KvLimitsFor(options));
  if (!simulating) {
    ASSIGN_OR_RETURN(auto credentials, rpc::MakeServerCredentials(options.access));
    scheduler::ServerOptions server_options{
        JoinHostPort(facts.scheduler_host, facts.scheduler_port), facts.token, credentials};
    auto server =
        scheduler::SchedulerServer::Start(io, *role.scheduler, *role.store, server_options);
    if (!server.ok() && facts.single_host) {
      // A single-host job needs no fixed port: take any free one on loopback.
      common::Logger("launcher")
          ->info("port {} is taken; the scheduler listens on another", facts.scheduler_port);
      server_options.listen_address = JoinHostPort(facts.scheduler_host, 0);
      server = scheduler::SchedulerServer::Start(io, *role.scheduler, *role.store, server_options);
    }
    if (!server.ok() && common::PortIsFree(facts.scheduler_host, facts.scheduler_port)) {
      // Not a port conflict: never mistake it for one (and never join ourselves).
      return absl::InvalidArgumentError(
          "cannot start the scheduler's gRPC server on " + server_options.listen_address +
          " although the port is free; check --tls_cert, --tls_key and --tls_ca");
    }
    if (!server.ok()) {
      if (facts.single_host) return server.status();
      common::Logger("launcher")
          ->info("a scheduler already listens on {}; joining it as a node",
                 server_options.listen_address);
      return SchedulerRole{};
    }
    role.server = std::move(*server);
    facts.scheduler_port = role.server->port();
  }
  if (options.metrics_port >= 0 && !simulating) {
    ASSIGN_OR_RETURN(role.metrics,
                     scheduler::MetricsServer::Start(
                         io, "0.0.0.0", options.metrics_port,
                         [&scheduler = *role.scheduler, &telemetry = *role.telemetry] {
                           return scheduler::RenderMetrics({{&scheduler, &telemetry}});
                         }));
  }
  role.link = std::make_unique<LocalLink>(io, *role.scheduler);
  return role;
}

// --health_port: a gRPC server with only the standard health service (grpc.health.v1), for
// probes (Kubernetes grpc probes, `gangrun health`). Service "" is SERVING while the launcher
// lives; kNodeService becomes SERVING once this node's workers of the current generation run.
constexpr char kNodeService[] = "gangrun.v1.Node";

class HealthService : public grpc::health::v1::Health::CallbackService {
 public:
  void Set(const std::string& service, bool serving) {
    std::lock_guard<std::mutex> lock(mu_);
    serving_[service] = serving;
  }
  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override {
    auto* reactor = context->DefaultReactor();
    std::lock_guard<std::mutex> lock(mu_);
    auto it = serving_.find(request->service());
    if (it == serving_.end()) {
      reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service"));
      return reactor;
    }
    response->set_status(it->second ? grpc::health::v1::HealthCheckResponse::SERVING
                                    : grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  std::mutex mu_;
  std::map<std::string, bool> serving_;
};

struct HealthServer {
  HealthService service;
  std::unique_ptr<grpc::Server> server;
};

absl::StatusOr<std::unique_ptr<HealthServer>> StartHealthServer(int port) {
  auto health = std::make_unique<HealthServer>();
  health->service.Set("", true);
  health->service.Set(kNodeService, false);
  grpc::ServerBuilder builder;
  // Ours instead of gRPC's default one (which this process may have enabled for its scheduler).
  builder.SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int bound = 0;
  builder.AddListeningPort("0.0.0.0:" + std::to_string(port), grpc::InsecureServerCredentials(),
                           &bound);
  builder.RegisterService(&health->service);
  health->server = builder.BuildAndStart();
  if (!health->server || bound == 0) {
    return absl::UnavailableError("--health_port: cannot listen on port " + std::to_string(port));
  }
  return health;
}

}  // namespace

scheduler::Scheduler::Options SchedulerOptionsFor(const Options& options) {
  scheduler::Scheduler::Options scheduler_options;
  scheduler_options.world_size = options.worker_num;
  scheduler_options.min_world_size = options.min_workers();
  scheduler_options.last_call = Seconds(options.last_call);
  scheduler_options.cluster_timeout =
      options.cluster_time_out < 0 ? common::Duration(-1) : Seconds(options.cluster_time_out);
  scheduler_options.node_timeout = Seconds(options.node_timeout);
  scheduler_options.max_restarts = options.max_restarts;
  scheduler_options.restart_backoff_initial = Seconds(options.restart_backoff_initial);
  scheduler_options.restart_backoff_cap = Seconds(options.restart_backoff_cap);
  scheduler_options.personality = PersonalityName(options.personality);
  return scheduler_options;
}

scheduler::KvLimits KvLimitsFor(const Options& options) {
  scheduler::KvLimits limits;
  limits.max_bytes = static_cast<uint64_t>(options.kv_max_bytes);
  limits.max_pending_waits = static_cast<size_t>(options.kv_max_waits);
  return limits;
}

absl::StatusOr<v1::JobOutcome> RunJob(const Options& options, const HostFacts& host_facts,
                                      const RunContext& context) {
  auto log = common::Logger("launcher");
  HostFacts facts = host_facts;
  ReadyNotifier ready(context.ready_fd);
  RETURN_IF_ERROR(MakeLogDir(facts.log_dir));
  RETURN_IF_ERROR(common::BecomeChildSubreaper());

  boost::asio::io_context io;
  common::AsioClock clock(io.get_executor());
  ASSIGN_OR_RETURN(auto keeper, node::KeeperClient::Start(io, {context.self_exe, "__keeper"}));
  ASSIGN_OR_RETURN(SchedulerRole role, MaybeHostScheduler(io, clock, options, facts));
  facts.is_master = role.scheduler != nullptr;  // only the hosting launcher runs MS_SCHED
  std::unique_ptr<node::GrpcSchedulerLink> remote;
  if (!role.scheduler) {
    ASSIGN_OR_RETURN(auto credentials, rpc::MakeChannelCredentials(options.access));
    node::GrpcSchedulerLink::Options link_options;
    link_options.target = JoinHostPort(facts.master_ip, facts.scheduler_port);
    link_options.token = facts.token;
    link_options.credentials = credentials;
    link_options.keepalive = Seconds(std::max(options.node_timeout / 2, 0.5));
    remote = std::make_unique<node::GrpcSchedulerLink>(io, link_options);
  }
  node::SchedulerLink& link = role.link ? static_cast<node::SchedulerLink&>(*role.link) : *remote;

  node::Node::Options node_options;
  node_options.node_name = facts.hostname;
  node_options.host_address = facts.local_ip;
  node_options.node_rank = Simulating(options) ? -1 : options.node_rank;
  node_options.local_worker_num = options.local_worker_num;
  node_options.world_size = Simulating(options) ? 0 : options.worker_num;
  node_options.min_world_size = Simulating(options) ? 0 : options.min_workers();
  node_options.run_id = options.run_id;
  node_options.personality = PersonalityName(options.personality);
  node_options.grace = Seconds(options.grace_period);
  node_options.log_dir = facts.log_dir;
  node_options.heartbeat_interval = Seconds(options.heartbeat_interval);
  if (options.cluster_time_out >= 0) {
    // A little longer than the scheduler's own timeout, whose message is the better one.
    node_options.formation_timeout = Seconds(options.cluster_time_out + 2.0);
  }
  auto port = common::PickFreePort(facts.local_ip, {options.master_port, facts.scheduler_port});
  if (!port.ok()) return port.status();
  node_options.free_port = *port;

  std::unique_ptr<HealthServer> health;
  if (options.health_port >= 0) {
    ASSIGN_OR_RETURN(health, StartHealthServer(options.health_port));
  }
  auto set_node_health = [&health](bool serving) {
    if (health) health->service.Set(kNodeService, serving);
  };
  common::ConsoleScope console(io);
  node::LogFollower follower(io, [](const std::string& lines) { common::Stdout().Write(lines); });
  std::optional<v1::JobOutcome> outcome;
  const bool msrun = options.personality == Personality::kMsrun;

  node::Node::Callbacks callbacks;
  callbacks.on_process_started = [&](const node::ProcessSpec& spec, pid_t pid) {
    if (spec.rank < 0) {
      log->info("MindSpore scheduler process started (pid {}), log {}", pid, spec.log_path);
      return;
    }
    if (msrun) {
      common::Stdout().Write("Start worker process with rank id:" + std::to_string(spec.rank) +
                             ", log file:" + spec.log_path + ". Environment variable [RANK_ID=" +
                             std::to_string(spec.rank) + "] is exported.\n");
    }
    log->info("rank {} started (pid {}), log {}", spec.rank, pid, spec.log_path);
    if (options.join && Tailed(options, spec.rank)) {
      std::string prefix = absl::StrReplaceAll(options.log_prefix,
                                               {{"{host}", facts.hostname},
                                                {"{rank}", std::to_string(spec.rank)},
                                                {"{local_rank}", std::to_string(spec.local_rank)}});
      follower.Follow(spec.log_path, prefix);
    }
  };
  callbacks.on_process_exited = [&](const node::ProcessSpec& spec, pid_t, common::ExitStatus) {
    follower.Finish(spec.log_path);
  };
  callbacks.on_generation_running = [&](uint64_t generation) {
    log->info("generation {}: all {} local process(es) running", generation,
              options.local_worker_num);
    ready.Notify(0);
    set_node_health(true);
  };
  // The last steps of the shutdown order: console drained, server stopped, loop stopped.
  auto stop_loop = [&] {
    follower.DrainAll();
    if (role.store) role.store->CancelAll();
    if (role.server) {
      role.server->ShutdownAsync(io, [&] { io.stop(); });
    } else {
      io.stop();
    }
  };
  callbacks.on_finished = [&](const v1::JobOutcome& result) {
    outcome = result;
    set_node_health(false);
    keeper->Shutdown(Seconds(options.grace_period), stop_loop);
  };
  node::Node node(
      *keeper, clock, link, node_options,
      [&](const v1::RankAssignment& assignment, uint64_t generation, int restart_count) {
        return PlanProcesses(options, facts, assignment, generation, restart_count);
      },
      std::move(callbacks));
  if (role.link) role.link->Connect(&node);

  keeper->SetLostHandler([&] {
    v1::JobOutcome lost;
    lost.set_kind(v1::JobOutcome::KIND_NODE_LOST);
    lost.set_message("the process keeper of " + facts.hostname + " died; its workers died with it");
    outcome = lost;
    // Its orphans were re-parented to us (we are a subreaper): finish them off.
    common::KillAndReapAllChildren(SIGKILL,
                                   std::chrono::steady_clock::now() + std::chrono::seconds(10));
    stop_loop();
  });

  boost::asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
  signals.add(SIGUSR1);
  signals.add(SIGUSR2);
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        if (sig == SIGUSR1 || sig == SIGUSR2) {
          log->info("forwarding {} to the workers", common::SignalName(sig));
          node.ForwardSignal(sig);
        } else {
          log->info("received {}: stopping the job", common::SignalName(sig));
          node.RequestStop(sig);
        }
        signals.async_wait(on_signal);
      };
  signals.async_wait(on_signal);

  if (role.scheduler) role.scheduler->Start();
  if (remote) {
    log->info("joining the scheduler at {}", JoinHostPort(facts.master_ip, facts.scheduler_port));
    remote->Connect([&](const v1::NodeCommand& command) { node.OnCommand(command); },
                    [&](const std::string& reason, bool unauthenticated) {
                      node.OnLinkLost(reason, unauthenticated);
                    });
  }
  node.Start();
  io.run();
  signals.cancel();
  remote.reset();  // ends the stream before the node goes away
  if (health) health->server->Shutdown(std::chrono::system_clock::now());

  if (log->should_log(spdlog::level::debug)) {
    log->debug("peak resident memory {} KiB", PeakResidentKiB());
  }
  if (!outcome) return absl::InternalError("the job ended without an outcome");
  if (outcome->kind() == v1::JobOutcome::KIND_SUCCEEDED) {
    log->info("job succeeded: all {} local worker(s) exited 0", options.local_worker_num);
    if (msrun) common::Stdout().Write("All workers successfully exit!\n");
    common::Stderr().Write(FormatOutcome(*outcome));  // its warnings, if any
  } else {
    std::string report = FormatOutcome(*outcome);
    if (msrun && !options.log_dir.empty()) {
      report += "Distributed job exited with exception. Please check logs in directory: " +
                options.log_dir + ".\n";
    }
    common::Stderr().Write(report);
    ready.Notify(ExitCode(*outcome));
  }
  return *outcome;
}

}  // namespace gangrun::launcher
