#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstdio>
#include <thread>

#include "agent/agent.h"
#include "cli/client.h"
#include "cli/daemon_command.h"
#include "common/clock.h"
#include "common/descendants.h"
#include "common/exit_status.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/service.h"
#include "common/status.h"
#include "launcher/launcher.h"
#include "rpc/credentials.h"
#include "scheduler/daemon.h"
#include "scheduler/metrics.h"

namespace gangrun::launcher {
namespace {

// Options a daemon shares with the launcher: access, metrics, event log.
struct ServiceOptions {
  rpc::Access access;
  int metrics_port = -1;
  std::string event_log;
};

void AddServiceOptions(CLI::App& app, ServiceOptions& o, bool server) {
  app.add_option("--token", o.access.token, "shared secret")->envname("GANGRUN_TOKEN");
  app.add_option("--token_file", o.access.token_file, "file holding the shared secret")
      ->envname("GANGRUN_TOKEN_FILE");
  app.add_option("--tls_cert", o.access.tls_cert, "TLS certificate (PEM)")
      ->envname("GANGRUN_TLS_CERT");
  app.add_option("--tls_key", o.access.tls_key, "TLS private key (PEM)")
      ->envname("GANGRUN_TLS_KEY");
  app.add_option("--tls_ca", o.access.tls_ca, "TLS CA bundle (PEM)")->envname("GANGRUN_TLS_CA");
  if (!server) return;
  app.add_option("--metrics_port", o.metrics_port,
                 "serve Prometheus metrics on http://0.0.0.0:PORT/metrics (-1: off)")
      ->envname("GANGRUN_METRICS_PORT");
  app.add_option("--event_log", o.event_log, "append a JSON line per event to this file")
      ->envname("GANGRUN_EVENT_LOG");
}

int Fail(const std::string& command, const std::string& message, int code = 2) {
  std::fprintf(stderr, "gangrun %s: %s\n", command.c_str(), message.c_str());
  return code;
}

// The settings of a submitted job: its launcher options, parsed and checked as a launcher
// would (what depends on the agents' hosts is checked there).
absl::StatusOr<scheduler::Daemon::JobConfig> ConfigureJob(const v1::SubmitJob& job) {
  std::vector<std::string> args(job.options().begin(), job.options().end());
  args.push_back("--worker_num");
  args.push_back(std::to_string(job.worker_num()));
  args.push_back("--local_worker_num");
  args.push_back(std::to_string(job.local_worker_num() > 0 ? job.local_worker_num() : 1));
  if (!job.task().empty()) args.push_back(job.task(0));
  auto parsed = ParseCommandLine(Personality::kGangrun, args,
                                 [](const std::string&) { return std::optional<std::string>(); });
  if (!parsed.ok()) return parsed.status();
  RETURN_IF_ERROR(ValidateValues(parsed->options));
  scheduler::Daemon::JobConfig config;
  config.scheduler = SchedulerOptionsFor(parsed->options);
  config.kv = KvLimitsFor(parsed->options);
  return config;
}

}  // namespace

int RunSchedulerCommand(const std::vector<std::string>& args, const EnvLookup& env) {
  CLI::App app{"gangrun scheduler: a long-lived scheduler that runs submitted jobs on agents",
               "gangrun scheduler"};
  std::string listen = "0.0.0.0:8118";
  app.add_option("--listen", listen, "ADDR:PORT to listen on (default 0.0.0.0:8118)")
      ->envname("GANGRUN_LISTEN");
  ServiceOptions service;
  AddServiceOptions(app, service, true);
  bool insecure = false;
  app.add_flag("--insecure", insecure,
               "serve a non-loopback address without a token or client certificates: anyone "
               "who reaches the port can then run commands on every agent")
      ->envname("GANGRUN_INSECURE");
  if (auto code = ParseClientArgs(app, "scheduler", args)) return *code;
  auto address = common::ParseHostPort(listen, "--listen", /*allow_zero_port=*/true);
  if (!address.ok()) return Fail("scheduler", std::string(address.status().message()));
  const std::string host = address->host;
  const int port = address->port;
  auto token = rpc::ResolveToken(service.access);
  if (!token.ok()) return Fail("scheduler", std::string(token.status().message()));
  service.access.token = *token;
  if (absl::Status tls = rpc::CheckTlsFiles(service.access); !tls.ok()) {
    return Fail("scheduler", std::string(tls.message()));
  }
  const bool authenticated = !service.access.token.empty() || !service.access.tls_ca.empty();
  if (!common::IsLoopbackHost(host) && !authenticated && !insecure) {
    return Fail("scheduler",
                "refusing to listen on " + listen +
                    " without authentication: anyone who can reach it could run commands on "
                    "every agent. Give a --token_file (or GANGRUN_TOKEN), or client-certificate "
                    "TLS (--tls_cert, --tls_key, --tls_ca), or listen on 127.0.0.1; --insecure "
                    "serves it anyway");
  }
  if (!authenticated) {
    common::Logger("daemon")->warn("serving {} without a token or client certificates", listen);
  }
  auto credentials = rpc::MakeServerCredentials(service.access);
  if (!credentials.ok()) return Fail("scheduler", std::string(credentials.status().message()));
  if (service.metrics_port < -1 || service.metrics_port > 65535) {
    return Fail("scheduler", "--metrics_port must be -1 (off), 0 (any free port) or 1..65535");
  }
  std::unique_ptr<scheduler::EventLog> event_log;
  if (!service.event_log.empty()) {
    auto opened = scheduler::EventLog::Open(service.event_log);
    if (!opened.ok()) return Fail("scheduler", std::string(opened.status().message()));
    event_log = std::move(*opened);
  }

  boost::asio::io_context io;
  common::AsioClock clock(io.get_executor());
  scheduler::Daemon::Options daemon_options{host, service.access.token, *credentials,
                                            event_log.get()};
  scheduler::Daemon daemon(io, clock, daemon_options, ConfigureJob);
  auto server = scheduler::DaemonServer::Start(io, daemon, JoinHostPort(host, port),
                                               service.access.token, *credentials);
  if (!server.ok()) return Fail("scheduler", std::string(server.status().message()), 3);
  std::unique_ptr<scheduler::MetricsServer> metrics;
  if (service.metrics_port >= 0) {
    auto started = scheduler::MetricsServer::Start(io, "0.0.0.0", service.metrics_port,
                                                   [&daemon] { return daemon.Metrics(); });
    if (!started.ok()) return Fail("scheduler", std::string(started.status().message()), 3);
    metrics = std::move(*started);
  }
  auto log = common::Logger("daemon");
  log->info("listening on {} (port {}); waiting for agents and jobs", JoinHostPort(host, port),
            (*server)->port());
  common::SdNotify("READY=1\nSTATUS=listening on port " + std::to_string((*server)->port()));
  common::Watchdog watchdog(clock);

  int exit_signal = 0;
  boost::asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        if (exit_signal != 0) {
          log->warn("second {}: leaving now", common::SignalName(sig));
          io.stop();
          return;
        }
        exit_signal = sig;
        log->info("received {}: stopping every job, then exiting", common::SignalName(sig));
        common::SdNotify("STOPPING=1");
        daemon.Shutdown([&] { (*server)->ShutdownAsync(io, [&] { io.stop(); }); });
        signals.async_wait(on_signal);
      };
  signals.async_wait(on_signal);
  io.run();
  return 0;
}

