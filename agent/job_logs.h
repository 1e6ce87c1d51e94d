#pragma once
// An ended job's logs on this agent's host, for `gangrun logs --job` after the job's launchers
// are gone (the daemon asks: FindJobLogs, ReadJobLog in gangrun/v1/daemon.proto). Pure file
// look-ups; the agent answers on its loop.

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <map>
#include <optional>
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

// What the agent answers the daemon's FindJobLogs and ReadJobLog with: the ranks' logs of the
// job's directory on this host, and a piece of one. Keeps the last kListingsKept listings for
// the reads that follow (a listing per read would scan the directory per piece).
class JobLogServer {
 public:
  static constexpr size_t kListingsKept = 8;
  static constexpr uint32_t kMaxPiece = 256 * 1024;  // as a node's (Node::OnReadLog)

  // `owner`: with --run_as the agent is root, and only a file the job's user owns is read.
  JobLogServer(std::string log_root, std::optional<uid_t> owner)
      : log_root_(std::move(log_root)), owner_(owner) {}

  v1::JobLogsFound Find(const v1::JobLogPlace& place);
  // The file is opened once, not through a link, and read through that descriptor: a link or
  // a file of another user swapped in after the listing is refused.
  v1::JobLogRead Read(const v1::ReadJobLog& read);

 private:
  // The job's ranks' logs, listed anew (null, with `error`, when they cannot be).
  const std::map<int, std::string>* List(const v1::JobLogPlace& place, std::string* error);

  std::string log_root_;
  std::optional<uid_t> owner_;
  std::map<std::string, std::map<int, std::string>> listings_;  // by job id
  std::deque<std::string> listed_;                              // job ids, oldest first
};

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
