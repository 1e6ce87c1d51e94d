#include "common/console.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>

namespace gangrun::common {
namespace {

size_t CountLines(std::string_view text) {
  size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  if (!text.empty() && text.back() != '\n') ++lines;
  return lines;
}

}  // namespace

ConsoleStream::ConsoleStream(int fd, std::string name, size_t max_buffered)
    : original_fd_(fd), name_(std::move(name)), max_buffered_(max_buffered) {
  MutexLock lock(&mu_);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    mode_ = Mode::kGone;  // nothing to write to: drop quietly
    return;
  }
  fd_ = fd;
  if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) {
    mode_ = Mode::kDirect;  // a file never waits for a reader
    return;
  }
  if (S_ISSOCK(st.st_mode)) {
    mode_ = Mode::kSocket;
    return;
  }
  // A pipe, FIFO or terminal: a description of our own, non-blocking, so that the flag does
  // not leak to whoever shares the original one (the shell, for a terminal).
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  int own = open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (own >= 0) {
    mode_ = Mode::kNonBlocking;
    fd_ = own;
    own_fd_ = true;
  } else if (errno == ENXIO) {
    mode_ = Mode::kGone;  // a FIFO whose reader is already gone
  } else {
    mode_ = Mode::kDirect;  // no /proc: fall back to plain writes
  }
}

ConsoleStream::~ConsoleStream() {
  MutexLock lock(&mu_);
  waiter_.reset();
  if (own_fd_) close(fd_);
}

void ConsoleStream::Write(std::string_view text) {
  std::string notice;
  {
    MutexLock lock(&mu_);
    if (text.empty()) return;
    if (mode_ == Mode::kGone || buffer_.size() + text.size() > max_buffered_) {
      DropLocked(text);
    } else {
      buffer_.append(text.data(), text.size());
    }
    PumpLocked();
    notice = std::exchange(gone_notice_, std::string());
  }
  if (!notice.empty() && other_ != nullptr) other_->Write(notice);
}

ssize_t ConsoleStream::WriteSomeLocked(const char* data, size_t size) {
  if (mode_ == Mode::kSocket) return send(fd_, data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
  return write(fd_, data, size);
}

void ConsoleStream::PumpLocked() {
  for (int round = 0; round < 2; ++round) {
    size_t done = 0;
    while (mode_ != Mode::kGone && done < buffer_.size()) {
      ssize_t n = WriteSomeLocked(buffer_.data() + done, buffer_.size() - done);
      if (n > 0) {
        done += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && errno == EAGAIN) {
        buffer_.erase(0, done);
        ArmLocked();
        return;
      } else {
        buffer_.erase(0, done);
        MarkGoneLocked(n < 0 ? errno : EIO);
        return;
      }
    }
    buffer_.clear();
    // Caught up: say once what could not be shown meanwhile.
    if (unreported_lines_ == 0 || mode_ == Mode::kGone) return;
    buffer_ = "gangrun: " + std::to_string(unreported_lines_) + " line(s) were not shown on " +
              name_ + ": it did not keep up (the worker logs have every line)\n";
    unreported_lines_ = 0;
  }
}

void ConsoleStream::DropLocked(std::string_view text) {
  const size_t lines = CountLines(text);
  dropped_lines_ += lines;
  unreported_lines_ += lines;
}

void ConsoleStream::MarkGoneLocked(int err) {
  mode_ = Mode::kGone;
  DropLocked(buffer_);
  buffer_.clear();
  waiter_.reset();
  gone_notice_ = "gangrun: " + name_ + " is gone (" + std::strerror(err) +
                 "); the job goes on and the worker logs have every line\n";
}

void ConsoleStream::ArmLocked() {
  if (io_ == nullptr || armed_ || !waiter_) return;
  armed_ = true;
  // async_wait must run on the loop's thread; Write may be called from any thread.
  boost::asio::post(*io_, [this] {
    MutexLock lock(&mu_);
    if (!waiter_) {
      armed_ = false;
      return;
    }
    waiter_->async_wait(boost::asio::posix::stream_descriptor::wait_write,
                        [this](const boost::system::error_code& ec) {
                          if (!ec) OnWritable();
                        });
  });
}

void ConsoleStream::OnWritable() {
  std::string notice;
  {
    MutexLock lock(&mu_);
    armed_ = false;
    PumpLocked();
    notice = std::exchange(gone_notice_, std::string());
  }
  if (!notice.empty() && other_ != nullptr) other_->Write(notice);
}

void ConsoleStream::Attach(boost::asio::io_context& io) {
  MutexLock lock(&mu_);
  if (mode_ == Mode::kDirect || mode_ == Mode::kGone) return;  // nothing ever waits
  int waitable = dup(fd_);  // asio owns (and closes) what it watches
  if (waitable < 0) return;
  fcntl(waitable, F_SETFD, FD_CLOEXEC);
  io_ = &io;
  armed_ = false;
  waiter_ = std::make_unique<boost::asio::posix::stream_descriptor>(io, waitable);
  if (!buffer_.empty()) ArmLocked();
}

void ConsoleStream::Detach() {
  MutexLock lock(&mu_);
  if (waiter_) {
    boost::system::error_code ignored;
    waiter_->cancel(ignored);
    waiter_.reset();
  }
  io_ = nullptr;
  armed_ = false;
}

bool ConsoleStream::Flush(std::chrono::steady_clock::time_point deadline) {
  std::string notice;
  bool flushed;
  {
    MutexLock lock(&mu_);
    PumpLocked();
    while (mode_ != Mode::kGone && !buffer_.empty()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLOUT, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
      PumpLocked();
    }
    flushed = buffer_.empty();
    if (!flushed) {
      DropLocked(buffer_);
      buffer_.clear();
    }
    notice = std::exchange(gone_notice_, std::string());
  }
  if (!notice.empty() && other_ != nullptr) other_->Write(notice);
  return flushed;
}

uint64_t ConsoleStream::dropped_lines() const {
  MutexLock lock(&mu_);
  return dropped_lines_;
}

bool ConsoleStream::gone() const {
  MutexLock lock(&mu_);
  return mode_ == Mode::kGone;
}

namespace {

struct Consoles {
  Consoles() : out(1, "stdout"), err(2, "stderr") {
    out.SetPeer(&err);
    err.SetPeer(&out);
  }
  ConsoleStream out;
  ConsoleStream err;
};

Consoles& TheConsoles() {
  static Consoles* consoles = new Consoles();  // never destroyed: loggers use it until exit
  return *consoles;
}

}  // namespace

ConsoleStream& Stdout() { return TheConsoles().out; }
ConsoleStream& Stderr() { return TheConsoles().err; }

ConsoleScope::ConsoleScope(boost::asio::io_context& io) {
  Stdout().Attach(io);
  Stderr().Attach(io);
}

ConsoleScope::~ConsoleScope() {
  Stdout().Detach();
  Stderr().Detach();
}

void FlushConsoles(std::chrono::steady_clock::duration limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  Stdout().Flush(deadline);
  Stderr().Flush(deadline);
}

}  // namespace gangrun::common
