#pragma once
// The one place that turns results into process exit codes (PRODUCT.md section 8):
//   0 success; the root-cause worker's code or 128+signal; 2 invalid options or
//   configuration; 3 the cluster did not form; 4 a node was lost; 128+signal when the
//   launcher was stopped by SIGINT/SIGTERM/SIGHUP.

#include "absl/status/status.h"
#include "gangrun/v1/session.pb.h"

namespace gangrun::launcher {

inline constexpr int kExitInvalidConfiguration = 2;
inline constexpr int kExitClusterNotFormed = 3;
inline constexpr int kExitNodeLost = 4;

int ExitCode(const v1::JobOutcome& outcome);
// For errors before the job ran: InvalidArgument -> 2, Unavailable -> 3, others -> 1.
int ExitCode(const absl::Status& status);

}  // namespace gangrun::launcher
