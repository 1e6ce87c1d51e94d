#include "node/log_files.h"

#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cstring>
#include <deque>
#include <string_view>

#include "common/logging.h"
#include "common/utf8.h"

namespace gangrun::node {

namespace {

// Where the last `lines` lines of the open file of `size` bytes start (a final newline ends
// the last line, it does not start another). Reads backwards in blocks.
int64_t TailOffset(int fd, int64_t size, int64_t lines) {
  constexpr int64_t kBlock = 64 * 1024;
  std::string block;
  int64_t end = size;
  int64_t newlines = 0;
  bool last_byte = true;
  while (end > 0) {
    const int64_t start = std::max<int64_t>(0, end - kBlock);
    block.resize(static_cast<size_t>(end - start));
    const ssize_t n = pread(fd, block.data(), block.size(), start);
    if (n != static_cast<ssize_t>(block.size())) return 0;
    for (int64_t i = end - start - 1; i >= 0; --i) {
      if (block[static_cast<size_t>(i)] != '\n') {
        last_byte = false;
        continue;
      }
      if (last_byte) {  // the newline that ends the file
        last_byte = false;
        continue;
      }
      if (++newlines == lines) return start + i + 1;
    }
    end = start;
  }
  return 0;
}

}  // namespace

LogPiece ReadLogPiece(const std::string& path, int64_t offset, int64_t tail_lines,
                      size_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    LogPiece piece;
    piece.error = std::string("cannot read the log: ") + strerror(errno);
    piece.at_end = true;
    return piece;
  }
  LogPiece piece = ReadLogPiece(fd, offset, tail_lines, max_bytes);
  close(fd);
  return piece;
}

LogPiece ReadLogPiece(int fd, int64_t offset, int64_t tail_lines, size_t max_bytes) {
  LogPiece piece;
  struct stat st;
  const int64_t size = fstat(fd, &st) == 0 ? st.st_size : 0;
  // The first read: tail_lines back from the end, from the end itself (< 0: `gangrun logs
  // --tail 0`, only what is written from now on), or the whole log (0).
  if (offset < 0) {
    offset = tail_lines > 0 ? TailOffset(fd, size, tail_lines) : tail_lines < 0 ? size : 0;
  }
  offset = std::min(offset, size);  // a log truncated under us: from its end
  piece.data.resize(static_cast<size_t>(std::min<int64_t>(size - offset, max_bytes)));
  const ssize_t n =
      piece.data.empty() ? 0 : pread(fd, piece.data.data(), piece.data.size(), offset);
  piece.data.resize(n > 0 ? static_cast<size_t>(n) : 0);
  piece.next_offset = offset + static_cast<int64_t>(piece.data.size());
  piece.at_end = piece.next_offset >= size;
  return piece;
}

std::vector<std::string> ReadLastLines(const std::string& path, size_t count) {
  std::vector<std::string> lines;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || count == 0) {
    if (fd >= 0) close(fd);
    return lines;
  }
  struct stat st;
  fstat(fd, &st);
  // Read backwards in blocks until we hold count+1 newlines, the whole file, or the bound.
  constexpr off_t kBlock = 8192;
  std::string tail;
  off_t pos = st.st_size;
  while (pos > 0 && tail.size() < kMaxTailBytes &&
         static_cast<size_t>(std::count(tail.begin(), tail.end(), '\n')) <= count) {
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
    std::string line = common::ValidUtf8(
        absl::string_view(tail).substr(begin, std::min(end - begin, kMaxTailLineBytes)));
    if (end - begin > kMaxTailLineBytes) line += " [... cut]";
    kept.push_back(std::move(line));
    if (kept.size() > count) kept.pop_front();
    begin = end + 1;
  }
  // The first line may be cut by the block boundary; drop it unless we read the whole file.
  if (pos > 0 && kept.size() > count) kept.pop_front();
  while (kept.size() > count) kept.pop_front();
  return {kept.begin(), kept.end()};
}

LogFollower::LogFollower(boost::asio::io_context& io, std::function<void(const std::string&)> write)
    : io_(io),
      write_(std::move(write)),
      event_buffer_(new char[kEventBufferBytes]),
      watch_timer_(io) {
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
  for (auto& [key, file] : files_) close(file.fd);
}

void LogFollower::Follow(const std::string& path, const std::string& prefix, off_t offset) {
  // The same file again (a restarted worker appends): finish the old follow first.
  for (auto it = files_.begin(); it != files_.end(); ++it) {
    if (it->second.path == path) {
      Close(it->first);
      break;
    }
  }
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    common::Logger("node")->warn("cannot follow {}: {}", path, strerror(errno));
    return;
  }
  int key =
      inotify_fd_ >= 0 && watching_ ? inotify_add_watch(inotify_fd_, path.c_str(), IN_MODIFY) : -1;
  if (key < 0) key = next_fake_key_--;
  if (inotify_fd_ >= 0 && !watching_ && !timer_armed_) {
    timer_armed_ = true;
    watch_timer_.expires_after(kWatchDelay);
    watch_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) WatchAll();
    });
  }
  if (offset < 0) {
    auto it = finished_offsets_.find(path);
    offset = it == finished_offsets_.end() ? 0 : it->second;
  }
  files_[key] = File{path, prefix, fd, offset, {}, false, false};
  // Whatever was written before the watch existed: one chunk now, the rest from the loop.
  if (ReadChunk(files_[key])) Schedule(key);
}

