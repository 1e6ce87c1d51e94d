#include "launcher/worker_plan.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/env_list.h"
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

// Variables a launch sets, each as the KEY=VALUE entry the worker's environment holds: built
// once, then moved into it (a pair of strings per variable, joined per worker, was three
// allocations where one does).
using EnvList = std::vector<std::string>;

void Add(EnvList& env, absl::string_view name, const absl::AlphaNum& value) {
  env.push_back(absl::StrCat(name, "=", value));
}

// Where torch's store is. With the job's (--agent_store True), where this node reaches the
// scheduler, and TORCHELASTIC_USE_AGENT_STORE=True; otherwise rank 0's init_process_group
// hosts it at MASTER_PORT, a free port on rank 0's host, as under torchrun's c10d rendezvous
// before torch 2.4.
void AddTorchStore(EnvList& env, const HostFacts& facts, const v1::RankAssignment& assignment) {
  const bool agent_store = assignment.torch_store_port() > 0;
  Add(env, env::kMasterAddr, agent_store ? facts.scheduler_host : assignment.master_addr());
  Add(env, env::kMasterPort,
      agent_store ? assignment.torch_store_port() : assignment.master_port());
  Add(env, env::kTorchUseAgentStore, agent_store ? "True" : "False");
}

std::string_view NameOf(const std::string& entry) {
  return std::string_view(entry).substr(0, entry.find('='));
}

// The inherited environment (KEY=VALUE strings), indexed by name once per plan, and each
// worker's made from it: an inherited variable that the launch sets is replaced where it
// stood (a later copy of its name dropped), the others appended in order; of two settings of
// one name the first wins. Per worker, so nothing is sorted and no string built to compare.
class InheritedEnv {
 public:
  explicit InheritedEnv(const std::vector<std::string>& entries)
      : entries_(entries), first_(entries.size()) {
    for (size_t e = 0; e < entries.size(); ++e) {
      first_[e] = index_.emplace(NameOf(entries[e]), e).first->second;
    }
  }

  std::vector<std::string> With(EnvList overrides) const {
    std::vector<std::string_view> names(overrides.size());
    std::vector<int> replaced_by(entries_.size(), -1);  // per inherited entry
    std::vector<size_t> added;                          // overrides of names not inherited
    for (size_t i = 0; i < overrides.size(); ++i) {
      names[i] = NameOf(overrides[i]);
      if (auto it = index_.find(names[i]); it != index_.end()) {
        if (replaced_by[it->second] < 0) replaced_by[it->second] = static_cast<int>(i);
      } else if (std::none_of(added.begin(), added.end(),
                              [&](size_t j) { return names[j] == names[i]; })) {
        added.push_back(i);
      }
    }
    // The names (views into `overrides`) are done with: the variables set move.
    std::vector<std::string> out;
    out.reserve(entries_.size() + added.size());
    for (size_t e = 0; e < entries_.size(); ++e) {
      const int by = replaced_by[first_[e]];
      if (by < 0) {
        out.push_back(entries_[e]);
      } else if (first_[e] == e) {
        out.push_back(std::move(overrides[by]));
      }
    }
    for (size_t i : added) out.push_back(std::move(overrides[i]));
    return out;
  }

 private:
  const std::vector<std::string>& entries_;
  std::unordered_map<std::string_view, size_t> index_;  // name -> its first entry
  std::vector<size_t> first_;                           // per entry: its name's first entry
};

