#include "agent/job_logs.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <memory>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "node/log_files.h"

namespace gangrun::agent {

absl::StatusOr<std::string> JobLogDir(const v1::JobLogPlace& place, const std::string& log_root) {
  std::string dir = place.log_dir();
  if (dir.empty()) {
    const std::string& id = place.job_id();
    if (id.empty() || id == "." || id == ".." || id.find('/') != std::string::npos) {
      return absl::InvalidArgumentError("not a job id: '" + id.substr(0, 64) + "'");
    }
    if (log_root.empty()) {
      return absl::InvalidArgumentError(
          "the job gave no --log_dir and this agent has no --log_root");
    }
    dir = log_root + "/" + id;
  }
  // A relative directory is the launcher's: relative to the job's working directory.
  if (dir.front() != '/' && !place.cwd().empty()) dir = place.cwd() + "/" + dir;
  return dir;
}

absl::StatusOr<std::map<int, std::string>> FindRankLogs(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> listing(opendir(dir.c_str()), closedir);
  if (!listing) {
    const int error = errno;
    const std::string why = dir + ": " + std::strerror(error);
    return error == ENOENT ? absl::NotFoundError(why) : absl::UnavailableError(why);
  }
  std::map<int, std::string> ranks;
  while (const dirent* entry = readdir(listing.get())) {
    absl::string_view name = entry->d_name;
    if (!absl::ConsumeSuffix(&name, ".log")) continue;
    const size_t underscore = name.rfind('_');
    if (underscore == absl::string_view::npos) continue;
    const absl::string_view digits = name.substr(underscore + 1);
    int rank = -1;
    if (digits.empty() || digits.size() > 9 ||
        !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
        !absl::SimpleAtoi(digits, &rank)) {
      continue;
    }
    if (ranks.size() >= kMaxRankLogs && rank > ranks.rbegin()->first) continue;
    ranks[rank] = dir + "/" + entry->d_name;
    if (ranks.size() > kMaxRankLogs) ranks.erase(std::prev(ranks.end()));
  }
  return ranks;
}

const std::map<int, std::string>* JobLogServer::List(const v1::JobLogPlace& place,
                                                     std::string* error) {
  auto dir = JobLogDir(place, log_root_);
  auto ranks = dir.ok() ? FindRankLogs(*dir) : dir.status();
  if (!ranks.ok()) {
    *error = std::string(ranks.status().message());
    return nullptr;
  }
  listings_.insert_or_assign(place.job_id(), std::move(*ranks));
  listed_.push_back(place.job_id());
  while (listed_.size() > kListingsKept) {
    const std::string oldest = listed_.front();
    listed_.pop_front();
    if (std::find(listed_.begin(), listed_.end(), oldest) == listed_.end()) {
      listings_.erase(oldest);
    }
  }
  return &listings_.at(place.job_id());
}

v1::JobLogsFound JobLogServer::Find(const v1::JobLogPlace& place) {
  v1::JobLogsFound found;
  found.set_reader(place.reader());
  found.set_job_id(place.job_id());
  std::string error;
  if (const auto* ranks = List(place, &error)) {
    for (const auto& [rank, path] : *ranks) found.add_ranks(rank);
  } else {
    found.set_error(error);
  }
  return found;
}

v1::JobLogRead JobLogServer::Read(const v1::ReadJobLog& read) {
  v1::JobLogRead event;
  event.set_job_id(read.place().job_id());
  event.set_reader(read.place().reader());
  v1::LogRead& answer = *event.mutable_read();
  const int rank = read.read().rank();
  answer.set_request(read.read().request());
  answer.set_rank(rank);
  answer.set_offset(read.read().offset());
  answer.set_at_end(true);
  std::string path;
  auto known = listings_.find(read.place().job_id());
  if (known != listings_.end() && known->second.count(rank) > 0) {
    path = known->second.at(rank);
  } else if (const auto* ranks = List(read.place(), answer.mutable_error())) {
    if (auto it = ranks->find(rank); it != ranks->end()) path = it->second;
  }
  if (path.empty()) {
    if (answer.error().empty())
      answer.set_error("this agent has no log of rank " + std::to_string(rank));
    return event;
  }
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat file {};
  if (fd < 0 || fstat(fd, &file) != 0 || !S_ISREG(file.st_mode) ||
      (owner_ && file.st_uid != *owner_)) {
    if (fd >= 0) close(fd);
    answer.set_error("the log of rank " + std::to_string(rank) + " (" + path +
                     ") is not a file of the job's user");
    return event;
  }
  node::LogPiece piece =
      node::ReadLogPiece(fd, read.read().offset(), read.read().tail_lines(),
                         std::clamp<uint32_t>(read.read().max_bytes(), 1, kMaxPiece));
  close(fd);
  answer.set_data(std::move(piece.data));
  answer.set_next_offset(piece.next_offset);
  answer.set_at_end(piece.at_end);
  answer.set_error(piece.error);
  answer.set_running(false);  // its job has ended
  return event;
}

namespace {

std::chrono::system_clock::time_point ModifiedAt(const struct stat& st) {
  return std::chrono::system_clock::time_point(std::chrono::seconds(st.st_mtim.tv_sec) +
                                               std::chrono::nanoseconds(st.st_mtim.tv_nsec));
}

// The last time anything directly in `dir` (or `dir` itself) was written.
std::chrono::system_clock::time_point LastWritten(const std::string& dir, const struct stat& st) {
  auto last = ModifiedAt(st);
  std::unique_ptr<DIR, int (*)(DIR*)> listing(opendir(dir.c_str()), closedir);
  if (!listing) return last;
  while (const dirent* entry = readdir(listing.get())) {
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;  // ".." is the log root, written by every job
    struct stat file {};
    if (fstatat(dirfd(listing.get()), entry->d_name, &file, AT_SYMLINK_NOFOLLOW) == 0) {
      last = std::max(last, ModifiedAt(file));
    }
  }
  return last;
}

int RemoveEntry(const char* path, const struct stat*, int type, struct FTW*) {
  return (type == FTW_DP ? rmdir(path) : unlink(path)) == 0 ? 0 : -1;
}

}  // namespace

std::vector<std::string> PruneJobLogs(const std::string& log_root,
                                      std::chrono::system_clock::time_point before,
                                      const std::set<std::string>& keep, std::string* error) {
  std::vector<std::string> removed;
  std::unique_ptr<DIR, int (*)(DIR*)> listing(opendir(log_root.c_str()), closedir);
  if (!listing) return removed;  // nothing logged here yet
  while (const dirent* entry = readdir(listing.get())) {
    const std::string id = entry->d_name;
    if (id == "." || id == ".." || keep.count(id) > 0) continue;
    const std::string dir = log_root + "/" + id;
    struct stat st {};
    if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (LastWritten(dir, st) >= before) continue;
    // Depth first, never through a link, never onto another file system.
    if (nftw(dir.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0) {
      *error = dir + ": " + std::strerror(errno);
      continue;
    }
    removed.push_back(id);
    if (removed.size() >= kMaxPrunedPerPass) break;
  }
  return removed;
}

}  // namespace gangrun::agent
