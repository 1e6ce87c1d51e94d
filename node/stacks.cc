#include "node/stacks.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <cerrno>
#include <fstream>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/check.h"
#include "common/env_list.h"
#include "common/env_names.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/spawn.h"
#include "common/status.h"
#include "gangrun_sitecustomize.h"

namespace gangrun::node {
namespace {

constexpr auto kProbePollInterval = std::chrono::milliseconds(20);

using generated::kSiteCustomize;
// The hook reads the names the node writes (AddWorkerEnv). Checked when the hook is written
// (a compile-time check of a 9 KB string is past what sanitizer builds evaluate).
bool HookReadsItsVariables() {
  const std::string_view hook(kSiteCustomize);
  for (const char* name : {env::kStackDir, env::kStackSignal, env::kProgress, env::kHookPid}) {
    if (hook.find(name) == std::string_view::npos) return false;
  }
  return true;
}

// Field 22 of /proc/<pid>/stat (the start time in clock ticks): with the pid, it names one
// process for ever, so a recycled pid never gets another process's hook file.
std::string StartTime(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return "";
  std::vector<std::string> fields = absl::StrSplit(stat.substr(paren + 1), ' ', absl::SkipEmpty());
  return fields.size() > 19 ? fields[19] : "";
}

std::string ReadRange(const std::string& path, off_t from, off_t to) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const off_t length = std::min<off_t>(to - from, kMaxStackBytes);
  std::string text(static_cast<size_t>(std::max<off_t>(length, 0)), '\0');
  ssize_t n = pread(fd, text.data(), text.size(), from);
  close(fd);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return text;
}

bool LibraryPath(absl::string_view path) {
  return absl::StrContains(path, "/lib/python") || absl::StrContains(path, "site-packages") ||
         absl::StrContains(path, "dist-packages") || absl::StartsWith(path, "<frozen");
}

bool SystemModule(absl::string_view module) {
  return absl::StartsWith(module, "/lib/") || absl::StartsWith(module, "/lib64/") ||
         absl::StartsWith(module, "/usr/lib/") || absl::StartsWith(module, "/usr/lib64/") ||
         absl::StrContains(module, "linux-vdso");
}

absl::string_view Basename(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string PythonWhere(absl::string_view dump) {
  // The last thread block is the main thread (faulthandler lists the newest thread first).
  std::vector<absl::string_view> block;
  for (absl::string_view line : absl::StrSplit(dump, '\n')) {
    if (absl::StartsWith(line, "Thread 0x") || absl::StartsWith(line, "Current thread 0x")) {
      block.clear();
      continue;
    }
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "File \"")) block.push_back(line);
  }
  std::string innermost;
  for (absl::string_view line : block) {
    // '  File "/path/train.py", line 88 in all_reduce_wait'
    absl::string_view rest = absl::StripLeadingAsciiWhitespace(line);
    rest.remove_prefix(6);
    const size_t quote = rest.find("\", line ");
    if (quote == absl::string_view::npos) continue;
    const absl::string_view file = rest.substr(0, quote);
    absl::string_view tail = rest.substr(quote + 8);
    const size_t in = tail.find(" in ");
    if (in == absl::string_view::npos) continue;
    const std::string where = std::string(tail.substr(in + 4)) + " (" +
                              std::string(Basename(file)) + ":" + std::string(tail.substr(0, in)) +
                              ")";
    if (!LibraryPath(file)) return where;
    if (innermost.empty()) innermost = where;
  }
  return innermost;
}

namespace {

// eu-stack -s puts a frame's source under it: "    /src/worker.c:41:7".
std::string SourceLine(absl::string_view line) {
  if (line.empty() || (line[0] != ' ' && line[0] != '\t')) return "";
  absl::string_view source = absl::StripAsciiWhitespace(line);
  const size_t column = source.rfind(':');
  if (column == absl::string_view::npos) return "";
  const size_t row = source.rfind(':', column - 1);
  if (row == absl::string_view::npos || row + 1 == column) return "";
  const absl::string_view number = source.substr(row + 1, column - row - 1);
  if (!std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return "";
  }
  return std::string(Basename(source.substr(0, row))) + ":" + std::string(number);
}

}  // namespace

std::string NativeWhere(absl::string_view stack) {
  std::string innermost;
  int threads = 0;
  std::vector<absl::string_view> lines = absl::StrSplit(stack, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    const absl::string_view line = lines[i];
    if (absl::StartsWith(line, "TID ")) {
      if (++threads > 1) break;  // the first thread only
      continue;
    }
    if (!absl::StartsWith(line, "#")) continue;
    // "#2  0x00005594077da4af main - /usr/bin/worker" (the symbol may be missing)
    const size_t dash = line.rfind(" - ");
    if (dash == absl::string_view::npos) continue;
    const absl::string_view module = line.substr(dash + 3);
    std::vector<absl::string_view> words =
        absl::StrSplit(line.substr(0, dash), ' ', absl::SkipEmpty());
    if (words.size() < 3) continue;  // no symbol
    absl::string_view symbol = words[2];
    symbol = symbol.substr(0, symbol.find('@'));
    const std::string source = i + 1 < lines.size() ? SourceLine(lines[i + 1]) : "";
    const std::string where = std::string(symbol) + " (" +
                              (source.empty() ? std::string(Basename(module)) : source) + ")";
    if (!SystemModule(module)) return where;
    if (innermost.empty()) innermost = where;
  }
  return innermost;
}