// The variables every process of the job gets (workers and the MindSpore scheduler).
EnvList CommonEnv(const Options& options, const HostFacts& facts, int world_size,
                  uint64_t generation) {
  EnvList env;
  // MindSpore's variables are msrun's and gangrun's personalities' (a gangrun job serves
  // both frameworks); torchrun's workers get torch's only, as under torchrun.
  const bool mindspore = options.personality != Personality::kTorchrun;
  // A simulation keeps msrun's sizes: the whole job's, not the one simulated process's.
  const int size = Simulating(options) ? options.worker_num : world_size;
  std::string rank_size = std::to_string(size);
  if (Simulating(options)) {
    if (auto given = common::LastValueOf(facts.base_env, env::kRankSize)) {
      rank_size = std::string(*given);
    }
  }
  if (mindspore) {
    Add(env, env::kRankSize, rank_size);
    if (!options.rank_table_file.empty()) Add(env, env::kRankTableFile, options.rank_table_file);
    if (Simulating(options)) {
      Add(env, env::kMsSimulationLevel, options.sim_level);
    }
    Add(env, env::kMsWorkerNum, size);
    if (!Simulating(options)) {
      Add(env, env::kMsSchedHost, facts.master_ip);
      Add(env, env::kMsSchedPort, options.master_port);
      Add(env, env::kMsTopoTimeout, options.cluster_time_out);
    }
  }
  Add(env, env::kScheduler, JoinHostPort(facts.scheduler_host, facts.scheduler_port));
  Add(env, env::kRunId, facts.run_id);
  Add(env, env::kGeneration, generation);
  if (!facts.token.empty()) Add(env, env::kToken, facts.token);
  // So that `gangrun kv` in a worker can reach a TLS scheduler.
  if (!options.access.tls_ca.empty()) Add(env, env::kTlsCa, options.access.tls_ca);
  if (!options.access.tls_cert.empty()) Add(env, env::kTlsCert, options.access.tls_cert);
  if (!options.access.tls_key.empty()) Add(env, env::kTlsKey, options.access.tls_key);
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
  if (!binding.cpus.empty()) Add(env, env::kMsrunCpuList, PythonList(binding.cpus));
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
  if (!options.bind_numa.file.empty()) Add(env, env::kMsrunBindFile, options.bind_numa.file);
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
  const InheritedEnv inherited(facts.base_env);
  const bool simulating = Simulating(options);

  if (options.personality == Personality::kMsrun && facts.is_master && !simulating) {
    node::ProcessSpec sched = BaseSpec(facts);
    sched.rank = -1;
    sched.local_rank = -1;
    EnvList env = common;
    Add(env, env::kMsRole, "MS_SCHED");
    Add(env, env::kRankId, "0");
    sched.env = inherited.With(std::move(env));
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
    if (options.personality != Personality::kTorchrun) {  // MindSpore's (CommonEnv says why)
      if (!simulating) Add(env, env::kMsRole, "MS_WORKER");
      Add(env, env::kRankId, rank_id);
      if (!simulating) Add(env, env::kMsNodeId, rank_id);
      Add(env, env::kDeviceId, i);
    }
    BindWorker(options, facts, i, assignment.local_worker_num(), env, spec);
    Add(env, env::kRank, rank_id);
    if (options.virtual_local_rank) {
      // As torchrun --virtual-local-rank: the worker's own GPU is its device 0.
      Add(env, env::kLocalRank, "0");
      Add(env, env::kCudaVisibleDevices, VisibleDevice(facts.base_env, i));
    } else {
      Add(env, env::kLocalRank, i);
    }
    Add(env, env::kWorldSize, assignment.world_size());
    Add(env, env::kLocalWorldSize, assignment.local_worker_num());
    Add(env, env::kGroupRank, assignment.node_rank());
    Add(env, env::kGroupWorldSize, assignment.node_count());
    AddTorchStore(env, facts, assignment);
    Add(env, env::kTorchRestartCount, restart_count);
    Add(env, env::kTorchMaxRestarts, options.max_restarts);
    Add(env, env::kTorchRunId, job_facts.run_id);
    // One role, as torchrun's workers have unless a custom agent makes more.
    Add(env, env::kRoleName, options.role);
    Add(env, env::kRoleRank, rank_id);
    Add(env, env::kRoleWorldSize, assignment.world_size());
    for (const auto& [name, value] : options.worker_env) Add(env, name, value);
    spec.env = inherited.With(std::move(env));
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
