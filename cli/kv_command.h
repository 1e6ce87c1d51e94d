#pragma once
// `gangrun kv put KEY VALUE | get KEY | wait KEY [--timeout S] | add KEY N | del KEY`:
// a worker's access to the job's key-value store, found through GANGRUN_SCHEDULER and
// GANGRUN_TOKEN (and GANGRUN_TLS_CA / GANGRUN_TLS_CERT / GANGRUN_TLS_KEY) in its environment.

#include <string>
#include <vector>

#include "launcher/options.h"

namespace gangrun::launcher {

// Runs the command; prints a value (get, wait, add) on stdout. Returns the exit code:
// 0 done, 1 key absent or wait timed out, 2 bad usage, 3 scheduler unreachable or refused.
int RunKvCommand(const std::vector<std::string>& args, const EnvLookup& env);

}  // namespace gangrun::launcher
