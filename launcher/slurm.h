#pragma once
// Inside a Slurm allocation (SLURM_JOB_ID set), with one launcher per node started by
// `srun`, the launcher takes what the user did not give explicitly from Slurm's variables:
//   --node_rank   <- SLURM_NODEID
//   --worker_num  <- --local_worker_num x SLURM_JOB_NUM_NODES (or SLURM_NNODES)
//   --master_addr <- the first host of SLURM_JOB_NODELIST (or SLURM_NODELIST)
// The node list is expanded here (no scontrol): "n1,n2", "node[01-04,07]",
// "rack[1-2]-gpu[1-2]" (every combination), zero padding kept.

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launcher/options.h"

namespace gangrun::launcher {

absl::StatusOr<std::vector<std::string>> ExpandSlurmNodeList(const std::string& list);

// Fills the options not in `given` (option names without "--") from Slurm's variables.
// Returns a line saying what it took ("" outside an allocation), or why the variables are
// unusable (InvalidArgument).
absl::StatusOr<std::string> ApplySlurm(Options& options, const std::set<std::string>& given,
                                       const EnvLookup& env);

}  // namespace gangrun::launcher
