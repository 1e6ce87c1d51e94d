#pragma once
// The one place that turns what a command ended with into the process's exit code:
//
//   0                 success: every worker exited 0, or the command did what was asked
//   the root-cause worker's code, or 128+signal   a worker failed
//   1                 what was asked for is not there (a key, a serving health status) or
//                     an unexpected internal error
//   2                 invalid options, configuration or usage (one line on stderr)
//   3                 the cluster did not form; a scheduler or daemon is unreachable or
//                     refused us (wrong token, TLS)
//   4                 a node was lost
//   5                 the job hung: ranks stopped making progress (--hang_timeout and
//                     friends) or a torch FileTimer expired
//   6                 this node was excluded from the job: its --health_check failed, or it
//                     was the root cause of --exclude_after failed generations in a row
//   7                 the job reached its --time_limit
//   128+signal        the launcher was stopped by SIGINT, SIGTERM or SIGHUP

#include "absl/status/status.h"
#include "cli/command.h"
#include "common/exit_status.h"
#include "gangrun/v1/session.pb.h"

namespace gangrun::cli {

inline constexpr int kExitNotThere = 1;
inline constexpr int kExitInvalid = 2;
inline constexpr int kExitUnreachable = 3;
inline constexpr int kExitNodeLost = 4;
inline constexpr int kExitHung = 5;
inline constexpr int kExitExcluded = common::kExitExcluded;
inline constexpr int kExitTimeLimit = 7;

int ExitCode(const v1::JobOutcome& outcome);
int ExitCode(const absl::Status& status);
int ExitCode(const CommandResult& result);

}  // namespace gangrun::cli
