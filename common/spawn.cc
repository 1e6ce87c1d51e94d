#include "common/spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "absl/strings/str_split.h"
#include "common/status.h"

extern char** environ;

namespace gangrun::common {
namespace {

constexpr size_t kChildStackSize = 64 * 1024;

// Everything the child needs, prepared before clone(): the child only reads it, and
// writes `failed_step`/`error` (shared memory, CLONE_VM) if a step fails.
constexpr int kMemoryMaskWords = 16;  // NUMA nodes 0-1023

struct ChildContext {
  const char* exec_path;
  char* const* argv;
  char* const* envp;
  const char* cwd;
  std::vector<std::pair<int, int>> fds;  // (child fd, parent fd)
  int max_child_fd;
  bool reset_signal_actions;
  bool new_process_group;
  bool new_session;
  int parent_death_signal;
  pid_t parent_pid;
  cpu_set_t cpus;
  bool set_cpus;
  unsigned long memory_mask[kMemoryMaskWords];
  bool set_memory;
  sigset_t original_mask;
  rlimit file_limit;
  bool set_file_limit;
  bool set_credentials;
  uid_t uid;
  gid_t gid;
  const gid_t* groups;
  size_t group_count;
  const char* failed_step = nullptr;
  int error = 0;
  int report_fd = -1;  // only when the child does not share our memory (see kShareMemory)
};

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer keeps per-thread state and its own tables of signal handlers and descriptors,
// updated by its interceptors; a child sharing our memory would run sigaction, dup2 and close
// against the parent's copies and corrupt them. Under it the child is forked instead and
// reports a failed step through a pipe that exec closes.
constexpr bool kShareMemory = false;
#else
constexpr bool kShareMemory = true;
#endif

struct FailureReport {
  const char* step;  // a string literal: the same address in parent and child
  int error;
};

int Fail(ChildContext* c, const char* step) {
  c->failed_step = step;
  c->error = errno;
  if (c->report_fd >= 0) {
    FailureReport report{step, c->error};
    ssize_t ignored = write(c->report_fd, &report, sizeof(report));
    (void)ignored;
  }
  _exit(127);
}

// Runs in the child, on its own stack, sharing the parent's memory until exec.
int ChildMain(void* arg) {
  auto* c = static_cast<ChildContext*>(arg);
  if (c->reset_signal_actions) RestoreDefaultSignalActions();
  // Raw system calls: glibc's setuid() would signal every thread of the process we share
  // memory with. Before the parent-death signal, which a change of credentials clears.
  if (c->set_credentials) {
    if (syscall(SYS_setgroups, c->group_count, c->groups) < 0) return Fail(c, "setgroups");
    if (syscall(SYS_setgid, c->gid) < 0) return Fail(c, "setgid");
    if (syscall(SYS_setuid, c->uid) < 0) return Fail(c, "setuid");
  }
  if (c->new_session) {
    if (setsid() < 0) return Fail(c, "setsid");
  } else if (c->new_process_group && setpgid(0, 0) < 0) {
    return Fail(c, "setpgid");
  }
  if (c->parent_death_signal != 0) {
    if (prctl(PR_SET_PDEATHSIG, c->parent_death_signal) < 0) return Fail(c, "prctl");
    // The parent may have died before prctl: then nobody will send the signal.
    if (getppid() != c->parent_pid) _exit(127);
  }
  if (c->set_cpus && sched_setaffinity(0, sizeof(c->cpus), &c->cpus) < 0) {
    return Fail(c, "sched_setaffinity");
  }
  constexpr int kMpolBind = 2;  // <numaif.h>'s MPOL_BIND, without libnuma
  if (c->set_memory &&
      syscall(SYS_set_mempolicy, kMpolBind, c->memory_mask, kMemoryMaskWords * 64 + 1) < 0) {
    return Fail(c, "set_mempolicy");
  }
  if (c->set_file_limit) setrlimit(RLIMIT_NOFILE, &c->file_limit);  // best effort
  // Move the source descriptors above every target first, so a dup2 never clobbers a
  // source that a later dup2 still needs.
  int high = c->max_child_fd + 1;
  for (auto& [child_fd, parent_fd] : c->fds) {
    int moved = fcntl(parent_fd, F_DUPFD, high);
    if (moved < 0) return Fail(c, "fcntl(F_DUPFD)");
    parent_fd = moved;
    high = moved + 1;
  }
  for (const auto& [child_fd, parent_fd] : c->fds) {
    if (dup2(parent_fd, child_fd) < 0) return Fail(c, "dup2");
  }
  // Everything above the mapped descriptors goes (they were all close-on-exec anyway).
  CloseDescriptorsFrom(c->max_child_fd + 1, c->report_fd);
  if (c->cwd != nullptr && chdir(c->cwd) < 0) return Fail(c, "chdir");
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr);
  execve(c->exec_path, c->argv, c->envp);
  return Fail(c, "execve");
}

std::vector<char*> ToCharPointers(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// The child's stack: one per spawning thread, made at its first spawn and kept (a thread
// spawns one child at a time, and is suspended until that child has exec'd). A fresh mmap and
// munmap per spawn cost the keeper about 20 us of its 0.5 ms per worker (bench/README.md).
void* ChildStack() {
  thread_local void* stack = nullptr;
  if (stack == nullptr) {
    void* made = mmap(nullptr, kChildStackSize, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (made != MAP_FAILED) stack = made;
  }
  return stack;
}

// The child shares our memory and we are suspended until it has exec'd or failed, as in
// posix_spawn: nothing is copied, whatever the parent's size.
absl::StatusOr<pid_t> CloneSharingMemory(ChildContext& context) {
  void* stack = ChildStack();
  if (stack == nullptr) return ErrnoToStatus(errno, "spawn: mmap");
  // No signal handler may run in the child while it shares our memory.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &context.original_mask);
  pid_t pid = clone(ChildMain, static_cast<char*>(stack) + kChildStackSize,
                    CLONE_VM | CLONE_VFORK | SIGCHLD, &context);
  int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &context.original_mask, nullptr);
  if (pid < 0) return ErrnoToStatus(clone_errno, "spawn: clone");
  return pid;
}

// A forked child, for sanitizer builds: we wait for exec (the report pipe closing) or for
// the child's report of the step that failed.
absl::StatusOr<pid_t> Fork(ChildContext& context) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) < 0) return ErrnoToStatus(errno, "spawn: pipe");
  // Above every descriptor the child maps, so no dup2 lands on it.
  context.report_fd = fcntl(pipe_fds[1], F_DUPFD_CLOEXEC, context.max_child_fd + 1);
  close(pipe_fds[1]);
  if (context.report_fd < 0) {
    int error = errno;
    close(pipe_fds[0]);
    return ErrnoToStatus(error, "spawn: fcntl");
  }
  // No handler of ours may run in the child before it resets them (asio's would write to
  // the self-pipe it shares with us).
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &context.original_mask);
  pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    ChildMain(&context);
  }
  int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &context.original_mask, nullptr);
  close(context.report_fd);
  if (pid < 0) {
    close(pipe_fds[0]);
    return ErrnoToStatus(fork_errno, "spawn: fork");
  }
  FailureReport report{};
  ssize_t n;
  while ((n = read(pipe_fds[0], &report, sizeof(report))) < 0 && errno == EINTR) {
  }
  close(pipe_fds[0]);
  if (n == static_cast<ssize_t>(sizeof(report))) {
    context.failed_step = report.step;
    context.error = report.error;
  }
  return pid;
}

}  // namespace

