#pragma once
// Console output that can never stall the process writing it.
//
// The console is a view; the worker logs are the record. A terminal stopped with Ctrl-S, a
// pipe to a slow reader or a full pty must not block the event loop (heartbeats would stop
// and the node would be declared lost), and a reader that goes away (`gangrun ... | head`)
// must not kill the launcher with SIGPIPE. So each ConsoleStream:
//  - writes without blocking: a pipe, FIFO or terminal is reopened through /proc/self/fd
//    with O_NONBLOCK (a description of our own, so the shell sharing the terminal is not
//    affected); a socket is written with MSG_DONTWAIT; a regular file is written directly
//    (it never waits for a reader);
//  - keeps at most `max_buffered` bytes waiting; what does not fit is dropped, whole, and
//    counted, and once the console catches up it says so in one line with the count;
//  - on EPIPE (or any other write error) stops writing for good, says so once on the other
//    stream, and keeps counting what it drops.
// Writes may come from any thread (spdlog sinks, gRPC threads); a mutex guards the buffer.
// Once Attach()ed to an io_context, a console that would block is flushed from that loop when
// its descriptor becomes writable; before that (and in short-lived commands) the next Write or
// Flush retries.

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"

namespace gangrun::common {

class ConsoleStream {
 public:
  static constexpr size_t kDefaultMaxBuffered = 1 << 20;

  // `fd` stays open and owned by the caller (it is 1 or 2 in practice); `name` is "stdout" or
  // "stderr" for messages.
  ConsoleStream(int fd, std::string name, size_t max_buffered = kDefaultMaxBuffered);
  ~ConsoleStream();
  ConsoleStream(const ConsoleStream&) = delete;
  ConsoleStream& operator=(const ConsoleStream&) = delete;

  // The stream that gets the one line saying this one is gone (set once, before use).
  void SetPeer(ConsoleStream* other) { other_ = other; }
  // Appends `text` (whole lines) if it fits, else drops it and counts its lines.
  void Write(std::string_view text);
  // From now on, output that would block is flushed from `io` when the console is writable.
  // Detach() before `io` is destroyed.
  void Attach(boost::asio::io_context& io);
  void Detach();
  // Writes what is waiting, for at most until `deadline`; false if something is left (it is
  // then dropped and counted).
  bool Flush(std::chrono::steady_clock::time_point deadline);

  uint64_t dropped_lines() const;
  bool gone() const;

 private:
  enum class Mode { kNonBlocking, kSocket, kDirect, kGone };
  // Writes as much of buffer_ as the console takes now; arms the wait for the rest.
  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ssize_t WriteSomeLocked(const char* data, size_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkGoneLocked(int err) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropLocked(std::string_view text) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ArmLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnWritable();

  const int original_fd_;
  const std::string name_;
  const size_t max_buffered_;
  ConsoleStream* other_ = nullptr;
  mutable Mutex mu_;
  Mode mode_ ABSL_GUARDED_BY(mu_) = Mode::kDirect;
  int fd_ ABSL_GUARDED_BY(mu_) = -1;  // what we write to (our own reopened fd, or original_fd_)
  bool own_fd_ ABSL_GUARDED_BY(mu_) = false;
  std::string buffer_ ABSL_GUARDED_BY(mu_);
  uint64_t dropped_lines_ ABSL_GUARDED_BY(mu_) = 0;     // ever
  uint64_t unreported_lines_ ABSL_GUARDED_BY(mu_) = 0;  // since the last notice
  boost::asio::io_context* io_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::unique_ptr<boost::asio::posix::stream_descriptor> waiter_ ABSL_GUARDED_BY(mu_);
  bool armed_ ABSL_GUARDED_BY(mu_) = false;
  std::string gone_notice_ ABSL_GUARDED_BY(mu_);  // sent to other_ once mu_ is released
};

// The process's stdout and stderr (created on first use).
ConsoleStream& Stdout();
ConsoleStream& Stderr();

// Attaches both to `io` for the scope of this object (an event loop's lifetime).
class ConsoleScope {
 public:
  explicit ConsoleScope(boost::asio::io_context& io);
  ~ConsoleScope();
};

// How long a process waits at its end for a console that does not take its last lines.
inline constexpr std::chrono::seconds kFinalConsoleFlush{5};

// Flushes both streams, for at most `limit` in all (what is left is dropped and counted).
void FlushConsoles(std::chrono::steady_clock::duration limit = kFinalConsoleFlush);

}  // namespace gangrun::common
