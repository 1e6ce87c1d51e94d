// gangrun agent: registers with a daemon and runs the jobs it places here, one launcher each
// (agent/agent.h), until SIGINT/SIGTERM/SIGHUP stops them and it.

#include "agent/agent.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <csignal>
#include <thread>

#include "absl/strings/str_split.h"
#include "cli/client.h"
#include "cli/command.h"
#include "cli/service.h"
#include "common/clock.h"
#include "common/descendants.h"
#include "common/env_names.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/service.h"
#include "common/status.h"
#include "daemon/checks.h"

namespace gangrun::cli {
namespace {

// The user --run_as names: its ids, groups and home, or why it cannot be.
absl::StatusOr<agent::Agent::Options::RunAs> ResolveRunAs(const std::string& name) {
  std::vector<char> buffer(16384);
  passwd entry;
  passwd* found = nullptr;
  if (getpwnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr) {
    return absl::InvalidArgumentError("--run_as: no user '" + name + "' on this host");
  }
  agent::Agent::Options::RunAs run_as;
  run_as.name = name;
  run_as.home = found->pw_dir;
  run_as.credentials.uid = found->pw_uid;
  run_as.credentials.gid = found->pw_gid;
  int count = 64;
  std::vector<gid_t> groups(static_cast<size_t>(count));
  if (getgrouplist(name.c_str(), found->pw_gid, groups.data(), &count) < 0) {
    groups.resize(static_cast<size_t>(count));
    getgrouplist(name.c_str(), found->pw_gid, groups.data(), &count);
  }
  groups.resize(static_cast<size_t>(std::max(count, 0)));
  run_as.credentials.groups = std::move(groups);
  if (geteuid() != 0 && found->pw_uid != geteuid()) {
    return absl::InvalidArgumentError("--run_as " + name +
                                      ": the agent must run as root to run jobs as another user");
  }
  return run_as;
}

// The agent's options once its flags are parsed: the daemon's address resolved, the token
// read, this host's name and address filled in.
absl::Status Complete(agent::Agent::Options& options, const std::string& master,
                      ServiceOptions& service, const std::string& self_exe) {
  // Several daemons on one store: HOST:PORT,HOST:PORT... (the agent follows the active one).
  common::HostPort daemon;
  for (absl::string_view one : absl::StrSplit(master, ',')) {
    ASSIGN_OR_RETURN(common::HostPort parsed, common::ParseHostPort(std::string(one), "--master"));
    if (daemon.host.empty()) daemon = parsed;
  }
  options.master = master;
  options.master_host = daemon.host;
  ASSIGN_OR_RETURN(options.token, rpc::ResolveToken(service.access));
  service.access.token = options.token;
  ASSIGN_OR_RETURN(options.credentials, rpc::MakeChannelCredentials(service.access));
  options.self_exe = self_exe;
  if (options.name.empty()) options.name = common::Hostname();
  if (options.address.empty()) {
    auto resolved = common::ResolveHost(options.master_host);
    if (!resolved.ok()) {
      return absl::InvalidArgumentError("--master: " + std::string(resolved.status().message()));
    }
    auto local = common::LocalAddressToward(resolved->front());
    options.address = local.ok() ? *local : "";
  }
  return absl::OkStatus();
}

absl::Status Serve(const agent::Agent::Options& options) {
  // Launchers join each job's port with the daemon's token.
  if (!options.token.empty()) setenv(env::kToken, options.token.c_str(), 1);
  RETURN_IF_ERROR(common::BecomeChildSubreaper());
  boost::asio::io_context io;
  common::AsioClock clock(io.get_executor());
  absl::Status result = absl::OkStatus();
  bool notified = false;
  agent::Agent::Callbacks callbacks;
  callbacks.on_registered = [&] {
    if (std::exchange(notified, true)) return;
    common::SdNotify("READY=1\nSTATUS=registered with " + options.master);
  };
  agent::Agent* agent_ptr = nullptr;
  callbacks.on_fatal = [&](const std::string& why) {
    result = absl::UnavailableError(why);
    agent_ptr->Stop(SIGTERM, [&] { io.stop(); });
  };
  agent::Agent agent(io, clock, options, std::move(callbacks));
  agent_ptr = &agent;
  common::Watchdog watchdog(clock);
  common::Logger("agent")->info(
      "registering with the daemon at {} ({} slot(s), logs under {}); jobs run as {}",
      options.master, options.slots, options.log_root,
      options.run_as
          ? options.run_as->name + " (uid " + std::to_string(options.run_as->credentials.uid) + ")"
          : "this agent's user (uid " + std::to_string(geteuid()) + ")");
  agent.Start();
  RunUntilStopped(
      io, "agent", "stopping the jobs running here, then exiting",
      [&] { agent.Stop(SIGTERM, [&] { io.stop(); }); }, /*repeat_stop=*/true);
  // Whatever our launchers left behind (we are their subreaper) goes with us.
  common::KillAndReapAllChildren(SIGKILL,
                                 std::chrono::steady_clock::now() + std::chrono::seconds(10));
  return result;
}

}  // namespace

CommandResult RunAgent(const CommandArgs& command) {
  CLI::App app{"gangrun agent: a long-lived per-host agent that runs the jobs placed on it",
               "gangrun agent"};
  std::string master;
  agent::Agent::Options options;
  options.slots = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  options.log_root = "gangrun-logs";
  app.add_option("--master", master, MasterHelp())->envname(env::kMaster)->required();
  app.add_option("--slots", options.slots, "workers this host runs at once (default: CPUs)")
      ->envname(env::kSlots);
  app.add_option("--name", options.name, "name of this agent (default: hostname)")
      ->envname(env::kAgentName);
  std::string run_as;
  app.add_option("--run_as", run_as,
                 "the user the jobs run as (the agent must be root); default: the agent's user")
      ->envname(env::kRunAs);
  app.add_option("--log_root", options.log_root,
                 "jobs log to LOG_ROOT/<job id> unless they give --log_dir (default gangrun-logs)")
      ->envname(env::kLogRoot);
  app.add_option("--log_retention_days", options.log_retention_days,
                 "remove a job's LOG_ROOT/<job id> this many days after it was last written "
                 "(default 0: keep every log; needs an absolute --log_root)")
      ->check(CLI::Range(0.0, 36500.0));
  app.add_option("--topology_domain", options.topology_domain,
                 "NAME: this host's segment or NVLink domain, for its jobs' launchers: a lost "
                 "node's place goes to a spare of its domain first ('' = none)")
      ->envname(env::kAgentTopologyDomain);
  app.add_option("--health_check", options.health_check,
                 "a shell command this host passes when healthy: a quarantined agent is placed "
                 "again once it exits 0 (the daemon probes every --probe_interval)")
      ->envname(env::kAgentHealthCheck);
  double health_check_timeout = 60;
  app.add_option("--health_check_timeout", health_check_timeout,
                 "seconds the health check may run (default 60)")
      ->check(CLI::Range(0.1, 86400.0));
  ServiceOptions service;
  AddServiceOptions(app, service, false);
  if (auto done = ParseArgs(app, "agent", command.args)) return *done;
  options.health_check_timeout = common::DurationOf(health_check_timeout);
  if (options.slots < 1) return absl::InvalidArgumentError("--slots must be at least 1");
  if (options.slots > daemon::kMaxAgentSlots) {
    return absl::InvalidArgumentError("--slots must be at most " +
                                      std::to_string(daemon::kMaxAgentSlots));
  }
  if (options.log_retention_days > 0 &&
      (options.log_root.empty() || options.log_root.front() != '/')) {
    return absl::InvalidArgumentError(
        "--log_retention_days needs an absolute --log_root (a relative one is each job's "
        "own directory)");
  }
  if (!run_as.empty()) {
    ASSIGN_OR_RETURN(options.run_as, ResolveRunAs(run_as));
  }
  RETURN_IF_ERROR(Complete(options, master, service, command.self_exe));
  return Serve(options);
}

}  // namespace gangrun::cli
