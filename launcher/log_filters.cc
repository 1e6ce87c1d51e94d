#include "launcher/log_filters.h"

#include <unistd.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "common/logging.h"

namespace gangrun::launcher {
namespace {

std::string FilteredPath(const std::string& log_path, const char* stream) {
  std::string stem = log_path;
  if (absl::EndsWith(stem, ".log")) stem.resize(stem.size() - 4);
  return stem + ".filtered_" + stream + ".log";
}

int OpenFiltered(const std::string& path) {
  auto fd = common::OpenOwnFileForWriting(path, /*append=*/false);
  if (fd.ok()) return *fd;
  common::Logger("launcher")->warn("cannot write {}: {}", path, std::string(fd.status().message()));
  return -1;
}

bool Matches(absl::string_view line, const std::vector<std::string>& filters) {
  for (const auto& filter : filters) {
    if (absl::StrContains(line, filter)) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> SplitFilters(const std::string& text) {
  return absl::StrSplit(text, ',', absl::SkipEmpty());
}

LogFilters::LogFilters(boost::asio::io_context& io, std::vector<std::string> stdout_filters,
                       std::vector<std::string> stderr_filters)
    : io_(io),
      stdout_filters_(std::move(stdout_filters)),
      stderr_filters_(std::move(stderr_filters)) {}

LogFilters::~LogFilters() {
  for (auto& [path, rank] : ranks_) {
    rank.follower.reset();
    if (rank.stdout_fd >= 0) close(rank.stdout_fd);
    if (rank.stderr_fd >= 0) close(rank.stderr_fd);
  }
}

void LogFilters::Follow(const std::string& log_path) {
  if (empty()) return;
  auto [it, added] = ranks_.try_emplace(log_path);
  Rank& rank = it->second;
  if (added) {
    if (!stdout_filters_.empty()) rank.stdout_fd = OpenFiltered(FilteredPath(log_path, "stdout"));
    if (!stderr_filters_.empty()) rank.stderr_fd = OpenFiltered(FilteredPath(log_path, "stderr"));
    rank.follower = std::make_unique<node::LogFollower>(
        io_, [this, &rank](const std::string& lines) { OnLines(rank, lines); });
  }
  rank.follower->Follow(log_path, "");
}

void LogFilters::Finish(const std::string& log_path) {
  auto it = ranks_.find(log_path);
  if (it != ranks_.end()) it->second.follower->Finish(log_path);
}

void LogFilters::DrainAll() {
  for (auto& [path, rank] : ranks_) rank.follower->DrainAll();
}

void LogFilters::OnLines(Rank& rank, const std::string& lines) {
  std::string to_stdout, to_stderr;
  for (absl::string_view line : absl::StrSplit(lines, '\n', absl::SkipEmpty())) {
    if (Matches(line, stdout_filters_)) absl::StrAppend(&to_stdout, line, "\n");
    if (Matches(line, stderr_filters_)) absl::StrAppend(&to_stderr, line, "\n");
  }
  if (rank.stdout_fd >= 0) common::WriteAll(rank.stdout_fd, to_stdout);
  if (rank.stderr_fd >= 0) common::WriteAll(rank.stderr_fd, to_stderr);
}

}  // namespace gangrun::launcher
