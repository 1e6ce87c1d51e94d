#include "scheduler/telemetry.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>

#include "common/logging.h"
#include "common/status.h"

namespace gangrun::scheduler {
namespace {

// UTC, millisecond precision: 2026-11-29T10:00:00.123Z
std::string NowIso8601() {
  auto now = std::chrono::system_clock::now();
  std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[32];
  size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof(buf) - n, ".%03dZ", static_cast<int>(ms.count()));
  return buf;
}

}  // namespace

void DurationStat::Observe(common::Duration d) {
  last_seconds = std::chrono::duration<double>(d).count();
  sum_seconds += last_seconds;
  ++count;
}

absl::StatusOr<std::unique_ptr<EventLog>> EventLog::Open(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InvalidArgumentError("cannot open --event_log " + path + ": " +
                                      std::strerror(errno));
  }
  return std::unique_ptr<EventLog>(new EventLog(fd, path));
}

EventLog::~EventLog() { close(fd_); }

void EventLog::Write(const nlohmann::json& line) {
  const std::string text =
      line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  // Where the line starts: we are the file's only writer, so O_APPEND puts it at the end.
  const off_t start = lseek(fd_, 0, SEEK_END);
  size_t done = 0;
  int error = 0;
  while (done < text.size()) {
    ssize_t n = write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : EIO;
      break;
    }
    done += static_cast<size_t>(n);  // a short write: the next one says why, or finishes it
  }
  if (done == text.size()) return;
  if (done > 0 && start >= 0 && ftruncate(fd_, start) != 0) {
    common::Logger("scheduler")
        ->error("event log {}: cannot remove a partial line: {}", path_, std::strerror(errno));
  }
  if (lost_++ == 0) {
    common::Logger("scheduler")
        ->error("event log {}: cannot write ({}); events are being lost", path_,
                std::strerror(error));
  }
}

void Telemetry::Record(const std::string& event, nlohmann::json fields) {
  if (event == "generation_started") ++generations_;
  if (event == "restart_scheduled") ++restarts_;
  if (event == "worker_failed") ++failures_["worker_exit"];
  if (event == "node_lost") ++failures_[fields.value("cause", std::string("node_lost"))];
  if (event == "job_finished" && fields.value("outcome", std::string()) == "formation_failed") {
    ++failures_["formation_timeout"];
  }
  if (log_ == nullptr) return;
  nlohmann::json line = {{"ts", NowIso8601()}, {"job", job_id_}, {"event", event}};
  line.update(fields);
  log_->Write(line);
}

}  // namespace gangrun::scheduler
