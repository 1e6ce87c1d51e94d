// gangrun scheduler: the daemon (the command keeps its name). Keeps a registry of agents and
// runs the jobs submitted to it on their slots (daemon/daemon.h), until SIGINT/SIGTERM/SIGHUP
// stops every job and it.

#include "daemon/daemon.h"

#include <unistd.h>

#include <boost/asio/io_context.hpp>

#include "cli/client.h"
#include "cli/command.h"
#include "cli/service.h"
#include "common/clock.h"
#include "common/env_names.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/service.h"
#include "common/status.h"
#include "daemon/checks.h"
#include "proto/conversions.h"
#include "rpc/session_auth.h"
#include "scheduler/metrics.h"

namespace gangrun::cli {
namespace {

// The access checks of a daemon's port: nobody serves the network unauthenticated unless told.
absl::Status CheckDoor(const std::string& listen, const std::string& host,
                       const rpc::Access& access, bool insecure) {
  RETURN_IF_ERROR(rpc::CheckTlsFiles(access));
  const bool authenticated = !access.token.empty() || !access.tls_ca.empty();
  if (!common::IsLoopbackHost(host) && !authenticated && !insecure) {
    return absl::InvalidArgumentError(
        "refusing to listen on " + listen +
        " without authentication: anyone who can reach it could run commands on every agent. "
        "Give a --token_file (or GANGRUN_TOKEN), or client-certificate TLS (--tls_cert, "
        "--tls_key, --tls_ca), or listen on 127.0.0.1; --insecure serves it anyway");
  }
  if (!authenticated) {
    common::Logger("daemon")->warn("serving {} without a token or client certificates", listen);
  }
  return absl::OkStatus();
}

struct DaemonSetup {
  common::HostPort address;
  store::StoreConfig store;  // url empty: no store
  ServiceOptions service;
  std::shared_ptr<grpc::ServerCredentials> credentials;
  std::unique_ptr<scheduler::EventLog> event_log;
  int64_t history_count = 1000;  // daemon::Daemon::Options' history bounds
  double history_days = 30;
  daemon::AgentStandings::Options standing;  // and its agents' standing
  double probe_interval = 300;
};

absl::StatusOr<DaemonSetup> Prepare(const std::string& listen, ServiceOptions service,
                                    bool insecure, const StoreLookup& store) {
  DaemonSetup setup;
  if (!store.url.empty()) {
    ASSIGN_OR_RETURN(setup.store,
                     store::ParseStoreUrl(store.url, store.cacert, store.cert, store.key));
  } else if (!store.cacert.empty() || !store.cert.empty() || !store.key.empty()) {
    return absl::InvalidArgumentError(
        "--store_cacert, --store_cert and --store_key need a --store");
  }
  ASSIGN_OR_RETURN(setup.address,
                   common::ParseHostPort(listen, "--listen", /*allow_zero_port=*/true));
  ASSIGN_OR_RETURN(service.access.token, rpc::ResolveToken(service.access));
  rpc::WarnIfWeakToken(service.access.token);
  RETURN_IF_ERROR(CheckDoor(listen, setup.address.host, service.access, insecure));
  ASSIGN_OR_RETURN(setup.credentials, rpc::MakeServerCredentials(service.access));
  if (!service.event_log.empty()) {
    ASSIGN_OR_RETURN(setup.event_log, scheduler::EventLog::Open(service.event_log));
  }
  setup.service = std::move(service);
  return setup;
}

// The address a daemon listening on a wildcard names in the store.
std::string AdvertisedAddress(const store::StoreConfig& store) {
  if (!store.endpoints.empty()) {
    auto endpoint = common::ParseHostPort(store.endpoints.front(), "--store");
    auto resolved = endpoint.ok() ? common::ResolveHost(endpoint->host)
                                  : absl::StatusOr<std::vector<std::string>>(endpoint.status());
    if (resolved.ok()) {
      auto local = common::LocalAddressToward(resolved->front());
      if (local.ok()) return *local;
    }
  }
  auto interfaces = common::InterfaceAddresses();
  return interfaces.empty() ? common::Hostname() : interfaces.front();
}

absl::Status Serve(DaemonSetup& setup) {
  boost::asio::io_context io;
  common::AsioClock clock(io.get_executor());
  const std::string& token = setup.service.access.token;
  daemon::Daemon::Options options;
  options.listen_host = setup.address.host;
  options.token = token;
  options.credentials = setup.credentials;
  options.event_log = setup.event_log.get();
  options.history_count = setup.history_count;
  options.history_days = setup.history_days;
  options.standing = setup.standing;
  options.probe_interval = setup.probe_interval;
  // Where others reach this daemon's ports (the store names them): the listen host, unless
  // it is a wildcard; then the address its connection to the store uses (what every host of
  // the cluster reaches), else this host's first interface address.
  options.advertise_host = setup.address.host;
  if (options.advertise_host == "0.0.0.0" || options.advertise_host == "::") {
    options.advertise_host = AdvertisedAddress(setup.store);
  }
  std::unique_ptr<daemon::StoreLink> store;
  if (!setup.store.url.empty()) {
    ASSIGN_OR_RETURN(store, daemon::StoreLink::Open(io, clock, setup.store));
    options.store = store.get();
    options.store_url = setup.store.url;
    options.store_cacert = setup.store.cacert;
    options.store_cert = setup.store.cert;
    options.store_key = setup.store.key;
  }
  daemon::Daemon daemon(io, clock, options, daemon::ConfigureSubmittedJob);
  auto server =
      daemon::DaemonServer::Start(io, daemon, setup.address.ToString(), token, setup.credentials);
  if (!server.ok()) return server.status();
  if (store) {
    store::SchedulerInfo me;
    me.host = common::Hostname();
    me.address = common::JoinHostPort(options.advertise_host, (*server)->port());
    me.pid = getpid();
    store->Start(me,
                 {[&daemon](std::vector<nlohmann::json> jobs, std::vector<nlohmann::json> agents) {
                   daemon.BecomeActive(std::move(jobs), std::move(agents));
                 }});
  }
  std::unique_ptr<scheduler::MetricsServer> metrics;
  if (setup.service.metrics_port >= 0) {
    ASSIGN_OR_RETURN(
        metrics,
        scheduler::MetricsServer::Start(
            io,
            setup.service.metrics_host.empty() ? setup.address.host : setup.service.metrics_host,
            setup.service.metrics_port, rpc::PageSecret(setup.service.access.token),
            [&] { return daemon.Metrics(); }, [&] { return proto::ToJson(daemon.Status()); }));
  }
  common::Logger("daemon")->info("listening on {} (port {}); waiting for agents and jobs",
                                 setup.address.ToString(), (*server)->port());
  common::SdNotify("READY=1\nSTATUS=listening on port " + std::to_string((*server)->port()));
  common::Watchdog watchdog(clock);
  RunUntilStopped(
      io, "daemon", "stopping every job, then exiting",
      [&] { daemon.Shutdown([&] { (*server)->ShutdownAsync(io, [&] { io.stop(); }); }); },
      /*repeat_stop=*/false);
  return absl::OkStatus();
}

}  // namespace

CommandResult RunScheduler(const CommandArgs& command) {
  CLI::App app{"gangrun scheduler: a long-lived scheduler that runs submitted jobs on agents",
               "gangrun scheduler"};
  std::string listen = "0.0.0.0:8118";
  app.add_option("--listen", listen, "ADDR:PORT to listen on (default 0.0.0.0:8118)")
      ->envname(env::kListen);
  ServiceOptions service;
  AddServiceOptions(app, service, true);
  bool insecure = false;
  app.add_flag("--insecure", insecure,
               "serve a non-loopback address without a token or client certificates: anyone "
               "who reaches the port can then run commands on every agent")
      ->envname(env::kInsecure);
  StoreLookup store;
  app.add_option("--store", store.url,
                 "etcd://HOST:PORT[,...][/PREFIX]: several daemons on one store, one active; "
                 "the others stand by and adopt its jobs when it is lost")
      ->envname("GANGRUN_STORE");
  app.add_option("--store_cacert", store.cacert, "CA bundle for the store (TLS)");
  app.add_option("--store_cert", store.cert, "client certificate for the store");
  app.add_option("--store_key", store.key, "its key");
  int64_t history_count = 1000;
  app.add_option("--history_count", history_count,
                 "finished jobs whose records the store keeps, newest first (default 1000)")
      ->check(CLI::Range(int64_t{1}, daemon::Daemon::Options::kMaxHistoryCount));
  double history_days = 30;
  app.add_option("--history_days", history_days,
                 "days a finished job's record stays in the store (default 30; 0: no age "
                 "bound)")
      ->check(CLI::Range(0.0, 36500.0));
  // Agents' standing (README "Agents' standing").
  daemon::AgentStandings::Options standing;
  app.add_option("--quarantine_after", standing.quarantine_after,
                 "failures attributed to an agent (its node lost or excluded) within "
                 "--quarantine_window that keep jobs off it until its health check passes or "
                 "gangrun undrain (default 3; 0: never)")
      ->check(CLI::Range(0, static_cast<int>(daemon::AgentStandings::kMaxFailures)))
      ->envname(env::kQuarantineAfter);
  app.add_option("--quarantine_window", standing.window_seconds,
                 "seconds within which those failures count (default 86400)")
      ->check(CLI::Range(1.0, 31536000.0))
      ->envname(env::kQuarantineWindow);
  double probe_interval = 300;
  app.add_option("--probe_interval", probe_interval,
                 "seconds between probes of a quarantined agent that has a --health_check "
                 "(default 300)")
      ->check(CLI::Range(0.1, 86400.0))
      ->envname(env::kProbeInterval);
  if (auto done = ParseArgs(app, "scheduler", command.args)) return *done;
  auto setup = Prepare(listen, std::move(service), insecure, store);
  if (!setup.ok()) return setup.status();
  setup->history_count = history_count;
  setup->history_days = history_days;
  setup->standing = standing;
  setup->probe_interval = probe_interval;
  return Serve(*setup);
}

}  // namespace gangrun::cli
