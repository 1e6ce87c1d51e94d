#pragma once
// torchrun's --duplicate-stdout-filters / --duplicate-stderr-filters (gangrun's
// --duplicate_stdout_filters, --duplicate_stderr_filters): a rank's log lines that contain
// any of the filter strings are also written to <log>.filtered_stdout.log (and
// .filtered_stderr.log) beside it. A rank's stdout and stderr share its log file (written by
// the worker itself, so it is complete), so each set of filters sees the lines of both
// streams; the README says so. Follows the logs with node::LogFollower (inotify, bounded
// reads), from the launcher's io_context.

#include <boost/asio/io_context.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "node/log_files.h"

namespace gangrun::launcher {

class LogFilters {
 public:
  LogFilters(boost::asio::io_context& io, std::vector<std::string> stdout_filters,
             std::vector<std::string> stderr_filters);
  ~LogFilters();
  bool empty() const { return stdout_filters_.empty() && stderr_filters_.empty(); }

  // A rank's process started writing `log_path` (again, after a restart: it appends).
  void Follow(const std::string& log_path);
  // Its writer exited: the rest of the file is read.
  void Finish(const std::string& log_path);
  void DrainAll();

 private:
  struct Rank {
    std::unique_ptr<node::LogFollower> follower;
    int stdout_fd = -1;
    int stderr_fd = -1;
  };
  void OnLines(Rank& rank, const std::string& lines);

  boost::asio::io_context& io_;
  std::vector<std::string> stdout_filters_;
  std::vector<std::string> stderr_filters_;
  std::map<std::string, Rank> ranks_;  // by log path
};

// "a,b" -> {"a", "b"} (empty items dropped).
std::vector<std::string> SplitFilters(const std::string& text);

}  // namespace gangrun::launcher
