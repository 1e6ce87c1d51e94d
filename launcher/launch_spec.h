#pragma once
// The one owner of the launch contract: launcher options <-> the LaunchSpec that carries a
// submitted job through the daemon and the agents, and a LaunchSpec -> a launcher's command
// line (what an agent starts), all through the option table (launcher/option_table.h). Nobody
// else spells launcher flags.

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gangrun/v1/launch.pb.h"
#include "launcher/options.h"

namespace gangrun::launcher {

// Every option that travels (the token and --dry_run do not), and the task.
v1::LaunchSpec ToLaunchSpec(const Options& options);

// The options a spec describes, in the gangrun personality; InvalidArgument for a value the
// option refuses or an option the table does not know. Not validated: ValidateValues.
absl::StatusOr<Options> FromLaunchSpec(const v1::LaunchSpec& spec);

// Sets one option of a spec (the daemon's choices: sizes, node rank, port, run id; the
// agent's: the master address and the log directory). `name` must be a travelling option.
void SetLaunchOption(v1::LaunchSpec& spec, const std::string& name, const std::string& value);
// One option's value as the spec carries it ("" when absent).
std::string LaunchOption(const v1::LaunchSpec& spec, const std::string& name);

// `--option value` for every option of the spec, in the table's order, then `--`, the task
// script and its arguments: a command line that ParseCommandLine turns back into the same
// options, whatever GANGRUN_* variables the launcher's environment holds (a spec made by
// ToLaunchSpec names every option).
std::vector<std::string> LaunchArgv(const v1::LaunchSpec& spec);

// A spec travels in one gRPC message (rpc/server.cc, rpc/channel.cc: at most 8 MiB); an agent
// hands it, and the workers' environment, to its launcher in memory files of at most this.
inline constexpr size_t kMaxLaunchSpecBytes = 8 << 20;

// The command line an agent starts a job's launcher with, which `ps` shows: `--run_id ID --`,
// the task script and its arguments. The options travel in the whole spec on a descriptor
// (env::kLaunchSpecFd); spelled out, they made a command line of ~1,500 characters.
std::vector<std::string> LaunchLabel(const v1::LaunchSpec& spec);

// The spec on descriptor `fd` (read whole and closed); InvalidArgument for one that does not
// parse or is larger than kMaxLaunchSpecBytes.
absl::StatusOr<v1::LaunchSpec> ReadLaunchSpec(int fd);

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