struct SystemStackSampler::Probe {
  StackTarget target;
  v1::RankStack result;
  bool done = false;
  std::string hook_file;
  std::unique_ptr<boost::asio::steady_timer> poll;
  pid_t child = 0;  // eu-stack
  std::unique_ptr<boost::asio::posix::stream_descriptor> pipe;
  std::string output;
  std::vector<char> buffer;
};

struct SystemStackSampler::Session {
  explicit Session(boost::asio::io_context& io) : deadline(io) {}
  std::vector<Probe> probes;
  size_t pending = 0;
  boost::asio::steady_timer deadline;
  double timeout_seconds = 0;
  std::function<void(std::vector<v1::RankStack>)> done;
  bool finished = false;
};

int SystemStackSampler::StackSignal() { return SIGRTMIN + 6; }

absl::StatusOr<std::unique_ptr<SystemStackSampler>> SystemStackSampler::Create(
    boost::asio::io_context& io, const std::string& runtime_dir) {
  std::unique_ptr<SystemStackSampler> sampler(new SystemStackSampler(io, runtime_dir));
  for (const std::string& dir : {sampler->hook_dir_, sampler->stack_dir_}) {
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return common::ErrnoToStatus(errno, "cannot create " + dir);
    }
  }
  GANGRUN_CHECK(HookReadsItsVariables(), "the Python hook reads the variables the node sets");
  auto written =
      common::WriteFileAtomically(sampler->hook_dir_ + "/sitecustomize.py", kSiteCustomize);
  if (!written.ok()) return written;
  return sampler;
}

SystemStackSampler::SystemStackSampler(boost::asio::io_context& io, std::string runtime_dir)
    : io_(io), hook_dir_(runtime_dir + "/python"), stack_dir_(runtime_dir + "/stacks") {}

SystemStackSampler::~SystemStackSampler() {
  for (auto& session : sessions_) {
    session->finished = true;
    for (auto& probe : session->probes) {
      if (probe.child <= 0) continue;
      kill(probe.child, SIGKILL);
      waitpid(probe.child, nullptr, 0);
    }
  }
}

void SystemStackSampler::AddWorkerEnv(std::vector<std::string>& env) const {
  std::string python_path = hook_dir_;
  for (auto it = env.begin(); it != env.end();) {
    if (common::SetsVariable(*it, "PYTHONPATH")) {
      const std::string old = it->substr(11);
      if (!old.empty()) python_path += ":" + old;
      it = env.erase(it);
    } else if (absl::StartsWith(*it, env::kStackPrefix) ||
               common::SetsVariable(*it, env::kHookPid)) {
      it = env.erase(it);
    } else {
      ++it;
    }
  }
  env.push_back("PYTHONPATH=" + python_path);
  env.push_back(absl::StrCat(env::kStackDir, "=", stack_dir_));
  env.push_back(absl::StrCat(env::kStackSignal, "=", StackSignal()));
}

void SystemStackSampler::Capture(std::vector<StackTarget> targets, common::Duration timeout,
                                 std::function<void(std::vector<v1::RankStack>)> done) {
  auto session = std::make_shared<Session>(io_);
  session->done = std::move(done);
  session->timeout_seconds = std::chrono::duration<double>(timeout).count();
  session->probes.resize(targets.size());
  session->pending = targets.size();
  sessions_.push_back(session);
  for (size_t i = 0; i < targets.size(); ++i) {
    Probe& probe = session->probes[i];
    probe.target = targets[i];
    probe.result.set_rank(targets[i].rank);
    probe.result.set_pid(targets[i].pid);
  }
  session->deadline.expires_after(timeout);
  session->deadline.async_wait([this, session](boost::system::error_code ec) {
    if (ec || session->finished) return;
    for (size_t i = 0; i < session->probes.size(); ++i) {
      if (session->probes[i].done) continue;
      session->probes[i].result.set_error(
          absl::StrFormat("not sampled within %g s", session->timeout_seconds));
      Finish(session, i);
    }
  });
  for (size_t i = 0; i < targets.size() && !session->finished; ++i) {
    Probe& probe = session->probes[i];
    const std::string started = StartTime(probe.target.pid);
    struct stat st;
    probe.hook_file =
        stack_dir_ + "/" + std::to_string(probe.target.pid) + "." + started + ".stack";
    if (started.empty()) {
      probe.result.set_error("the process is gone");
      Finish(session, i);
    } else if (stat(probe.hook_file.c_str(), &st) == 0) {
      StartPython(session, i, st.st_size);
    } else {
      StartNative(session, i);
    }
  }
}

