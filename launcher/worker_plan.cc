#include "launcher/worker_plan.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/env_names.h"
#include "launcher/bind_core.h"

namespace gangrun::launcher {
namespace {

// The `local_rank`-th device of the inherited CUDA_VISIBLE_DEVICES (a list of indices or
// UUIDs), or the index itself when it lists none or too few.
std::string VisibleDevice(const std::vector<std::string>& base_env, int local_rank) {
  const std::string prefix = std::string(env::kCudaVisibleDevices) + "=";
  for (const auto& entry : base_env) {
    if (entry.rfind(prefix, 0) != 0) continue;
    std::vector<std::string> devices =
        absl::StrSplit(entry.substr(prefix.size()), ',', absl::SkipEmpty());
    if (local_rank < static_cast<int>(devices.size())) {
      return std::string(absl::StripAsciiWhitespace(devices[local_rank]));
    }
  }
  return std::to_string(local_rank);
}

using EnvList = std::vector<std::pair<std::string, std::string>>;

// Applies `overrides` to `base` (KEY=VALUE strings): replaced in place, new ones appended; of
// two overrides of one name the first wins. Per worker, so no string is built to be compared.
std::vector<std::string> MergeEnv(const std::vector<std::string>& base, const EnvList& overrides) {
  // The overrides by name; of two with one name the first sorts first, and wins.
  std::vector<std::pair<absl::string_view, size_t>> by_name;
  by_name.reserve(overrides.size());
  for (size_t i = 0; i < overrides.size(); ++i) by_name.emplace_back(overrides[i].first, i);
  std::sort(by_name.begin(), by_name.end());
  std::vector<bool> used(overrides.size(), false);
  for (size_t i = 1; i < by_name.size(); ++i) {
    if (by_name[i].first == by_name[i - 1].first) used[by_name[i].second] = true;
  }
  std::vector<std::string> out;
  out.reserve(base.size() + overrides.size());
  for (const auto& entry : base) {
    const absl::string_view name = absl::string_view(entry).substr(0, entry.find('='));
    auto it = std::lower_bound(by_name.begin(), by_name.end(), std::make_pair(name, size_t{0}));
    if (it == by_name.end() || it->first != name) {
      out.push_back(entry);
    } else {
      out.push_back(absl::StrCat(name, "=", overrides[it->second].second));
      used[it->second] = true;
    }
  }
  for (size_t i = 0; i < overrides.size(); ++i) {
    if (!used[i]) out.push_back(absl::StrCat(overrides[i].first, "=", overrides[i].second));
  }
  return out;
}

// The variables every process of the job gets (workers and the MindSpore scheduler).
EnvList CommonEnv(const Options& options, const HostFacts& facts, int world_size,
                  uint64_t generation) {
  EnvList env;
  // A simulation keeps msrun's sizes: the whole job's, not the one simulated process's.
  const int size = Simulating(options) ? options.worker_num : world_size;
  std::string rank_size = std::to_string(size);
  if (Simulating(options)) {
    for (const auto& entry : facts.base_env) {
      if (absl::StartsWith(entry, std::string(env::kRankSize) + "=")) {
        rank_size = entry.substr(std::strlen(env::kRankSize) + 1);
      }
    }
  }
  env.emplace_back(env::kRankSize, rank_size);
  if (!options.rank_table_file.empty())
    env.emplace_back(env::kRankTableFile, options.rank_table_file);
  if (Simulating(options)) {
    env.emplace_back(env::kMsSimulationLevel, std::to_string(options.sim_level));
  }
  env.emplace_back(env::kMsWorkerNum, std::to_string(size));
  if (!Simulating(options)) {
    env.emplace_back(env::kMsSchedHost, facts.master_ip);
    env.emplace_back(env::kMsSchedPort, std::to_string(options.master_port));
    env.emplace_back(env::kMsTopoTimeout, std::to_string(options.cluster_time_out));
  }
  env.emplace_back(env::kScheduler, JoinHostPort(facts.scheduler_host, facts.scheduler_port));
  env.emplace_back(env::kRunId, facts.run_id);
  env.emplace_back(env::kGeneration, std::to_string(generation));
  if (!facts.token.empty()) env.emplace_back(env::kToken, facts.token);
  // So that `gangrun kv` in a worker can reach a TLS scheduler.
  if (!options.access.tls_ca.empty()) env.emplace_back(env::kTlsCa, options.access.tls_ca);
  if (!options.access.tls_cert.empty()) env.emplace_back(env::kTlsCert, options.access.tls_cert);
  if (!options.access.tls_key.empty()) env.emplace_back(env::kTlsKey, options.access.tls_key);
  return env;
}

node::ProcessSpec BaseSpec(const HostFacts& facts) {
  node::ProcessSpec spec;
  spec.exec_path = facts.task.exec_path;
  spec.argv = facts.task.argv;
  return spec;
}

// --bind_core (and MSRUN_CPU_LIST) or --numa_binding: the worker's CPUs and memory.
void BindWorker(const Options& options, const HostFacts& facts, int local_rank,
                int local_worker_num, EnvList& env, node::ProcessSpec& spec) {
  CpuBinding binding = WorkerCpus(options.bind_core, local_rank, local_worker_num, facts.cpu_count,
                                  facts.visible_devices);
  if (!binding.cpus.empty()) env.emplace_back(env::kMsrunCpuList, PythonList(binding.cpus));
  spec.cpus = std::move(binding.cpus);
  std::optional<NumaBinding> numa =
      options.bind_numa.mode != BindNuma::Mode::kOff
          ? BindNumaFor(options.bind_numa, facts.numa, local_rank, local_worker_num)
          : NumaBindingFor(facts.numa, NumaModeOf(options.numa_binding), local_rank,
                           local_worker_num);
  if (numa) {
    spec.cpus = std::move(numa->cpus);
    spec.memory_nodes = std::move(numa->memory_nodes);
  }
  if (!options.bind_numa.file.empty())
    env.emplace_back(env::kMsrunBindFile, options.bind_numa.file);
}

}  // namespace

std::string WorkerLogPath(const Options& options, const HostFacts& facts, int rank) {
  std::string name = "worker";
  if (!options.worker_log_name.empty()) {
    name = absl::StrReplaceAll(options.worker_log_name,
                               {{"{ip}", facts.local_ip}, {"{hostname}", facts.hostname}});
  }
  std::string file = name + "_" + std::to_string(rank) + ".log";
  return facts.InLogDir(file);
}

absl::StatusOr<std::vector<node::ProcessSpec>> PlanProcesses(const Options& options,
                                                             const HostFacts& facts,
                                                             const v1::RankAssignment& assignment,
                                                             uint64_t generation,
                                                             int restart_count) {
  std::vector<node::ProcessSpec> specs;
  // The scheduler's run id, so that every rank of the job sees the same one.
  HostFacts job_facts = facts;
  if (!assignment.run_id().empty()) job_facts.run_id = assignment.run_id();
  const EnvList common = CommonEnv(options, job_facts, assignment.world_size(), generation);
  const bool simulating = Simulating(options);

  if (options.personality == Personality::kMsrun && facts.is_master && !simulating) {
    node::ProcessSpec sched = BaseSpec(facts);
    sched.rank = -1;
    sched.local_rank = -1;
    EnvList env = common;
    env.emplace_back(env::kMsRole, "MS_SCHED");
    env.emplace_back(env::kRankId, "0");
    sched.env = MergeEnv(facts.base_env, env);
    sched.log_path = facts.InLogDir("scheduler.log");
    sched.cpus = SchedulerCpus(options.bind_core).cpus;
    specs.push_back(std::move(sched));
  }

  for (int i = 0; i < assignment.local_worker_num(); ++i) {
    const int rank = assignment.first_rank() + i;
    const int rank_id = simulating && options.sim_rank_id != -1 ? options.sim_rank_id : rank;
    node::ProcessSpec spec = BaseSpec(facts);
    spec.rank = rank_id;
    spec.local_rank = i;
    EnvList env = common;
    if (!simulating) env.emplace_back(env::kMsRole, "MS_WORKER");
    env.emplace_back(env::kRankId, std::to_string(rank_id));
    if (!simulating) env.emplace_back(env::kMsNodeId, std::to_string(rank_id));
    env.emplace_back(env::kDeviceId, std::to_string(i));
    BindWorker(options, facts, i, assignment.local_worker_num(), env, spec);
    env.emplace_back(env::kRank, std::to_string(rank_id));
    if (options.virtual_local_rank) {
      // As torchrun --virtual-local-rank: the worker's own GPU is its device 0.
      env.emplace_back(env::kLocalRank, "0");
      env.emplace_back(env::kCudaVisibleDevices, VisibleDevice(facts.base_env, i));
    } else {
      env.emplace_back(env::kLocalRank, std::to_string(i));
    }
    env.emplace_back(env::kWorldSize, std::to_string(assignment.world_size()));
    env.emplace_back(env::kLocalWorldSize, std::to_string(assignment.local_worker_num()));
    env.emplace_back(env::kGroupRank, std::to_string(assignment.node_rank()));
    env.emplace_back(env::kGroupWorldSize, std::to_string(assignment.node_count()));
    env.emplace_back(env::kMasterAddr, assignment.master_addr());
    env.emplace_back(env::kMasterPort, std::to_string(assignment.master_port()));
    env.emplace_back(env::kTorchRestartCount, std::to_string(restart_count));
    env.emplace_back(env::kTorchMaxRestarts, std::to_string(options.max_restarts));
    env.emplace_back(env::kTorchRunId, job_facts.run_id);
    // One role, as torchrun's workers have unless a custom agent makes more.
    env.emplace_back(env::kRoleName, options.role);
    env.emplace_back(env::kRoleRank, std::to_string(rank_id));
    env.emplace_back(env::kRoleWorldSize, std::to_string(assignment.world_size()));
    // There is no agent store: rank 0 hosts init_process_group's TCPStore at MASTER_PORT, as
    // under torchrun's c10d rendezvous.
    env.emplace_back(env::kTorchUseAgentStore, "False");
    for (const auto& entry : options.worker_env) env.push_back(entry);
    spec.env = MergeEnv(facts.base_env, env);
    spec.log_path = WorkerLogPath(options, facts, rank_id);
    spec.log_append = generation > 1;
    if (generation > 1) {
      spec.log_header = "==== gangrun: generation " + std::to_string(generation) + " (restart " +
                        std::to_string(restart_count) + " of " +
                        std::to_string(options.max_restarts) + ") ====\n";
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::vector<std::string> ApplyMsrunRules(Options& options, const EnvLookup& env) {
  std::vector<std::string> warnings;
  if (options.local_worker_num == options.worker_num && options.node_rank > 0) {
    warnings.push_back("--node_rank " + std::to_string(options.node_rank) +
                       " is ignored: all workers run on this node");
    options.node_rank = -1;
  }
  if (!Simulating(options)) return warnings;
  if (options.sim_rank_id == -1) {
    int rank;
    if (auto rank_id = env(env::kRankId); rank_id && absl::SimpleAtoi(*rank_id, &rank)) {
      options.sim_rank_id = rank;
    }
  }
  if (options.sim_rank_id != -1) options.local_worker_num = 1;
  if (options.local_worker_num > 128) {
    warnings.push_back("simulation: local_worker_num " + std::to_string(options.local_worker_num) +
                       " is above 128; simulating rank 0 only");
    options.local_worker_num = 1;
    options.sim_rank_id = 0;
  }
  return warnings;
}

}  // namespace gangrun::launcher
