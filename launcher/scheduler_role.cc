#include "launcher/scheduler_role.h"

#include <cstdlib>

#include "common/env_names.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/status.h"
#include "launcher/launcher.h"
#include "rpc/credentials.h"
#include "rpc/session_auth.h"
#include "scheduler/status_page.h"

namespace gangrun::launcher {
namespace {

// The scheduler's gRPC server on its port; a single-host job takes any free port on loopback
// when its own is taken. Null (no error) when another launcher already serves the port.
absl::StatusOr<std::unique_ptr<scheduler::SchedulerServer>> StartServer(boost::asio::io_context& io,
                                                                        SchedulerRole& role,
                                                                        const Options& options,
                                                                        HostFacts& facts) {
  ASSIGN_OR_RETURN(auto credentials, rpc::MakeServerCredentials(options.access));
  scheduler::ServerOptions server_options{JoinHostPort(facts.scheduler_host, facts.scheduler_port),
                                          facts.token, credentials, facts.run_id};
  auto server = scheduler::SchedulerServer::Start(io, *role.scheduler, *role.store, server_options);
  if (!server.ok() && facts.single_host) {
    server_options.listen_address = JoinHostPort(facts.scheduler_host, 0);
    server = scheduler::SchedulerServer::Start(io, *role.scheduler, *role.store, server_options);
    if (server.ok()) {
      const std::string taken = JoinHostPort(facts.scheduler_host, (*server)->port());
      common::Logger("launcher")
          ->info(
              "port {} is taken; the scheduler listens on {} instead (gangrun status "
              "--master {})",
              facts.scheduler_port, taken, taken);
    }
  }
  // Two launchers starting at once: the other may have held the port for a moment (bound,
  // not yet listening) and given it up; a few tries tell that from a real failure.
  for (int attempt = 0; attempt < 3 && !server.ok() && !facts.single_host &&
                        common::PortIsFree(facts.scheduler_host, facts.scheduler_port);
       ++attempt) {
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
    // A scheduler's port answers gRPC's HTTP/2 preface with HTTP/2 (plaintext) or a TLS
    // alert or close (TLS); a port that answers another protocol is another program's.
    if (common::AnswersAnotherProtocol(server_options.listen_address, std::chrono::seconds(3))) {
      return absl::UnavailableError(
          "another program, not a gangrun scheduler, listens on " + server_options.listen_address +
          " (it does not answer gRPC): --master_port " + std::to_string(options.master_port) +
          " is taken on this host; give every launcher of the job another one");
    }
    common::Logger("launcher")
        ->info("a scheduler already listens on {}; joining it as a node",
               server_options.listen_address);
    return std::unique_ptr<scheduler::SchedulerServer>();
  }
  facts.scheduler_port = (*server)->port();
  return std::move(*server);
}

absl::StatusOr<SchedulerRole> BuildRole(common::Clock& clock, const Options& options,
                                        const HostFacts& facts,
                                        scheduler::Scheduler::Options scheduler_options) {
  SchedulerRole role;
  role.scheduler = std::make_unique<scheduler::Scheduler>(clock, std::move(scheduler_options));
  if (!options.event_log.empty()) {
    ASSIGN_OR_RETURN(role.event_log, scheduler::EventLog::Open(options.event_log));
  }
  role.telemetry = std::make_unique<scheduler::Telemetry>(
      facts.job_label.empty() ? facts.run_id : facts.job_label, role.event_log.get());
  role.scheduler->SetTelemetry(role.telemetry.get());
  role.store = std::make_unique<scheduler::KvStore>(clock, KvLimitsFor(options));
  return role;
}

// The metrics and the status page on --metrics_host (default: where the scheduler listens,
// so a job on loopback shows them to this host only), asking for the page secret when the job
// has a token.
absl::Status StartMetrics(boost::asio::io_context& io, const Options& options,
                          const HostFacts& facts, const std::string& scheduler_host,
                          SchedulerRole& role) {
  if (options.metrics_port < 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(
      role.metrics,
      scheduler::MetricsServer::Start(
          io, options.metrics_host.empty() ? scheduler_host : options.metrics_host,
          options.metrics_port, rpc::PageSecret(facts.token),
          [&scheduler = *role.scheduler, &telemetry = *role.telemetry, &store = *role.store] {
            return scheduler::RenderMetrics({{&scheduler, &telemetry, &store}});
          },
          [&scheduler = *role.scheduler, &telemetry = *role.telemetry] {
            return scheduler::JobStatusJson(scheduler, telemetry);
          }));
  return absl::OkStatus();
}

// The job's torch store (--agent_store True) where the scheduler listens, on a free port.
absl::Status StartTorchStore(boost::asio::io_context& io, common::Clock& clock,
                             const Options& options, const std::string& listen_host,
                             SchedulerRole& role) {
  if (!options.agent_store) return absl::OkStatus();
  scheduler::TorchStore::Options torch{listen_host};
  torch.report_waits_after = common::DurationOf(options.store_wait_report);
  ASSIGN_OR_RETURN(role.torch_store,
                   scheduler::TorchStore::Start(io, clock, *role.store, std::move(torch)));
  role.scheduler->SetTorchStore(role.torch_store.get());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SchedulerRole> MaybeHostScheduler(boost::asio::io_context& io, common::Clock& clock,
                                                 const Options& options, HostFacts& facts) {
  const bool simulating = Simulating(options);
  if (!facts.is_master && !simulating) return SchedulerRole{};
  if (std::getenv(env::kNodeOnly) != nullptr) return SchedulerRole{};  // a daemon's job
  ASSIGN_OR_RETURN(scheduler::Scheduler::Options scheduler_options, SchedulerOptionsFor(options));
  scheduler_options.run_id = facts.run_id;
  if (simulating) {
    scheduler_options.world_size = options.local_worker_num;
    scheduler_options.min_world_size = options.local_worker_num;
  }
  ASSIGN_OR_RETURN(SchedulerRole role,
                   BuildRole(clock, options, facts, std::move(scheduler_options)));
  if (!simulating) {
    ASSIGN_OR_RETURN(role.server, StartServer(io, role, options, facts));
    if (!role.server) return SchedulerRole{};  // another launcher hosts it: join that one
    RETURN_IF_ERROR(StartTorchStore(io, clock, options, facts.scheduler_host, role));
  }
  if (!simulating) RETURN_IF_ERROR(StartMetrics(io, options, facts, facts.scheduler_host, role));
  role.link = std::make_unique<LocalLink>(io, *role.scheduler);
  return role;
}

absl::StatusOr<SchedulerRole> HostSchedulerAt(boost::asio::io_context& io, common::Clock& clock,
                                              const Options& options, const HostFacts& facts,
                                              scheduler::Scheduler::Options scheduler_options,
                                              const std::string& listen_address) {
  scheduler_options.run_id = facts.run_id;
  ASSIGN_OR_RETURN(SchedulerRole role,
                   BuildRole(clock, options, facts, std::move(scheduler_options)));
  ASSIGN_OR_RETURN(auto credentials, rpc::MakeServerCredentials(options.access));
  scheduler::ServerOptions server_options{listen_address, facts.token, credentials, facts.run_id};
  ASSIGN_OR_RETURN(role.server, scheduler::SchedulerServer::Start(io, *role.scheduler, *role.store,
                                                                  server_options));
  auto listen = common::ParseHostPort(listen_address, "the scheduler's address", true);
  if (listen.ok()) RETURN_IF_ERROR(StartTorchStore(io, clock, options, listen->host, role));
  // The pages on the scheduler's own address, not every address a store coordinator listens
  // on (README "Addresses").
  const bool everywhere = !listen.ok() || listen->host == "0.0.0.0" || listen->host == "::";
  const std::string listen_host = everywhere ? facts.local_ip : listen->host;
  if (absl::Status metrics = StartMetrics(io, options, facts, listen_host, role); !metrics.ok()) {
    // A scheduler that took a job over must not fail for its metrics (the port may be the
    // lost host's, on a shared host): the job matters more.
    common::Logger("launcher")->warn("{}", std::string(metrics.message()));
  }
  return role;
}

absl::StatusOr<scheduler::Scheduler::Options> SchedulerOptionsFor(const Options& options) {
  scheduler::Scheduler::Options scheduler_options;
  scheduler_options.world_size = options.worker_num;
  scheduler_options.min_world_size = options.min_workers();
  scheduler_options.last_call = common::DurationOf(options.last_call);
  scheduler_options.cluster_timeout = options.cluster_time_out < 0
                                          ? common::Duration(-1)
                                          : common::DurationOf(options.cluster_time_out);
  scheduler_options.node_timeout = common::DurationOf(options.node_timeout);
  scheduler_options.heartbeat_interval = common::DurationOf(options.heartbeat_interval);
  scheduler_options.max_restarts = options.max_restarts;
  scheduler_options.restart_backoff_initial = common::DurationOf(options.restart_backoff_initial);
  scheduler_options.restart_backoff_cap = common::DurationOf(options.restart_backoff_cap);
  scheduler_options.personality = PersonalityName(options.personality);
  v1::ProgressRules& rules = scheduler_options.progress_rules;
  rules.set_hang_timeout_seconds(options.hang_timeout);
  rules.set_learn(options.hang_timeout_auto);
  rules.set_initial_timeout_seconds(options.hang_timeout_initial);
  for (const auto& [name, seconds] : options.section_timeouts) {
    (*rules.mutable_section_timeout_seconds())[name] = seconds;
  }
  rules.set_stack_timeout_seconds(options.stack_timeout);
  rules.set_python_stacks(options.progress_hook);
  scheduler_options.straggler_factor = options.straggler_factor;
  scheduler_options.spare_nodes = options.spare_nodes;
  scheduler_options.rejoin_window = common::DurationOf(options.rejoin_window);
  scheduler_options.agent_store = options.agent_store;
  scheduler_options.store_wait_report = common::DurationOf(options.store_wait_report);
  scheduler_options.recovery.no_restart_exit_codes = options.no_restart_exit_codes;
  scheduler_options.recovery.exclude_after = options.exclude_after;
  scheduler_options.recovery.max_no_progress_restarts = options.max_no_progress_restarts;
  scheduler_options.recovery.max_same_failures = options.max_same_failures;
  ASSIGN_OR_RETURN(scheduler::RestartRules restart_rules,
                   scheduler::RestartRules::Load(options.restart_rules));
  scheduler_options.recovery.rules =
      std::make_shared<const scheduler::RestartRules>(std::move(restart_rules));
  scheduler_options.signals_to_forward = options.signals_to_forward;
  scheduler_options.time_limit = common::DurationOf(options.time_limit);
  scheduler_options.time_limit_signal = options.time_limit_signal;
  scheduler_options.time_limit_signal_before = common::DurationOf(options.time_limit_signal_before);
  return scheduler_options;
}

scheduler::KvLimits KvLimitsFor(const Options& options) {
  scheduler::KvLimits limits;
  limits.max_bytes = static_cast<uint64_t>(options.kv_max_bytes);
  limits.max_pending_waits = static_cast<size_t>(options.kv_max_waits);
  return limits;
}

}  // namespace gangrun::launcher
