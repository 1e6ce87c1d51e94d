#include "node/file_timer.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace gangrun::node {

absl::StatusOr<TimerRequest> ParseTimerRequest(absl::string_view line) {
  nlohmann::json json =
      nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError("not a JSON object");
  }
  auto field = [&](const char* name) -> const nlohmann::json* {
    auto it = json.find(name);
    return it == json.end() ? nullptr : &*it;
  };
  const auto* pid = field("pid");
  const auto* scope = field("scope_id");
  const auto* expiration = field("expiration_time");
  const auto* signal = field("signal");
  if (pid == nullptr || !pid->is_number_integer() || *pid <= 0 || *pid > INT_MAX) {
    return absl::InvalidArgumentError("'pid' must be a positive integer");
  }
  if (scope == nullptr || !scope->is_string() || scope->get<std::string>().size() > 1024) {
    return absl::InvalidArgumentError("'scope_id' must be a string of at most 1024 bytes");
  }
  if (expiration == nullptr || !expiration->is_number() ||
      !std::isfinite(expiration->get<double>())) {
    return absl::InvalidArgumentError("'expiration_time' must be a number");
  }
  TimerRequest request;
  request.pid = pid->get<pid_t>();
  request.scope = scope->get<std::string>();
  request.expiration = expiration->get<double>();
  if (signal != nullptr) {
    if (!signal->is_number_integer() || *signal < 0 || *signal >= 65) {
      return absl::InvalidArgumentError("'signal' must be a signal number");
    }
    request.signal = signal->get<int>();
  }
  return request;
}

std::optional<uint64_t> FileTimers::ProcessStartTime(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(paren + 2));  // field 3 on
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) {
      uint64_t start = 0;
      if (absl::SimpleAtoi(field, &start)) return start;
    }
  }
  return std::nullopt;
}

void FileTimers::Erase(std::map<Key, TimerRequest>::iterator it) {
  by_expiration_.erase({it->second.expiration, it->first});
  const pid_t pid = it->first.first;
  timers_.erase(it);
  auto next = timers_.lower_bound({pid, ""});
  if (next == timers_.end() || next->first.first != pid) start_times_.erase(pid);
}

bool FileTimers::Apply(const TimerRequest& request) {
  Key key(request.pid, request.scope);
  auto it = timers_.find(key);
  if (request.expiration < 0) {
    if (it != timers_.end()) Erase(it);
    return true;
  }
  if (it == timers_.end()) {
    if (timers_.size() >= kMaxTimers) return false;
    if (start_times_.count(request.pid) == 0) {
      auto start = start_time_of_(request.pid);
      if (!start) return false;  // already gone: nothing to watch
      start_times_[request.pid] = *start;
    }
    it = timers_.emplace(key, request).first;
  } else {
    by_expiration_.erase({it->second.expiration, key});
    it->second = request;
  }
  by_expiration_.insert({request.expiration, key});
  return true;
}

std::vector<TimerRequest> FileTimers::TakeExpired(double wall_now) {
  std::set<pid_t> pids;
  for (auto it = by_expiration_.begin(); it != by_expiration_.end() && it->first <= wall_now;
       ++it) {
    pids.insert(it->second.first);
  }
  std::vector<TimerRequest> taken;
  for (pid_t pid : pids) {
    std::vector<TimerRequest> expired;
    for (auto it = timers_.lower_bound({pid, ""}); it != timers_.end() && it->first.first == pid;
         ++it) {
      if (it->second.expiration <= wall_now) expired.push_back(it->second);
    }
    std::sort(expired.begin(), expired.end(),
              [](const auto& a, const auto& b) { return a.expiration < b.expiration; });
    auto with_signal = std::find_if(expired.begin(), expired.end(),
                                    [](const TimerRequest& t) { return t.signal > 0; });
    // The pid still names the process that set the timers: signal it.
    const auto start = start_time_of_(pid);
    const bool same_process = start && start_times_.count(pid) && *start == start_times_[pid];
    if (same_process)
      taken.push_back(with_signal != expired.end() ? *with_signal : expired.front());
    ClearPid(pid);
  }
  return taken;
}

std::optional<double> FileTimers::NextExpiration() const {
  if (by_expiration_.empty()) return std::nullopt;
  return by_expiration_.begin()->first;
}

void FileTimers::ClearPid(pid_t pid) {
  for (auto it = timers_.lower_bound({pid, ""}); it != timers_.end() && it->first.first == pid;) {
    auto next = std::next(it);
    Erase(it);
    it = next;
  }
}

void FileTimers::Clear() {
  timers_.clear();
  by_expiration_.clear();
  start_times_.clear();
}

absl::StatusOr<std::unique_ptr<FifoLineReader>> FifoLineReader::Open(
    boost::asio::io_context& io, const std::string& path,
    std::function<void(absl::string_view)> on_line) {
  unlink(path.c_str());
  if (mkfifo(path.c_str(), 0600) != 0) {
    return common::ErrnoToStatus(errno, "cannot create the timer pipe " + path);
  }
  int fd = open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return common::ErrnoToStatus(errno, "cannot open the timer pipe " + path);
  return std::unique_ptr<FifoLineReader>(new FifoLineReader(io, fd, path, std::move(on_line)));
}

FifoLineReader::FifoLineReader(boost::asio::io_context& io, int fd, std::string path,
                               std::function<void(absl::string_view)> on_line)
    : fifo_(io, fd), path_(std::move(path)), on_line_(std::move(on_line)), buffer_(PIPE_BUF) {
  Read();
}

FifoLineReader::~FifoLineReader() {
  *alive_ = false;
  boost::system::error_code ignored;
  fifo_.close(ignored);
  unlink(path_.c_str());
}

void FifoLineReader::Read() {
  fifo_.async_read_some(boost::asio::buffer(buffer_),
                        [this, alive = alive_](boost::system::error_code ec, size_t n) {
                          if (!*alive || ec) return;
                          absl::string_view data(buffer_.data(), n);
                          while (!data.empty()) {
                            const size_t newline = data.find('\n');
                            const absl::string_view piece = data.substr(0, newline);
                            if (!skipping_) partial_.append(piece.data(), piece.size());
                            if (partial_.size() > PIPE_BUF) {
                              partial_.clear();
                              skipping_ = true;
                              on_line_("");  // reported as malformed
                            }
                            if (newline == absl::string_view::npos) break;
                            if (!skipping_ && !partial_.empty()) on_line_(partial_);
                            if (!*alive) return;
                            partial_.clear();
                            skipping_ = false;
                            data.remove_prefix(newline + 1);
                          }
                          Read();
                        });
}

}  // namespace gangrun::node
