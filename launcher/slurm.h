#pragma once
// Inside a Slurm allocation (SLURM_JOB_ID set), with one launcher per node started by
// `srun`, the launcher takes what the user did not give explicitly from Slurm's variables.
// Inside a step (SLURM_STEP_ID set: srun) the step's win over the job's, and each task is
// one launcher:
//   --run_id      <- slurm-<job id>.<step id> (slurm-<job id> outside a step): Slurm's
//                    identity, so launchers of two jobs never form one gang
//   --node_rank   <- SLURM_PROCID (outside a step: SLURM_NODEID)
//   --worker_num  <- --local_worker_num x SLURM_STEP_NUM_TASKS (outside: SLURM_JOB_NUM_NODES)
//   --master_addr <- the first host of SLURM_STEP_NODELIST (outside: SLURM_JOB_NODELIST)
//   --master_port <- 20000 + (job id x 16 + step id mod 16) mod 12000: the job's own port
// The node list is expanded here (no scontrol): "n1,n2", "node[01-04,07]",
// "rack[1-2]-gpu[1-2]" (every combination), zero padding kept.

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launcher/options.h"

namespace gangrun::launcher {

absl::StatusOr<std::vector<std::string>> ExpandSlurmNodeList(const std::string& list);

struct SlurmApplied {
  std::string taken;                  // a line saying what it took ("" outside an allocation)
  std::vector<std::string> warnings;  // what the user should change
};

// Fills the options not in `given` (option names without "--") from Slurm's variables, or
// says why they are unusable (InvalidArgument).
absl::StatusOr<SlurmApplied> ApplySlurm(Options& options, const std::set<std::string>& given,
                                        const EnvLookup& env);

}  // namespace gangrun::launcher