int RunAgentCommand(const std::vector<std::string>& args, const EnvLookup& env,
                    const std::string& self_exe) {
  CLI::App app{"gangrun agent: a long-lived per-host agent that runs the jobs placed on it",
               "gangrun agent"};
  std::string master;
  agent::Agent::Options options;
  options.slots = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  options.log_root = "gangrun-logs";
  app.add_option("--master", master, "the daemon, HOST:PORT")
      ->envname("GANGRUN_MASTER")
      ->required();
  app.add_option("--slots", options.slots, "workers this host runs at once (default: CPUs)")
      ->envname("GANGRUN_SLOTS");
  app.add_option("--name", options.name, "name of this agent (default: hostname)")
      ->envname("GANGRUN_AGENT_NAME");
  app.add_option("--log_root", options.log_root,
                 "jobs log to LOG_ROOT/<job id> unless they give --log_dir (default gangrun-logs)")
      ->envname("GANGRUN_LOG_ROOT");
  ServiceOptions service;
  AddServiceOptions(app, service, false);
  if (auto code = ParseClientArgs(app, "agent", args)) return *code;
  auto daemon_address = common::ParseHostPort(master, "--master");
  if (!daemon_address.ok()) return Fail("agent", std::string(daemon_address.status().message()));
  options.master_host = daemon_address->host;
  if (options.slots < 1) return Fail("agent", "--slots must be at least 1");
  auto token = rpc::ResolveToken(service.access);
  if (!token.ok()) return Fail("agent", std::string(token.status().message()));
  service.access.token = *token;
  auto credentials = rpc::MakeChannelCredentials(service.access);
  if (!credentials.ok()) return Fail("agent", std::string(credentials.status().message()));
  options.master = master;
  options.token = service.access.token;
  options.credentials = *credentials;
  options.self_exe = self_exe;
  if (options.name.empty()) options.name = common::Hostname();
  if (options.address.empty()) {
    auto resolved = common::ResolveHost(options.master_host);
    if (!resolved.ok())
      return Fail("agent", "--master: " + std::string(resolved.status().message()));
    auto local = common::LocalAddressToward(resolved->front());
    options.address = local.ok() ? *local : "";
  }
  // The launchers' token: they join each job's port with the daemon's token.
  if (!options.token.empty()) setenv("GANGRUN_TOKEN", options.token.c_str(), 1);
  if (absl::Status status = common::BecomeChildSubreaper(); !status.ok()) {
    return Fail("agent", std::string(status.message()), 1);
  }

  boost::asio::io_context io;
  common::AsioClock clock(io.get_executor());
  auto log = common::Logger("agent");
  int exit_code = 0;
  bool notified = false;
  agent::Agent::Callbacks callbacks;
  callbacks.on_registered = [&] {
    if (notified) return;
    notified = true;
    common::SdNotify("READY=1\nSTATUS=registered with " + master);
  };
  agent::Agent* agent_ptr = nullptr;
  callbacks.on_fatal = [&](const std::string& why) {
    log->error("{}", why);
    exit_code = 3;
    agent_ptr->Stop(SIGTERM, [&] { io.stop(); });
  };
  agent::Agent agent(io, clock, options, std::move(callbacks));
  agent_ptr = &agent;
  common::Watchdog watchdog(clock);
  boost::asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        log->info("received {}: stopping the jobs running here, then exiting",
                  common::SignalName(sig));
        common::SdNotify("STOPPING=1");
        agent.Stop(SIGTERM, [&] { io.stop(); });
        signals.async_wait(on_signal);
      };
  signals.async_wait(on_signal);
  log->info("registering with the daemon at {} ({} slot(s), logs under {})", master, options.slots,
            options.log_root);
  agent.Start();
  io.run();
  // Whatever our launchers left behind (we are their subreaper) goes with us.
  common::KillAndReapAllChildren(SIGKILL,
                                 std::chrono::steady_clock::now() + std::chrono::seconds(10));
  return exit_code;
}

}  // namespace gangrun::launcher
