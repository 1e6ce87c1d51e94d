#pragma once
// `gangrun status` and `gangrun stop`: look at and stop a running job, given its scheduler
// (a one-shot job's --master_addr:port) or a daemon (`gangrun scheduler --listen`).
// Exit codes: 0 done, 2 bad usage or refused, 3 unreachable or wrong token.

#include <string>
#include <vector>

#include "gangrun/v1/daemon.pb.h"
#include "launcher/options.h"

namespace gangrun::launcher {

int RunStatusCommand(const std::vector<std::string>& args, const EnvLookup& env);
int RunStopCommand(const std::vector<std::string>& args, const EnvLookup& env);
// `gangrun health --target HOST:PORT [--service S]`: 0 SERVING, 1 not serving, 3 unreachable.
int RunHealthCommand(const std::vector<std::string>& args, const EnvLookup& env);

// The human-readable status: a header line per job, a node table and a worker table.
std::string FormatJobStatus(const v1::GetStatusResponse& status);
std::string FormatDaemonStatus(const v1::DaemonStatusResponse& status);

}  // namespace gangrun::launcher
