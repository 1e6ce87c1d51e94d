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

}  // namespace gangrun::launcher
