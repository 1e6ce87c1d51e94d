#pragma once
// The one owner of the launch contract: launcher options <-> the typed LaunchSpec that carries
// a submitted job through the daemon and the agents, and a LaunchSpec -> a launcher's command
// line (what an agent starts). Nobody else spells launcher flags.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gangrun/v1/launch.pb.h"
#include "launcher/options.h"

namespace gangrun::launcher {

// Every option (the token excepted: it never travels in a spec).
v1::LaunchSpec ToLaunchSpec(const Options& options);

// The options a spec describes, in the gangrun personality. Not validated: ValidateValues.
absl::StatusOr<Options> FromLaunchSpec(const v1::LaunchSpec& spec);

// `--option value` for every option, then `--`, the task script and its arguments: a command
// line that ParseCommandLine turns back into the same options, whatever GANGRUN_* variables
// the launcher's environment holds.
std::vector<std::string> LaunchArgv(const v1::LaunchSpec& spec);

// gangrun submit --export: what of the submitter's environment (KEY=VALUE strings) and which
// working directory a submitted job runs with, as srun's --export: "ALL" (the default) the
// whole environment, "NONE" none of it (the agent's own), or "VAR[,VAR...]" those variables
// over the agent's. Never carried: gangrun's own configuration (GANGRUN_*) and what belongs to
// the submitter's service manager or batch system (NOTIFY_SOCKET, WATCHDOG_*, LISTEN_*,
// SLURM_*, ...). InvalidArgument for a malformed --export.
absl::Status ExportEnvironment(const std::string& mode, const std::vector<std::string>& environ,
                               const std::string& cwd, v1::LaunchSpec& spec);

// The environment an agent starts a submitted job's launcher with: the spec's exported
// variables over (or, for ALL, instead of) the agent's own; the agent's GANGRUN_* always.
std::vector<std::string> LauncherEnvironment(const v1::LaunchSpec& spec,
                                             const std::vector<std::string>& agent_env);

}  // namespace gangrun::launcher
