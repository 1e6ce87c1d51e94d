#include "node/kernel_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/logging.h"
#include "common/utf8.h"

namespace gangrun::node {

KernelLog::~KernelLog() {
  if (fd_ >= 0) close(fd_);
}

void KernelLog::Mark() {
  lines_.clear();
  partial_.clear();
  Open();
  // /dev/kmsg: SEEK_END goes past the records the kernel holds; a file: to its end.
  if (fd_ >= 0) lseek(fd_, 0, SEEK_END);
}

void KernelLog::Open() {
  if (fd_ >= 0 || path_.empty()) return;
  fd_ = open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd_ < 0) {
    if (!warned_) {
      warned_ = true;
      common::Logger("node")->debug(
          "the kernel's log {} cannot be read ({}): a failure's "
          "evidence will not include it",
          path_, std::strerror(errno));
    }
    return;
  }
  struct stat st {};
  kmsg_ = fstat(fd_, &st) == 0 && S_ISCHR(st.st_mode);
}

std::vector<std::string> KernelLog::Since() {
  if (fd_ >= 0) kmsg_ ? ReadKmsg() : ReadText();
  return {lines_.begin(), lines_.end()};
}

std::string KernelLog::KmsgMessage(std::string_view record) {
  // "PRI,SEQ,USEC,FLAGS[,...];MESSAGE\n" then " KEY=VALUE\n" lines (the record's dictionary).
  const size_t semicolon = record.find(';');
  if (semicolon == std::string_view::npos) return "";
  const std::string_view header = record.substr(0, semicolon);
  int priority = 0;
  size_t i = 0;
  for (; i < header.size() && header[i] >= '0' && header[i] <= '9' && i < 9; ++i) {
    priority = priority * 10 + (header[i] - '0');
  }
  if (i == 0 || i == header.size() || header[i] != ',') return "";
  // The syslog level is the low 3 bits (facility above): 0 emerg .. 4 warning .. 7 debug.
  constexpr int kWarning = 4;
  if ((priority & 7) > kWarning) return "";
  std::string_view message = record.substr(semicolon + 1);
  message = message.substr(0, message.find('\n'));
  return std::string(message);
}

void KernelLog::Keep(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  if (line.empty()) return;
  line = line.substr(0, kMaxLineBytes);
  lines_.push_back(common::ValidUtf8(absl::string_view(line.data(), line.size())));
  if (lines_.size() > kMaxLines) lines_.pop_front();
}

void KernelLog::ReadKmsg() {
  // One record per read; a buffer smaller than a record fails with EINVAL, so it holds the
  // largest (the kernel's CONSOLE_EXT_LOG_MAX, 8 KiB).
  char record[8192];
  size_t read_bytes = 0;
  int overruns = 0;
  while (read_bytes < kMaxReadBytes) {
    const ssize_t n = read(fd_, record, sizeof(record));
    if (n > 0) {
      read_bytes += static_cast<size_t>(n);
      Keep(KmsgMessage(std::string_view(record, static_cast<size_t>(n))));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // EPIPE: records were overwritten before we read them; the next read goes on from the
    // oldest one left.
    if (n < 0 && errno == EPIPE && ++overruns <= 4) continue;
    return;  // EAGAIN: nothing more now
  }
}

void KernelLog::ReadText() {
  char buffer[65536];
  size_t read_bytes = 0;
  while (read_bytes < kMaxReadBytes) {
    const ssize_t n = read(fd_, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    read_bytes += static_cast<size_t>(n);
    std::string_view data(buffer, static_cast<size_t>(n));
    for (size_t newline; (newline = data.find('\n')) != std::string_view::npos;) {
      partial_.append(data.substr(0, newline));
      Keep(partial_);
      partial_.clear();
      data.remove_prefix(newline + 1);
    }
    // A line without its newline yet, bounded like every kept line.
    partial_.append(data.substr(0, kMaxLineBytes - std::min(kMaxLineBytes, partial_.size())));
  }
}

}  // namespace gangrun::node
