#pragma once
// `gangrun scale --master HOST:PORT --worker_num N [--token T]`: changes a running elastic
// job's target size. Token and TLS as for the launcher (flags or GANGRUN_* variables).

#include <string>
#include <vector>

#include "launcher/options.h"

namespace gangrun::launcher {

// Returns the exit code: 0 done, 2 bad usage or refused size, 3 scheduler unreachable.
int RunScaleCommand(const std::vector<std::string>& args, const EnvLookup& env);

}  // namespace gangrun::launcher