void LogFollower::ReadEvents() {
  events_->async_read_some(boost::asio::buffer(event_buffer_.get(), kEventBufferBytes),
                           [this](const boost::system::error_code& ec, size_t n) {
                             if (ec) return;
                             for (size_t i = 0; i + sizeof(inotify_event) <= n;) {
                               auto* event =
                                   reinterpret_cast<inotify_event*>(event_buffer_.get() + i);
                               if (files_.count(event->wd) > 0) Schedule(event->wd);
                               i += sizeof(inotify_event) + event->len;
                             }
                             ReadEvents();
                           });
}

void LogFollower::WatchAll() {
  watching_ = true;
  std::vector<int> unwatched;
  for (const auto& [key, file] : files_) {
    if (key < 0 && !file.finishing) unwatched.push_back(key);  // a finishing one reads on
  }
  for (int old_key : unwatched) {
    auto it = files_.find(old_key);
    const int key = inotify_add_watch(inotify_fd_, it->second.path.c_str(), IN_MODIFY);
    if (key < 0) continue;  // followed as before, to its end when its writer exits
    File file = std::move(it->second);
    files_.erase(it);
    file.scheduled = false;  // a ReadStep posted for the old key finds nothing
    files_[key] = std::move(file);
    Schedule(key);  // what was written before the watch
  }
}

void LogFollower::Schedule(int key) {
  File& file = files_.at(key);
  if (file.scheduled) return;
  file.scheduled = true;
  boost::asio::post(io_, [this, key] { ReadStep(key); });
}

void LogFollower::ReadStep(int key) {
  auto it = files_.find(key);
  if (it == files_.end()) return;
  it->second.scheduled = false;
  if (ReadChunk(it->second)) {
    Schedule(key);  // yield to the loop between chunks
  } else if (it->second.finishing) {
    Close(key);
  }
}

namespace {

// Appends `line` (without its newline) to `out` as lines of at most `max` bytes, each with
// `prefix`: the same pieces however the file was read.
void AppendPieces(std::string& out, const std::string& prefix, std::string_view line, size_t max) {
  do {
    const size_t piece = std::min(line.size(), max);
    out += prefix;
    out.append(line.data(), piece);
    out += '\n';
    line.remove_prefix(piece);
  } while (!line.empty());
}

}  // namespace

bool LogFollower::ReadChunk(File& file) {
  char buffer[kChunkBytes];
  ssize_t n = pread(file.fd, buffer, sizeof(buffer), file.offset);
  if (n <= 0) return false;
  file.offset += n;
  file.partial.append(buffer, static_cast<size_t>(n));
  std::string out;
  const std::string_view data = file.partial;
  size_t begin = 0;
  for (size_t nl; (nl = data.find('\n', begin)) != std::string::npos; begin = nl + 1) {
    AppendPieces(out, file.prefix, data.substr(begin, nl - begin), kMaxLineBytes);
  }
  // A line without end yet: show its full pieces now rather than hold them. The partial
  // always starts at a piece boundary, so the pieces do not depend on how it was read.
  const size_t whole = (data.size() - begin) / kMaxLineBytes * kMaxLineBytes;
  if (whole > 0) AppendPieces(out, file.prefix, data.substr(begin, whole), kMaxLineBytes);
  file.partial.erase(0, begin + whole);
  if (!out.empty()) write_(out);
  return static_cast<size_t>(n) == sizeof(buffer);
}

void LogFollower::Close(int key) {
  auto it = files_.find(key);
  if (it == files_.end()) return;
  File& file = it->second;
  while (ReadChunk(file)) {
  }
  if (!file.partial.empty()) write_(file.prefix + file.partial + "\n");
  // Dropping watches as writers end keeps the final close of the inotify descriptor cheap
  // (the kernel destroys marks asynchronously; a close that must destroy them waits).
  if (key >= 0) inotify_rm_watch(inotify_fd_, key);
  finished_offsets_[file.path] = file.offset;
  close(file.fd);
  files_.erase(it);
}

void LogFollower::Finish(const std::string& path) {
  for (auto& [key, file] : files_) {
    if (file.path != path) continue;
    file.finishing = true;
    Schedule(key);
    return;
  }
}

void LogFollower::DrainAll() {
  while (!files_.empty()) Close(files_.begin()->first);
}

}  // namespace gangrun::node
