// Gathering what the launcher needs to know about this host before it starts anything, and
// printing the plan for --dry_run.

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/env_names.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/numbers.h"
#include "common/spawn.h"
#include "common/status.h"
#include "launcher/bind_core.h"
#include "launcher/launch_spec.h"
#include "launcher/launcher.h"
#include "rpc/credentials.h"
#include "store/store_config.h"

namespace gangrun::launcher {
namespace {

std::string RandomRunId() {
  std::random_device random;
  std::ostringstream out;
  out << std::hex << random() << random();
  return out.str().substr(0, 12);
}

std::string ShellQuote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-+=/.,:@%") == std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

namespace {

// What the workers' environment starts from: this process's, or, for a launcher an agent
// started, the one the agent handed over (env::kWorkerEnvFd).
absl::StatusOr<std::vector<std::string>> WorkerBaseEnvironment() {
  const char* fd_text = std::getenv(env::kWorkerEnvFd);
  if (fd_text == nullptr) return common::CurrentEnvironment();
  const auto fd = common::ParseInt(fd_text, 3, 1 << 20);
  if (!fd)
    return absl::InvalidArgumentError(std::string(env::kWorkerEnvFd) + " is not a descriptor");
  unsetenv(env::kWorkerEnvFd);
  ASSIGN_OR_RETURN(std::string bytes,
                   common::ReadDescriptor(static_cast<int>(*fd), kMaxLaunchSpecBytes,
                                          "the workers' environment"));
  std::vector<std::string> env;
  for (absl::string_view entry : absl::StrSplit(bytes, '\0', absl::SkipEmpty())) {
    env.emplace_back(entry);
  }
  return env;
}

// The address of the store's first member this host has a route to (the first member when
// none has), for the route toward it (a name is resolved; "" when the URL cannot be read
// here: Validate reports it).
std::string StoreAddress(const Options& options) {
  auto config = store::ParseStoreUrl(options.store);
  if (!config.ok() || config->endpoints.empty()) return "";
  std::string first;
  for (const auto& member : config->endpoints) {
    auto endpoint = common::ParseHostPort(member, "--store");
    if (!endpoint.ok()) continue;
    auto resolved = common::ResolveHost(endpoint->host);
    if (!resolved.ok()) continue;
    if (first.empty()) first = resolved->front();
    const std::string routed = common::FirstRoutable(*resolved);
    if (!routed.empty()) return routed;
  }
  return first;
}

// An address of this host that other hosts may reach: among `candidates` (the master's name
// resolved here) the first that is not loopback, else this host's first interface address.
std::string ReachableAddress(const std::vector<std::string>& candidates) {
  for (const auto& address : candidates) {
    if (!common::IsLoopbackHost(address) && common::IsLocalAddress(address)) return address;
  }
  auto interfaces = common::InterfaceAddresses();
  return interfaces.empty() ? "" : interfaces.front();
}

}  // namespace

absl::StatusOr<HostFacts> GatherHostFacts(const Options& options) {
  HostFacts facts;
  facts.hostname = common::Hostname();
  auto addresses = common::ResolveHost(options.master_addr);
  if (!addresses.ok()) {
    return absl::InvalidArgumentError("--master_addr: " +
                                      std::string(addresses.status().message()));
  }
  facts.master_ip = addresses->front();
  facts.is_master = false;
  for (const auto& address : *addresses) {
    if (common::IsLocalAddress(address)) {
      facts.master_ip = address;
      facts.is_master = true;
      break;
    }
  }
  if (!options.may_host_scheduler) facts.is_master = false;  // torchrun's is_host=false
  facts.single_host = options.local_worker_num == options.worker_num && !options.elastic();
  // A master named by a host name that resolves to loopback on its own host (Debian's
  // installer maps the host's name to 127.0.1.1) while the other hosts resolve it to the
  // host's address: a job that spans hosts is served on an address they reach. A loopback
  // literal or "localhost" means what it says: every launcher is on this host.
  if (facts.is_master && !facts.single_host && common::IsLoopbackHost(facts.master_ip) &&
      !common::IsLoopbackHost(options.master_addr)) {
    const std::string reachable = ReachableAddress(*addresses);
    if (!reachable.empty()) {
      common::Logger("launcher")
          ->info(
              "--master_addr {} is {} (loopback) on this host, which other hosts cannot "
              "reach: the scheduler listens on {}, this host's address",
              options.master_addr, facts.master_ip, reachable);
      facts.master_ip = reachable;
    }
  }
  // A single-host job's scheduler listens on loopback only.
  if (facts.single_host && facts.is_master) {
    facts.scheduler_host = facts.master_ip.find(':') != std::string::npos ? "::1" : "127.0.0.1";
  } else {
    facts.scheduler_host = facts.master_ip;
  }
  // The address this host gives the others (its node's, and its scheduler's where it hosts
  // one): --local_addr, else the source of the route toward the master, or with --store
  // toward the store's first member (any launcher may coordinate: the store is what every
  // host reaches; a store on loopback means every launcher is on this host).
  const std::string toward = options.store.empty() ? facts.master_ip : StoreAddress(options);
  auto local_ip = common::LocalAddressToward(toward.empty() ? facts.master_ip : toward);
  facts.local_ip = local_ip.ok() ? *local_ip : facts.master_ip;
  if (!options.local_addr.empty()) facts.local_ip = options.local_addr;  // torchrun's --local_addr
  if (!options.store.empty() && !toward.empty() && !common::IsLoopbackHost(toward) &&
      common::IsLoopbackHost(facts.local_ip)) {
    return absl::InvalidArgumentError(
        "--local_addr " + facts.local_ip + " is a loopback address, but the store (" +
        options.store +
        ") is reached from other hosts, which could not reach a scheduler "
        "there: give an address of this host they reach");
  }
  facts.scheduler_port =
      options.personality == Personality::kMsrun ? options.master_port + 1 : options.master_port;
  facts.run_id = options.run_id.empty() ? RandomRunId() : options.run_id;
  // torchrun's default run id, "none", stays the workers' (TORCHELASTIC_RUN_ID, as torch's);
  // the pages and the metrics' job label need one that two jobs never share.
  facts.job_label = options.personality == Personality::kTorchrun && facts.run_id == "none"
                        ? "torchrun-" + RandomRunId()
                        : facts.run_id;
  facts.log_dir = options.log_dir;
  ASSIGN_OR_RETURN(facts.token, rpc::ResolveToken(options.access));
  std::string path_env = "/usr/local/bin:/usr/bin:/bin";
  ASSIGN_OR_RETURN(std::vector<std::string> inherited, WorkerBaseEnvironment());
  for (auto& entry : inherited) {
    if (absl::StartsWith(entry, env::kInternalPrefix)) continue;
    if (absl::StartsWith(entry, "PATH=")) path_env = entry.substr(5);
    if (absl::StartsWith(entry, "ASCEND_RT_VISIBLE_DEVICES=")) {
      facts.visible_devices = entry.substr(sizeof("ASCEND_RT_VISIBLE_DEVICES=") - 1);
    }
    facts.base_env.push_back(std::move(entry));
  }
  auto task = ResolveTaskCommand(options.task_script, options.task_args, path_env,
                                 options.task_mode, options.python_exec);
  if (!task.ok()) return task.status();
  facts.task = std::move(*task);
  facts.cpu_count = CpuCount();
  if (!options.numa_binding.empty() || options.bind_numa.mode != BindNuma::Mode::kOff) {
    facts.numa = ReadNumaTopology();
    // The ids --bind_numa names are this host's, or the launch is refused now (not each rank
    // at its spawn).
    const long configured = sysconf(_SC_NPROCESSORS_CONF);  // the ids, online or not
    const int cpu_ids = configured > 0 ? static_cast<int>(configured) : facts.cpu_count;
    for (const auto& [device, cpus] : options.bind_numa.bind_cpu) {
      for (int cpu : cpus) {
        if (cpu >= cpu_ids) {
          return absl::InvalidArgumentError("--bind_numa: bind_cpu." + device + " names CPU " +
                                            std::to_string(cpu) + "; this host has CPUs 0-" +
                                            std::to_string(cpu_ids - 1));
        }
      }
    }
    for (const auto& [device, nodes] : options.bind_numa.bind_memory) {
      for (int node : nodes) {
        if (node >= static_cast<int>(std::max<size_t>(facts.numa.node_cpus.size(), 1))) {
          return absl::InvalidArgumentError(
              "--bind_numa: bind_memory." + device + " names NUMA node " + std::to_string(node) +
              "; this host has " + std::to_string(facts.numa.node_cpus.size()) + " node(s)");
        }
      }
    }
    if (facts.numa.node_cpus.size() < 2) {
      common::Logger("launcher")
          ->info("{}: this host has {} NUMA node; nothing to bind to a node",
                 options.numa_binding.empty() ? "--bind_numa " + options.bind_numa.text
                                              : "--numa_binding " + options.numa_binding,
                 facts.numa.node_cpus.size());
    }
  }
  return facts;
}

std::vector<std::string> OtherAddresses(const Options& options, const HostFacts& facts) {
  std::vector<std::string> others;
  if (!options.local_addr.empty() || common::IsLoopbackHost(facts.local_ip)) return others;
  for (auto& address : common::InterfaceAddresses()) {
    if (others.size() + 1 == common::kMaxCandidates) break;
    if (address != facts.local_ip) others.push_back(std::move(address));
  }
  return others;
}

std::string FormatPlan(const Options& options, const HostFacts& facts) {
  v1::RankAssignment assignment;
  int node_rank = options.node_rank >= 0 ? options.node_rank : 0;
  assignment.set_node_rank(node_rank);
  assignment.set_node_count((options.worker_num + options.local_worker_num - 1) /
                            options.local_worker_num);
  assignment.set_first_rank(node_rank * options.local_worker_num);
  assignment.set_local_worker_num(options.local_worker_num);
  assignment.set_world_size(options.worker_num);
  assignment.set_master_addr(facts.local_ip);
  HostFacts only_ours = facts;
  only_ours.base_env.clear();  // show the variables gangrun sets, not the inherited ones
  auto plan = PlanProcesses(options, only_ours, assignment, 1, 0);
  std::ostringstream out;
  out << "gangrun plan: " << options.worker_num << " worker(s), " << options.local_worker_num
      << " on this host (" << facts.hostname << "), run id " << facts.run_id << "\n";
  for (const auto& spec : *plan) {
    out << (spec.rank >= 0 ? "rank " + std::to_string(spec.rank) + " (local " +
                                 std::to_string(spec.local_rank) + ")"
                           : std::string("MindSpore scheduler process"))
        << "\n  log: " << spec.log_path
        << "\n  cpus: " << (spec.cpus.empty() ? std::string("not bound") : PythonList(spec.cpus))
        << (spec.memory_nodes.empty()
                ? std::string()
                : "\n  memory on NUMA node(s): " + PythonList(spec.memory_nodes))
        << "\n  command:";
    for (const auto& arg : spec.argv) out << " " << ShellQuote(arg);
    out << "\n  environment:\n";
    for (const auto& entry : spec.env) {
      if (absl::StartsWith(entry, "MASTER_PORT=")) {
        out << "    MASTER_PORT=<a free port, chosen at start>\n";
      } else if (absl::StartsWith(entry, std::string(env::kToken) + "=")) {
        out << "    GANGRUN_TOKEN=<hidden>\n";
      } else {
        out << "    " << entry << "\n";
      }
    }
  }
  return out.str();
}

}  // namespace gangrun::launcher