void SystemStackSampler::StartPython(const std::shared_ptr<Session>& session, size_t index,
                                     off_t size_before) {
  Probe& probe = session->probes[index];
  probe.result.set_kind("python");
  if (kill(probe.target.pid, StackSignal()) != 0) {
    probe.result.set_error(std::string("cannot signal it: ") + strerror(errno));
    return Finish(session, index);
  }
  probe.poll = std::make_unique<boost::asio::steady_timer>(io_);
  PollPython(session, index, size_before, size_before);
}

void SystemStackSampler::PollPython(const std::shared_ptr<Session>& session, size_t index,
                                    off_t size_before, off_t size_seen) {
  Probe& probe = session->probes[index];
  probe.poll->expires_after(kProbePollInterval);
  probe.poll->async_wait(
      [this, session, index, size_before, size_seen](boost::system::error_code ec) {
        Probe& probe = session->probes[index];
        if (ec || session->finished || probe.done) return;
        struct stat st;
        const off_t size = stat(probe.hook_file.c_str(), &st) == 0 ? st.st_size : size_before;
        // Written and no longer growing: faulthandler is done.
        if (size > size_before && size == size_seen) {
          probe.result.set_text(ReadRange(probe.hook_file, size_before, size));
          probe.result.set_where(PythonWhere(probe.result.text()));
          return Finish(session, index);
        }
        PollPython(session, index, size_before, size);
      });
}

// Looked up when a stack is first asked for, not at every launch (a walk of PATH).
const std::string& SystemStackSampler::EuStack() {
  if (!eu_stack_) {
    const char* path = getenv("PATH");
    auto found = common::FindExecutable("eu-stack", path != nullptr ? path : "/usr/bin:/bin");
    eu_stack_ = found.ok() ? *found : "";
  }
  return *eu_stack_;
}

void SystemStackSampler::StartNative(const std::shared_ptr<Session>& session, size_t index) {
  Probe& probe = session->probes[index];
  probe.result.set_kind("native");
  const std::string& eu_stack = EuStack();
  if (eu_stack.empty()) {
    probe.result.set_error(
        "no Python stack hook in the process and eu-stack is not installed (elfutils)");
    return Finish(session, index);
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    probe.result.set_error(std::string("pipe: ") + strerror(errno));
    return Finish(session, index);
  }
  common::SpawnOptions options;
  options.exec_path = eu_stack;
  // -s: each frame's source file and line, where the binary has debug information.
  options.argv = {eu_stack, "-m", "-s", "-p", std::to_string(probe.target.pid)};
  options.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  options.fds = {{1, fds[1]}, {2, fds[1]}};
  auto pid = common::Spawn(options);
  close(fds[1]);
  if (!pid.ok()) {
    close(fds[0]);
    probe.result.set_error(std::string(pid.status().message()));
    return Finish(session, index);
  }
  probe.child = *pid;
  probe.pipe = std::make_unique<boost::asio::posix::stream_descriptor>(io_, fds[0]);
  probe.buffer.resize(16 * 1024);
  ReadNative(session, index);
}

void SystemStackSampler::ReadNative(const std::shared_ptr<Session>& session, size_t index) {
  Probe& probe = session->probes[index];
  probe.pipe->async_read_some(
      boost::asio::buffer(probe.buffer),
      [this, session, index](boost::system::error_code ec, size_t n) {
        Probe& probe = session->probes[index];
        if (session->finished || probe.done) return;
        if (!ec) {
          if (probe.output.size() < kMaxStackBytes) probe.output.append(probe.buffer.data(), n);
          return ReadNative(session, index);
        }
        // The end of its output: it has finished (or died); reap it.
        int status = 0;
        const bool reaped = waitpid(probe.child, &status, 0) == probe.child;
        probe.child = 0;
        probe.output.resize(std::min(probe.output.size(), kMaxStackBytes));
        if (reaped && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
          probe.result.set_text(probe.output);
          probe.result.set_where(NativeWhere(probe.output));
        } else {
          const std::string first = probe.output.substr(0, probe.output.find('\n'));
          probe.result.set_error("eu-stack failed" + (first.empty() ? "" : ": " + first));
        }
        Finish(session, index);
      });
}

void SystemStackSampler::Finish(const std::shared_ptr<Session>& session, size_t index) {
  Probe& probe = session->probes[index];
  if (probe.done) return;
  probe.done = true;
  if (probe.child > 0) {
    kill(probe.child, SIGKILL);
    waitpid(probe.child, nullptr, 0);
    probe.child = 0;
  }
  probe.pipe.reset();
  probe.poll.reset();
  if (--session->pending > 0 || session->finished) return;
  session->finished = true;
  session->deadline.cancel();
  std::vector<v1::RankStack> stacks;
  for (auto& p : session->probes) stacks.push_back(std::move(p.result));
  sessions_.erase(std::remove(sessions_.begin(), sessions_.end(), session), sessions_.end());
  auto done = std::move(session->done);
  done(std::move(stacks));
}

}  // namespace gangrun::node
