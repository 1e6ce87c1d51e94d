#pragma once
// Per-rank generation of what each local process runs: command, environment (msrun's,
// torchrun's and gangrun's variables, as the README lists them), log file and CPU binding.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/net.h"
#include "gangrun/v1/session.pb.h"
#include "launcher/numa.h"
#include "launcher/options.h"
#include "launcher/task_command.h"
#include "node/process_backend.h"

namespace gangrun::launcher {

// Facts about this host and job, gathered once before anything is spawned.
struct HostFacts {
  std::string hostname;
  std::string local_ip;        // this host's address towards the master ({ip})
  std::string master_ip;       // --master_addr resolved (MS_SCHED_HOST)
  std::string scheduler_host;  // where gangrun's scheduler listens (loopback for one host)
  int scheduler_port = 0;      // gangrun's scheduler port (GANGRUN_SCHEDULER)
  bool is_master = true;       // this host owns master_addr
  bool single_host = true;     // local_worker_num == worker_num
  std::string run_id;
  std::string job_label;              // the job's name on its pages and metrics (a unique run id)
  std::string log_dir;                // "" = current directory
  std::string token;                  // resolved from --token / --token_file / GANGRUN_TOKEN
  std::vector<std::string> base_env;  // the launcher's environment, internal variables removed
  TaskCommand task;
  int cpu_count = 1;
  NumaTopology numa;                           // read when --numa_binding asks (launcher/numa.h)
  std::optional<std::string> visible_devices;  // ASCEND_RT_VISIBLE_DEVICES

  // `file` in the log directory: the current directory when log_dir is "" (never "/file").
  std::string InLogDir(const std::string& file) const {
    return log_dir.empty() ? file : log_dir + "/" + file;
  }
};

// The processes this node runs in a generation: the MindSpore scheduler process first (msrun
// personality, master host, not simulating), then one worker per local rank.
absl::StatusOr<std::vector<node::ProcessSpec>> PlanProcesses(const Options& options,
                                                             const HostFacts& facts,
                                                             const v1::RankAssignment& assignment,
                                                             uint64_t generation,
                                                             int restart_count);

// <log_dir>/worker_<rank>.log, or <log_dir>/<worker_log_name>_<rank>.log with {ip} and
// {hostname} substituted.
std::string WorkerLogPath(const Options& options, const HostFacts& facts, int rank);

using common::JoinHostPort;

// True when `options` ask for simulation (--sim_level != -1): no cluster, no networking
// variables.
inline bool Simulating(const Options& options) { return options.sim_level != -1; }

// msrun's adjustments of the options, each with a warning where msrun warns:
//  - a single-node job (local_worker_num == worker_num) ignores --node_rank other than 0/-1;
//  - simulation: --sim_rank_id falls back to RANK_ID; a simulated rank means one local
//    process; more than 128 local processes are capped to 1.
std::vector<std::string> ApplyMsrunRules(Options& options, const EnvLookup& env);

}  // namespace gangrun::launcher
