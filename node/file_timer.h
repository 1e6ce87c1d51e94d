#pragma once
// torch's watchdog, served natively: TORCHELASTIC_TIMER_FILE names a FIFO in the node's
// runtime directory that speaks torch.distributed.elastic.timer's FileTimer protocol, so
// unchanged PyTorch code using `timer.expires(after=..., scope=...)` with a FileTimerClient
// is enforced by gangrun as it would be by torchrun's FileTimerServer.
//
// The protocol: one JSON object per line (at most PIPE_BUF bytes, so one write(2) each):
//   {"version": 1, "pid": 1234, "scope_id": "step", "expiration_time": 1764500000.5,
//    "signal": 9}
// expiration_time is absolute wall-clock seconds; a negative one releases the (pid, scope)
// timer. When timers of a pid expire, the pid gets the signal of its earliest expired timer
// that has one (signal <= 0: nobody is signalled) and all of its timers are cleared — torch's
// rules. The node signals only processes of its own workers' trees, reports which rank and
// scope expired, and the job ends as hung.

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gangrun::node {

struct TimerRequest {
  pid_t pid = 0;
  std::string scope;
  double expiration = 0;  // wall-clock seconds; < 0 = release
  int signal = 0;
};

// One line of the protocol; InvalidArgument says what is wrong.
absl::StatusOr<TimerRequest> ParseTimerRequest(absl::string_view line);

// The timers of one node, kept in expiration order: a request, an expiry and the next
// deadline cost O(log n) however many timers there are. Bounded: at most kMaxTimers at once
// (more are refused).
//
// A timer belongs to a process, not to a pid: the process's start time is taken when its
// first timer is set, and a timer whose pid has since been given to another process (the
// first one exited, a later worker got its number) never fires. A node also clears a worker's
// timers when it exits, and all of them at every generation.
class FileTimers {
 public:
  static constexpr size_t kMaxTimers = 65536;
  // The start time of the process `pid` (as /proc/<pid>/stat says it); nullopt when gone.
  using StartTimeOf = std::function<std::optional<uint64_t>(pid_t pid)>;

  // The real one: /proc/<pid>/stat's field 22.
  static std::optional<uint64_t> ProcessStartTime(pid_t pid);

  explicit FileTimers(StartTimeOf start_time_of = ProcessStartTime)
      : start_time_of_(std::move(start_time_of)) {}

  // Acquires or releases; false when refused (the table is full, or the process is gone).
  bool Apply(const TimerRequest& request);
  // The expired timers at `wall_now`: one per process (the one whose signal it gets), each
  // process's timers cleared; timers of a pid that another process now has are dropped.
  std::vector<TimerRequest> TakeExpired(double wall_now);
  std::optional<double> NextExpiration() const;
  // Drops the timers of `pid` (it exited), or all of them (a new generation).
  void ClearPid(pid_t pid);
  void Clear();
  size_t size() const { return timers_.size(); }

 private:
  using Key = std::pair<pid_t, std::string>;
  void Erase(std::map<Key, TimerRequest>::iterator it);

  StartTimeOf start_time_of_;
  std::map<Key, TimerRequest> timers_;
  std::set<std::pair<double, Key>> by_expiration_;
  std::map<pid_t, uint64_t> start_times_;  // of the pids that hold timers
};

// Reads the FIFO's lines on the io_context. Holds the FIFO open for reading and writing, so
// a client's non-blocking open always finds a reader and the reader never sees end-of-file.
// A line longer than PIPE_BUF is skipped whole and reported as malformed.
class FifoLineReader {
 public:
  static absl::StatusOr<std::unique_ptr<FifoLineReader>> Open(
      boost::asio::io_context& io, const std::string& path,
      std::function<void(absl::string_view line)> on_line);
  ~FifoLineReader();

 private:
  FifoLineReader(boost::asio::io_context& io, int fd, std::string path,
                 std::function<void(absl::string_view)> on_line);
  void Read();

  boost::asio::posix::stream_descriptor fifo_;
  std::string path_;
  std::function<void(absl::string_view)> on_line_;
  std::string partial_;
  bool skipping_ = false;  // inside a line that was too long
  std::vector<char> buffer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace gangrun::node
