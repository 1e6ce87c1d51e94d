#include "common/service.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/env_names.h"
#include "common/numbers.h"

namespace gangrun::common {

bool SdNotify(const std::string& state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') return true;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const size_t length = std::strlen(path);
  if (length >= sizeof(address.sun_path)) return false;
  std::memcpy(address.sun_path, path, length);
  if (path[0] == '@') address.sun_path[0] = '\0';  // abstract namespace
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  ssize_t sent = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                        reinterpret_cast<const sockaddr*>(&address),
                        static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + length));
  close(fd);
  return sent == static_cast<ssize_t>(state.size());
}

Watchdog::Watchdog(Clock& clock) : clock_(clock) {
  const char* usec = std::getenv("WATCHDOG_USEC");
  const char* pid = std::getenv("WATCHDOG_PID");
  if (usec == nullptr) return;
  if (pid != nullptr && std::atol(pid) != static_cast<long>(getpid())) return;
  const int64_t value = ParseInt(usec, 1, INT64_MAX).value_or(0);
  if (value <= 0) return;
  interval_ = std::chrono::microseconds(value / 2);
  Ping();
}

void Watchdog::Ping() {
  SdNotify("WATCHDOG=1");
  timer_ = clock_.After(interval_, [this] { Ping(); });
}

namespace {
uint64_t original_file_limit = 0;
}  // namespace

void RaiseFileLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  original_file_limit = limit.rlim_cur;
  if (const char* inherited = std::getenv(env::kFileLimit)) {
    const auto value = ParseInt(inherited, 1, static_cast<int64_t>(limit.rlim_cur));
    if (value) original_file_limit = static_cast<uint64_t>(*value);
  }
  setenv(env::kFileLimit, std::to_string(original_file_limit).c_str(), 1);
  if (limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

uint64_t OriginalFileLimit() { return original_file_limit; }

std::optional<int> MaybeBecomeInit() {
  if (getpid() != 1 || std::getenv(env::kNoInit) != nullptr) return std::nullopt;
  sigset_t all, previous;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &previous);
  pid_t child = fork();
  if (child < 0) {
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    return std::nullopt;  // run without the split rather than not at all
  }
  if (child == 0) {
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    return std::nullopt;
  }
  int code = 1;
  for (;;) {
    siginfo_t info{};
    int sig = sigwaitinfo(&all, &info);
    if (sig < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (sig != SIGCHLD) {
      // The stop and continue signals of a terminal mean nothing to PID 1; pass the rest on.
      if (sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU) kill(child, sig);
      continue;
    }
    bool child_done = false;
    for (;;) {
      int status = 0;
      pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      if (pid == child) {
        child_done = true;
        code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
    }
    if (child_done) break;
  }
  // Leaving PID 1 ends the namespace: the kernel kills whatever is still in it.
  return code;
}

}  // namespace gangrun::common
