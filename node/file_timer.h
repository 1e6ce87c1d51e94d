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

// The timers of one node. Bounded: at most kMaxTimers at once (more are refused).
class FileTimers {
 public:
  static constexpr size_t kMaxTimers = 65536;

  // Acquires or releases; false when refused (the table is full).
  bool Apply(const TimerRequest& request);
  // The expired timers at `wall_now`: one per pid (the one whose signal it gets), each pid's
  // timers cleared.
  std::vector<TimerRequest> TakeExpired(double wall_now);
  std::optional<double> NextExpiration() const;
  size_t size() const { return timers_.size(); }

 private:
  std::map<std::pair<pid_t, std::string>, TimerRequest> timers_;
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
