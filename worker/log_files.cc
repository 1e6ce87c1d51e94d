#include "worker/log_files.h"

#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <deque>

#include "common/logging.h"

namespace gangrun::worker {

std::vector<std::string> ReadLastLines(const std::string& path, size_t count) {
  std::vector<std::string> lines;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || count == 0) {
    if (fd >= 0) close(fd);
    return lines;
  }
  struct stat st;
  fstat(fd, &st);
  // Read backwards in blocks until we hold count+1 newlines or the whole file.
  constexpr off_t kBlock = 8192;
  std::string tail;
  off_t pos = st.st_size;
  while (pos > 0 && static_cast<size_t>(std::count(tail.begin(), tail.end(), '\n')) <= count) {
    off_t start = std::max<off_t>(0, pos - kBlock);
    std::string block(static_cast<size_t>(pos - start), '\0');
    ssize_t n = pread(fd, block.data(), block.size(), start);
    if (n <= 0) break;
    block.resize(static_cast<size_t>(n));
    tail = block + tail;
    pos = start;
  }
  close(fd);
  std::deque<std::string> kept;
  size_t begin = 0;
  while (begin < tail.size()) {
    size_t end = tail.find('\n', begin);
    if (end == std::string::npos) end = tail.size();
    kept.push_back(tail.substr(begin, end - begin));
    if (kept.size() > count) kept.pop_front();
    begin = end + 1;
  }
  // The first line may be cut by the block boundary; drop it unless we read the whole file.
  if (pos > 0 && kept.size() > count) kept.pop_front();
  while (kept.size() > count) kept.pop_front();
  return {kept.begin(), kept.end()};
}

LogFollower::LogFollower(boost::asio::io_context& io, std::function<void(const std::string&)> write)
    : write_(std::move(write)), event_buffer_(64 * 1024) {
  inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_fd_ < 0) {
    common::Logger("node")->warn("inotify unavailable; worker logs are shown at the end only");
    return;
  }
  events_ = std::make_unique<boost::asio::posix::stream_descriptor>(io, inotify_fd_);
  ReadEvents();
}

LogFollower::~LogFollower() {
  if (events_) {
    boost::system::error_code ec;
    events_->close(ec);
  }
  for (auto& [wd, file] : files_) close(file.fd);
}

void LogFollower::Follow(const std::string& path, const std::string& prefix, off_t offset) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    common::Logger("node")->warn("cannot follow {}: {}", path, strerror(errno));
    return;
  }
  static int fake_wd = -1;  // files followed without inotify get negative keys
  int wd = inotify_fd_ >= 0 ? inotify_add_watch(inotify_fd_, path.c_str(), IN_MODIFY) : -1;
  if (wd < 0) wd = fake_wd--;
  if (offset < 0) {
    auto it = finished_offsets_.find(path);
    offset = it == finished_offsets_.end() ? 0 : it->second;
  }
  File& file = files_[wd];
  if (file.fd >= 0) close(file.fd);  // the same file again (a new generation)
  file = File{path, prefix, fd, offset, {}};
  Drain(file, false);  // whatever was written before the watch existed
}

void LogFollower::ReadEvents() {
  events_->async_read_some(
      boost::asio::buffer(event_buffer_), [this](const boost::system::error_code& ec, size_t n) {
        if (ec) return;
        for (size_t i = 0; i + sizeof(inotify_event) <= n;) {
          auto* event = reinterpret_cast<inotify_event*>(event_buffer_.data() + i);
          auto it = files_.find(event->wd);
          if (it != files_.end()) Drain(it->second, false);
          i += sizeof(inotify_event) + event->len;
        }
        ReadEvents();
      });
}

void LogFollower::Finish(const std::string& path) {
  for (auto it = files_.begin(); it != files_.end(); ++it) {
    if (it->second.path != path) continue;
    Drain(it->second, true);
    // Dropping watches as writers end keeps the final close of the inotify descriptor cheap
    // (the kernel destroys marks asynchronously; a close that must destroy them waits).
    if (it->first >= 0) inotify_rm_watch(inotify_fd_, it->first);
    finished_offsets_[path] = it->second.offset;
    close(it->second.fd);
    files_.erase(it);
    return;
  }
}

void LogFollower::DrainAll() {
  for (auto& [wd, file] : files_) Drain(file, true);
}

void LogFollower::Drain(File& file, bool final) {
  char buffer[65536];
  std::string out;
  while (true) {
    ssize_t n = pread(file.fd, buffer, sizeof(buffer), file.offset);
    if (n <= 0) break;
    file.offset += n;
    file.partial.append(buffer, static_cast<size_t>(n));
    size_t begin = 0;
    for (size_t nl; (nl = file.partial.find('\n', begin)) != std::string::npos; begin = nl + 1) {
      out += file.prefix;
      out.append(file.partial, begin, nl - begin + 1);
    }
    file.partial.erase(0, begin);
  }
  if (final && !file.partial.empty()) {
    out += file.prefix + file.partial + "\n";
    file.partial.clear();
  }
  if (!out.empty()) write_(out);
}

}  // namespace gangrun::worker
