#pragma once
// An ended job's logs on this agent's host, for `gangrun logs --job` after the job's launchers
// are gone (the daemon asks: FindJobLogs, ReadJobLog in gangrun/v1/daemon.proto). Pure file
// look-ups; the agent answers on its loop.

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gangrun/v1/daemon.pb.h"

namespace gangrun::agent {

// Ranks a listing names at most (the directory's other files are passed over).
inline constexpr size_t kMaxRankLogs = 131072;

// Where the job's logs are: its log_dir, else <log_root>/<job id>, as the agent placed them
// (Agent::PlaceLogs); a relative one is relative to the job's cwd, where its launcher ran.
// InvalidArgument for a job id that is not one path component, or when neither is known.
absl::StatusOr<std::string> JobLogDir(const v1::JobLogPlace& place, const std::string& log_root);

// The ranks' logs in `dir`: each file <name>_<rank>.log (launcher/worker_plan.cc's
// WorkerLogPath; the filtered copies, <name>_<rank>.filtered_<stream>.log, and the other
// logs do not match), by rank; the first kMaxRankLogs ranks. NotFound for a missing directory.
absl::StatusOr<std::map<int, std::string>> FindRankLogs(const std::string& dir);

// The agent's retention (--log_retention_days): removes each job's directory directly under
// `log_root` (a directory, not a link, named as a job id) whose newest file, or itself, was last
// written before `before` and that is not in `keep` (the jobs running here); at most
// kMaxPrunedPerPass a pass. Returns the job ids removed; a directory that cannot be removed is
// said in `error` and passed over.
inline constexpr size_t kMaxPrunedPerPass = 1000;
std::vector<std::string> PruneJobLogs(const std::string& log_root,
                                      std::chrono::system_clock::time_point before,
                                      const std::set<std::string>& keep, std::string* error);

}  // namespace gangrun::agent