absl::StatusOr<pid_t> Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("spawn: empty argv");
  std::vector<char*> argv = ToCharPointers(options.argv);
  std::vector<char*> envp = ToCharPointers(options.env);

  ChildContext context;
  context.exec_path = options.exec_path.c_str();
  context.argv = argv.data();
  context.envp = envp.data();
  context.cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();
  context.max_child_fd = 2;
  for (const auto& [child_fd, parent_fd] : options.fds) {
    context.fds.emplace_back(child_fd, parent_fd);
    if (child_fd > context.max_child_fd) context.max_child_fd = child_fd;
  }
  context.reset_signal_actions = !options.signal_actions_are_default;
  context.new_process_group = options.new_process_group;
  context.new_session = options.new_session;
  context.parent_death_signal = options.parent_death_signal;
  context.parent_pid = getpid();
  CPU_ZERO(&context.cpus);
  context.set_cpus = !options.cpus.empty();
  for (int cpu : options.cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      return absl::InvalidArgumentError("spawn: cpu " + std::to_string(cpu) + " out of range");
    }
    CPU_SET(cpu, &context.cpus);
  }
  std::fill(std::begin(context.memory_mask), std::end(context.memory_mask), 0UL);
  context.set_memory = !options.memory_nodes.empty();
  for (int node : options.memory_nodes) {
    if (node < 0 || node >= kMemoryMaskWords * 64) {
      return absl::InvalidArgumentError("spawn: NUMA node " + std::to_string(node) +
                                        " out of range");
    }
    context.memory_mask[node / 64] |= 1UL << (node % 64);
  }

  context.set_credentials = options.run_as.has_value();
  if (options.run_as) {
    context.uid = options.run_as->uid;
    context.gid = options.run_as->gid;
    context.groups = options.run_as->groups.data();
    context.group_count = options.run_as->groups.size();
  }
  context.set_file_limit = false;
  if (options.file_limit > 0 && getrlimit(RLIMIT_NOFILE, &context.file_limit) == 0 &&
      options.file_limit < context.file_limit.rlim_cur) {
    context.file_limit.rlim_cur = options.file_limit;
    context.set_file_limit = true;
  }

  absl::StatusOr<pid_t> started = kShareMemory ? CloneSharingMemory(context) : Fork(context);
  if (!started.ok()) return started.status();
  pid_t pid = *started;
  if (context.failed_step != nullptr) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return ErrnoToStatus(context.error,
                         "cannot start " + options.exec_path + " (" + context.failed_step + ")");
  }
  if (options.new_process_group && !options.new_session) {
    setpgid(pid, pid);  // also from the parent; fails harmlessly once the child has exec'd
  }
  return pid;
}

absl::StatusOr<std::string> FindExecutable(const std::string& program,
                                           const std::string& path_env) {
  if (program.empty()) return absl::InvalidArgumentError("empty program name");
  if (program.find('/') != std::string::npos) {
    if (access(program.c_str(), X_OK) == 0) return program;
    return ErrnoToStatus(errno, program);
  }
  for (absl::string_view dir : absl::StrSplit(path_env, ':')) {
    std::string candidate = (dir.empty() ? std::string(".") : std::string(dir)) + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return absl::NotFoundError(program + ": command not found in PATH");
}

void RestoreDefaultSignalActions() {
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  }
}

void CloseDescriptorsFrom(unsigned first, int keep) {
  if (keep >= 0 && static_cast<unsigned>(keep) >= first) {
    if (static_cast<unsigned>(keep) > first) {
      syscall(SYS_close_range, first, static_cast<unsigned>(keep) - 1, 0);
    }
    first = static_cast<unsigned>(keep) + 1;
  }
  syscall(SYS_close_range, first, ~0U, 0);
}

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

}  // namespace gangrun::common
