#pragma once
// Worker log files, read back: the last lines of a log (for the root-cause report) and a
// follower that streams new lines of selected logs to the console (--tail_worker_log).
//
// Workers write their logs directly (the file is their stdout and stderr), so a log is
// complete even if the worker or the launcher crashes. The follower is driven by inotify
// on the launcher's io_context; it never polls. Runs on the io_context's single thread.
//
// Bounded however fast a worker writes: a file is read kChunkBytes at a time, and after each
// chunk the follower yields to the loop (the next chunk is posted), so heartbeats and exits
// are never starved and memory stays flat; a line longer than kMaxLineBytes (a worker that
// writes megabytes without a newline) is shown in pieces of that size. Whether the console
// keeps up is the console's business (common/console.h drops what it cannot take).
//
// Watches start kWatchDelay after the first Follow, not at once: a process that destroyed
// inotify marks waits, when it closes its inotify descriptor (or exits), for the kernel's
// grace period of their destruction (fsnotify_wait_marks_destroyed; 0.1-17 ms measured here,
// bench/README.md). A job whose workers all end within the delay creates no mark and waits
// for none; their logs are read to the end as each writer exits (Finish), as before. A
// worker that runs on gets its watch when the delay is over, and what it wrote until then
// is shown at that moment: its first lines can reach the console up to kWatchDelay late.

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gangrun::node {

// The last `count` lines of the file at `path` (fewer if it is shorter; empty if unreadable).
// Reads at most kMaxTailBytes from the end; longer lines are cut to kMaxTailLineBytes. The lines
// are text for messages: what is not UTF-8 in them becomes U+FFFD (common/utf8.h).
inline constexpr size_t kMaxTailBytes = 64 * 1024;
inline constexpr size_t kMaxTailLineBytes = 2048;
std::vector<std::string> ReadLastLines(const std::string& path, size_t count);

// A piece of a log for `gangrun logs`: up to `max_bytes` from `offset`, or, when `offset` is
// negative, from the start of the file or (tail_lines > 0) from the start of its last
// `tail_lines` lines. `at_end`: nothing more in the file now.
struct LogPiece {
  std::string data;
  int64_t next_offset = 0;
  bool at_end = false;
  std::string error;  // "" = read
};
LogPiece ReadLogPiece(const std::string& path, int64_t offset, int64_t tail_lines,
                      size_t max_bytes);
// The same from a file open for reading (the caller keeps and closes it).
LogPiece ReadLogPiece(int fd, int64_t offset, int64_t tail_lines, size_t max_bytes);

class LogFollower {
 public:
  static constexpr size_t kChunkBytes = 64 * 1024;
  static constexpr size_t kMaxLineBytes = 16 * 1024;
  static constexpr std::chrono::milliseconds kWatchDelay{100};

  // `write` gets whole lines, each already prefixed and ending in '\n'.
  LogFollower(boost::asio::io_context& io, std::function<void(const std::string&)> write);
  ~LogFollower();

  // Starts streaming `path` with `prefix` before every line, from `offset`, or (-1) from
  // where the last follow of the same path stopped (a restarted worker appends).
  void Follow(const std::string& path, const std::string& prefix, off_t offset = -1);
  // The writer of `path` has exited: read the file to its end (chunk by chunk, from the
  // loop), flush its unfinished line and stop watching it.
  void Finish(const std::string& path);
  // Reads every followed file to its end and flushes unfinished lines (call at the end).
  void DrainAll();

 private:
  struct File {
    std::string path;
    std::string prefix;
    int fd = -1;
    off_t offset = 0;
    std::string partial;
    bool scheduled = false;  // a ReadStep is posted
    bool finishing = false;  // the writer exited: stop at the end of the file
  };
  void ReadEvents();
  // The delay is over: every file followed so far (and every later one) gets its watch.
  void WatchAll();
  // Reads one chunk; true when there may be more to read right away.
  bool ReadChunk(File& file);
  void Schedule(int key);
  void ReadStep(int key);
  // Reads `key`'s file to its end now, flushes its partial line and forgets it.
  void Close(int key);

  boost::asio::io_context& io_;
  std::function<void(const std::string&)> write_;
  int inotify_fd_ = -1;
  std::unique_ptr<boost::asio::posix::stream_descriptor> events_;
  // Uninitialised (new char[]): only the pages the kernel writes events to are touched.
  static constexpr size_t kEventBufferBytes = 64 * 1024;
  std::unique_ptr<char[]> event_buffer_;
  boost::asio::steady_timer watch_timer_;
  bool timer_armed_ = false;
  bool watching_ = false;      // the delay is over: Follow adds its watch at once
  std::map<int, File> files_;  // by inotify watch descriptor
  int next_fake_key_ = -1;     // files followed without inotify get negative keys
  std::map<std::string, off_t> finished_offsets_;  // where finished follows stopped
};

}  // namespace gangrun::node
