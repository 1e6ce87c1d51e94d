#include "node/flight_recorder.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/match.h"
#include "common/env_list.h"
#include "common/env_names.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/status.h"

namespace gangrun::node {
namespace {

constexpr auto kDumpPollInterval = std::chrono::milliseconds(20);

// The value torch reads: the current name's, else the older one's.
std::optional<std::string> TorchValue(const std::vector<std::string>& env, const char* name,
                                      const char* old_name) {
  auto value = common::LastValueOf(env, name);
  if (!value) value = common::LastValueOf(env, old_name);
  if (!value) return std::nullopt;
  return std::string(*value);
}

// Sets both names unless the user set either.
void SetUnlessGiven(std::vector<std::string>& env, const char* name, const char* old_name,
                    const std::string& value) {
  if (common::LastValueOf(env, name) || common::LastValueOf(env, old_name)) return;
  env.push_back(absl::StrCat(name, "=", value));
  env.push_back(absl::StrCat(old_name, "=", value));
}

struct FileState {
  bool exists = false;
  ino_t inode = 0;
  off_t size = 0;
  struct timespec modified = {};
  bool operator==(const FileState& o) const {
    return exists == o.exists && inode == o.inode && size == o.size &&
           modified.tv_sec == o.modified.tv_sec && modified.tv_nsec == o.modified.tv_nsec;
  }
};

FileState StateOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  return {true, st.st_ino, st.st_size, st.st_mtim};
}

// Wakes torch's reader of the pipe; false when nobody reads it (no flight recorder there).
bool Trigger(const std::string& pipe) {
  const int fd = open(pipe.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;  // ENXIO: no reader; ENOENT: no pipe
  struct stat st;
  bool triggered = fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && st.st_uid == geteuid();
  if (triggered) triggered = write(fd, "1\n", 2) > 0;
  close(fd);
  return triggered;
}

absl::Status CopyDump(const std::string& from, const std::string& to) {
  const int in = open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (in < 0) return common::ErrnoToStatus(errno, "cannot open " + from);
  auto out = common::OpenOwnFileForWriting(to, /*append=*/false);
  if (!out.ok()) {
    close(in);
    return out.status();
  }
  std::vector<char> buffer(1 << 16);
  size_t copied = 0;
  absl::Status status;
  while (copied < FlightRecorder::kMaxDumpBytes) {
    const ssize_t n =
        read(in, buffer.data(), std::min(buffer.size(), FlightRecorder::kMaxDumpBytes - copied));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (!common::WriteAll(*out, std::string_view(buffer.data(), static_cast<size_t>(n)))) {
      status = common::ErrnoToStatus(errno, "cannot write " + to);
      break;
    }
    copied += static_cast<size_t>(n);
  }
  close(in);
  close(*out);
  return status;
}

}  // namespace

struct FlightRecorder::Session {
  explicit Session(boost::asio::io_context& io) : poll(io) {}
  struct Pending {
    Target target;
    FileState before;
    FileState seen;
  };
  std::vector<Pending> pending;
  std::map<int, std::string> collected;
  common::TimePoint deadline;
  boost::asio::steady_timer poll;
  std::function<void(std::map<int, std::string>)> done;
};

absl::StatusOr<std::unique_ptr<FlightRecorder>> FlightRecorder::Create(
    boost::asio::io_context& io, const std::string& runtime_dir) {
  const std::string dir = runtime_dir + "/flight";
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return common::ErrnoToStatus(errno, "cannot create " + dir);
  }
  return std::unique_ptr<FlightRecorder>(new FlightRecorder(io, dir));
}

FlightRecorder::~FlightRecorder() {
  for (auto& session : sessions_) session->poll.cancel();
}

void FlightRecorder::AddWorkerEnv(std::vector<std::string>& env) const {
  SetUnlessGiven(env, env::kTorchTraceBuffer, env::kTorchTraceBufferOld,
                 std::to_string(kTraceEntries));
  SetUnlessGiven(env, env::kTorchDumpPipe, env::kTorchDumpPipeOld, dir_ + "/trigger_");
  SetUnlessGiven(env, env::kTorchDumpFile, env::kTorchDumpFileOld, dir_ + "/dump_");
}

std::optional<FlightRecorder::Target> FlightRecorder::TargetOf(const std::vector<std::string>& env,
                                                               int rank,
                                                               const std::string& log_path) {
  auto pipe = TorchValue(env, env::kTorchDumpPipe, env::kTorchDumpPipeOld);
  if (!pipe || pipe->empty() || log_path.empty()) return std::nullopt;
  // Torch's own default when only the trigger was given.
  const std::string dump = TorchValue(env, env::kTorchDumpFile, env::kTorchDumpFileOld)
                               .value_or("/tmp/nccl_trace_rank_");
  std::string destination = log_path;
  if (absl::EndsWith(destination, ".log")) destination.resize(destination.size() - 4);
  destination += ".flight_recorder";
  const std::string number = std::to_string(rank);
  return Target{rank, *pipe + number + ".pipe", dump + number, destination};
}

void FlightRecorder::Collect(std::vector<Target> targets, common::Duration timeout,
                             std::function<void(std::map<int, std::string>)> done) {
  auto session = std::make_shared<Session>(io_);
  session->done = std::move(done);
  session->deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& target : targets) {
    const FileState before = StateOf(target.dump);
    if (!Trigger(target.pipe)) continue;
    session->pending.push_back({std::move(target), before, before});
  }
  sessions_.push_back(session);
  if (session->pending.empty()) return Finish(session);
  Poll(session);
}

// A dump is taken once it differs from what was there before the trigger and has not
// changed over one poll (torch has finished writing it).
void FlightRecorder::Poll(const std::shared_ptr<Session>& session) {
  session->poll.expires_after(kDumpPollInterval);
  session->poll.async_wait([this, session](boost::system::error_code ec) {
    if (ec) return;
    auto& pending = session->pending;
    for (auto it = pending.begin(); it != pending.end();) {
      const FileState now = StateOf(it->target.dump);
      const bool settled = now.exists && now.size > 0 && !(now == it->before) && now == it->seen;
      it->seen = now;
      if (!settled) {
        ++it;
        continue;
      }
      auto copied = CopyDump(it->target.dump, it->target.destination);
      if (copied.ok()) {
        session->collected[it->target.rank] = it->target.destination;
      } else {
        common::Logger("node")->warn("rank {}: cannot keep its flight recorder dump: {}",
                                     it->target.rank, std::string(copied.message()));
      }
      it = pending.erase(it);
    }
    if (pending.empty() || std::chrono::steady_clock::now() >= session->deadline) {
      return Finish(session);
    }
    Poll(session);
  });
}

void FlightRecorder::Finish(const std::shared_ptr<Session>& session) {
  sessions_.erase(std::remove(sessions_.begin(), sessions_.end(), session), sessions_.end());
  auto done = std::move(session->done);
  done(std::move(session->collected));
}

}  // namespace gangrun::node
