#include "node/file_timer.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>

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

bool FileTimers::Apply(const TimerRequest& request) {
  auto key = std::make_pair(request.pid, request.scope);
  if (request.expiration < 0) {
    timers_.erase(key);
    return true;
  }
  if (timers_.size() >= kMaxTimers && timers_.find(key) == timers_.end()) return false;
  timers_[key] = request;
  return true;
}

std::vector<TimerRequest> FileTimers::TakeExpired(double wall_now) {
  std::map<pid_t, std::vector<TimerRequest>> expired;
  for (const auto& [key, timer] : timers_) {
    if (timer.expiration <= wall_now) expired[key.first].push_back(timer);
  }
  std::vector<TimerRequest> taken;
  for (auto& [pid, timers] : expired) {
    std::sort(timers.begin(), timers.end(),
              [](const auto& a, const auto& b) { return a.expiration < b.expiration; });
    auto with_signal = std::find_if(timers.begin(), timers.end(),
                                    [](const TimerRequest& t) { return t.signal > 0; });
    taken.push_back(with_signal != timers.end() ? *with_signal : timers.front());
    for (auto it = timers_.lower_bound({pid, ""}); it != timers_.end() && it->first.first == pid;) {
      it = timers_.erase(it);
    }
  }
  return taken;
}

std::optional<double> FileTimers::NextExpiration() const {
  std::optional<double> next;
  for (const auto& [key, timer] : timers_) {
    if (!next || timer.expiration < *next) next = timer.expiration;
  }
  return next;
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
