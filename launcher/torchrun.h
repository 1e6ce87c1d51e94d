#pragma once
// The torchrun personality: torchrun's command line, as recipes write it, mapped onto gangrun's
// options (README "Coming from torchrun" lists every option and what it becomes).
//
//   torchrun's                      gangrun's
//   --nnodes N | MIN:MAX            worker_num = MAX x nproc, worker_num_min = MIN x nproc
//   --nproc_per_node N|auto|cpu|gpu local_worker_num
//   static: --node_rank, --master_addr, --master_port
//                                   the same (the scheduler listens on master_addr:master_port)
//   c10d: --rdzv_endpoint HOST[:PORT] (29400)
//                                   master_addr:master_port; node ranks from the rendezvous
//   --standalone                    c10d on 127.0.0.1:29400 (any free port when taken)
//   --rdzv_id                       run_id (TORCHELASTIC_RUN_ID; torchrun's default "none")
//   --rdzv_conf join_timeout=S      cluster_time_out;  last_call_timeout=S: last_call;
//               is_host=0|1         may_host_scheduler; the other keys are accepted
//   --max_restarts, --log_dir       the same
//   -m, --no_python, --run_path     task_mode (python -u [-m] SCRIPT, or SCRIPT itself)
//   -r/--redirects, -t/--tee, --local-ranks-filter
//                                   console_local_ranks (every rank's output is always in its
//                                   log; a redirected rank is not shown on the console)
//   --role                          ROLE_NAME;  --local_addr: local_addr
//   --monitor_interval, --start_method
//                                   accepted and checked; gangrun is event-driven and execs
//
// Every option has its underscore and dash spellings, takes "--opt value" and "--opt=value",
// and is read from PET_<OPTION> when not given (as torchrun does). gangrun's own options
// (--grace_period, --hang_timeout, --token, ...) are accepted too, and GANGRUN_<OPTION>.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launcher/options.h"

namespace gangrun::launcher {

// What --nproc_per_node auto|cpu|gpu counts.
struct AcceleratorCounts {
  int cpus = 1;
  int gpus = 0;  // CUDA devices: CUDA_VISIBLE_DEVICES when set, else the NVIDIA driver's list
};
AcceleratorCounts CountAccelerators(const EnvLookup& env);

// The default rendezvous port of torchrun's c10d backend.
inline constexpr int kTorchC10dPort = 29400;

absl::StatusOr<ParseResult> ParseTorchrunCommandLine(const std::vector<std::string>& args,
                                                     const EnvLookup& env,
                                                     const AcceleratorCounts& counts);
// The same, counting this host's accelerators.
absl::StatusOr<ParseResult> ParseTorchrunCommandLine(const std::vector<std::string>& args,
                                                     const EnvLookup& env);

}  // namespace gangrun::launcher
