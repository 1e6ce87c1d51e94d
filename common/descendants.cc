#include "common/descendants.h"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>

#include "common/status.h"

namespace gangrun::common {
namespace {

bool ReadChildrenFiles(std::vector<pid_t>* out) {
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return false;
  bool any = false;
  while (dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream in(std::string("/proc/self/task/") + entry->d_name + "/children");
    if (!in) continue;
    any = true;
    pid_t pid;
    while (in >> pid) out->push_back(pid);
  }
  closedir(tasks);
  return any;
}

// Fallback for kernels without CONFIG_PROC_CHILDREN: field 4 of /proc/<pid>/stat.
void ScanProcForChildren(std::vector<pid_t>* out) {
  const pid_t self = getpid();
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return;
  while (dirent* entry = readdir(proc)) {
    char* end;
    long pid = strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    std::ifstream in(std::string("/proc/") + entry->d_name + "/stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    size_t paren = line.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(line.substr(paren + 1));
    char state;
    pid_t ppid;
    if (rest >> state >> ppid && ppid == self) out->push_back(static_cast<pid_t>(pid));
  }
  closedir(proc);
}

// Waits up to `timeout` for a SIGCHLD (the caller keeps SIGCHLD blocked or unhandled).
void WaitForChildEvent(std::chrono::milliseconds timeout) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &set, &old);
  timespec ts{static_cast<time_t>(timeout.count() / 1000),
              static_cast<long>((timeout.count() % 1000) * 1000000)};
  sigtimedwait(&set, nullptr, &ts);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace

absl::Status BecomeChildSubreaper() {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
    return ErrnoToStatus(errno, "prctl(PR_SET_CHILD_SUBREAPER)");
  }
  return absl::OkStatus();
}

std::vector<pid_t> ListChildren() {
  std::vector<pid_t> children;
  if (!ReadChildrenFiles(&children)) ScanProcForChildren(&children);
  return children;
}

bool KillAndReapAllChildren(int sig, std::chrono::steady_clock::time_point deadline) {
  while (true) {
    // Reap first: a zombie still shows up as a child.
    while (true) {
      pid_t pid = waitpid(-1, nullptr, WNOHANG);
      if (pid > 0) continue;
      if (pid < 0 && errno == EINTR) continue;
      if (pid < 0 && errno == ECHILD) return true;
      break;
    }
    for (pid_t child : ListChildren()) {
      kill(-child, sig);  // the group it leads, if any
      kill(child, sig);
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    WaitForChildEvent(std::min(left, std::chrono::milliseconds(20)) + std::chrono::milliseconds(1));
  }
}

}  // namespace gangrun::common
