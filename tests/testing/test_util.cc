#include "tests/testing/test_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/descendants.h"
#include "common/net.h"
#include "common/spawn.h"

namespace gangrun::testing {
namespace {

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

// Waits for `fd` to become readable; true if it did within `timeout`.
bool WaitReadable(int fd, milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() < 0) return false;
    pollfd p{fd, POLLIN, 0};
    int rc = poll(&p, 1, static_cast<int>(left.count()));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

}  // namespace

TempDir::TempDir() {
  char tmpl[] = "/tmp/gangrun-test-XXXXXX";
  char* dir = mkdtemp(tmpl);
  path_ = dir != nullptr ? dir : "/tmp";
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

ReportFifo::ReportFifo(const std::string& path) : path_(path) {
  mkfifo(path.c_str(), 0600);
  // Non-blocking read end: writers can open at once, and it never reports EOF-wait hangs.
  fd_ = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  // Our own write end keeps the FIFO from reading EOF between writers.
  keep_open_ = open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
}

ReportFifo::~ReportFifo() {
  close(fd_);
  close(keep_open_);
  unlink(path_.c_str());
}

std::optional<std::string> ReportFifo::ReadLine(milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !WaitReadable(fd_, left)) return std::nullopt;
    char chunk[4096];
    ssize_t n = read(fd_, chunk, sizeof(chunk));
    if (n > 0) buffer_.append(chunk, static_cast<size_t>(n));
  }
}

std::vector<std::string> ReportFifo::ReadLines(size_t count, milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::string> lines;
  while (lines.size() < count) {
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    auto line = ReadLine(std::max(left, milliseconds(0)));
    if (!line) break;
    lines.push_back(*line);
  }
  return lines;
}

long ProcStatusKiB(pid_t pid, const std::string& field) {
  const std::string status = ReadFile("/proc/" + std::to_string(pid) + "/status");
  const size_t at = status.find("\n" + field + ":");
  return at == std::string::npos ? -1 : std::atol(status.c_str() + at + field.size() + 2);
}

std::string Launched::Stdout() const { return ReadFile(stdout_path); }
std::string Launched::Stderr() const { return ReadFile(stderr_path); }

Launched Launch(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                const std::string& cwd, const std::string& output_dir, int stdout_fd) {
  static int counter = 0;
  Launched launched;
  std::string stem = output_dir + "/launch" + std::to_string(counter++);
  launched.stdout_path = stem + ".stdout";
  launched.stderr_path = stem + ".stderr";
  int out = open(launched.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int err = open(launched.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  common::SpawnOptions options;
  options.exec_path = argv.at(0);
  if (options.exec_path.find('/') == std::string::npos) {
    const char* path = std::getenv("PATH");
    auto found =
        common::FindExecutable(options.exec_path, path != nullptr ? path : "/usr/bin:/bin");
    if (found.ok()) options.exec_path = *found;
  }
  options.argv = argv;
  options.env = common::CurrentEnvironment();
  options.env.insert(options.env.end(), extra_env.begin(), extra_env.end());
  options.cwd = cwd;
  options.fds = {{0, in}, {1, stdout_fd >= 0 ? stdout_fd : out}, {2, err}};
  options.new_process_group = true;
  auto pid = common::Spawn(options);
  close(out);
  close(err);
  close(in);
  launched.pid = pid.ok() ? *pid : -1;
  if (!pid.ok()) ADD_FAILURE() << "cannot start " << argv.at(0) << ": " << pid.status().message();
  return launched;
}

namespace {

bool WaitForOutput(const Launched& launched, const std::string& path, const std::string& text,
                   milliseconds timeout) {
  int inotify = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  inotify_add_watch(inotify, path.c_str(), IN_MODIFY);
  int pidfd = PidfdOpen(launched.pid);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool found = false;
  while (!(found = ReadFile(path).find(text) != std::string::npos)) {
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd fds[2] = {{inotify, POLLIN, 0}, {pidfd, POLLIN, 0}};
    if (poll(fds, pidfd >= 0 ? 2 : 1, static_cast<int>(left.count())) <= 0) continue;
    if (fds[1].revents & POLLIN) {
      found = ReadFile(path).find(text) != std::string::npos;
      break;  // the process ended
    }
    char drain[4096];
    while (read(inotify, drain, sizeof(drain)) > 0) {
    }
  }
  close(inotify);
  if (pidfd >= 0) close(pidfd);
  return found;
}

}  // namespace

bool WaitForStderr(const Launched& launched, const std::string& text, milliseconds timeout) {
  return WaitForOutput(launched, launched.stderr_path, text, timeout);
}

bool WaitForStdout(const Launched& launched, const std::string& text, milliseconds timeout) {
  return WaitForOutput(launched, launched.stdout_path, text, timeout);
}

std::optional<common::ExitStatus> WaitExit(pid_t pid, milliseconds timeout) {
  int fd = PidfdOpen(pid);
  if (fd >= 0) {
    bool exited = WaitReadable(fd, timeout);
    close(fd);
    if (!exited) return std::nullopt;
  }
  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return std::nullopt;
  }
  return common::ExitStatus::FromWaitStatus(status);
}

bool WaitGone(pid_t pid, milliseconds timeout) {
  int fd = PidfdOpen(pid);
  if (fd < 0) return errno == ESRCH;
  bool gone = WaitReadable(fd, timeout);
  close(fd);
  return gone;
}

bool WaitReaped(pid_t pid, milliseconds timeout) {
  int fd = PidfdOpen(pid);
  if (fd < 0) return errno == ESRCH;
  pollfd p{fd, 0, 0};  // no events asked for: only POLLHUP (reaped) wakes us
  poll(&p, 1, static_cast<int>(timeout.count()));
  close(fd);
  return access(("/proc/" + std::to_string(pid)).c_str(), F_OK) != 0;
}

bool IsAlive(pid_t pid) { return !WaitGone(pid, milliseconds(0)); }

pid_t HoldFileOpen(const std::string& path) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    setpgid(0, 0);
    const int fd = open(path.c_str(), O_RDONLY);
    (void)!write(ready[1], fd >= 0 ? "y" : "n", 1);
    for (;;) pause();
  }
  close(ready[1]);
  char c = 0;
  (void)!read(ready[0], &c, 1);
  close(ready[0]);
  if (c == 'y') return pid;
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

std::vector<pid_t> ReapChildren(milliseconds timeout) {
  std::vector<pid_t> alive;
  for (pid_t child : common::ListChildren()) {
    if (!WaitGone(child, timeout)) alive.push_back(child);
  }
  for (pid_t child : alive) {
    kill(-child, SIGKILL);
    kill(child, SIGKILL);
  }
  common::KillAndReapAllChildren(SIGKILL, std::chrono::steady_clock::now() + timeout);
  return alive;
}

std::string FreePort() { return std::to_string(common::PickFreePort("127.0.0.1", {}).value_or(0)); }

int FreePortPair() {
  for (int attempt = 0; attempt < 100; ++attempt) {
    int port = common::PickFreePort("127.0.0.1", {}).value_or(0);
    if (port <= 0 || port >= 65535) continue;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port + 1));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool free = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (free) return port;
  }
  return 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, separator)) parts.push_back(part);
  return parts;
}

std::string GangrunBinary() { return GANGRUN_BIN_DIR "/gangrun"; }
std::string MsrunBinary() { return GANGRUN_BIN_DIR "/msrun"; }
std::string TorchrunBinary() { return GANGRUN_BIN_DIR "/torchrun"; }
std::string TestWorkerBinary() { return GANGRUN_BIN_DIR "/test_worker"; }

bool Shell(const std::string& command) {
  return std::system(("(" + command + ") >/dev/null 2>&1").c_str()) == 0;
}

bool MakeTestCertificates(const std::string& dir, const std::string& name) {
  return Shell("cd " + dir +
               " && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem "
               "-days 1 -subj /CN=gangrun-test-ca"
               " && openssl req -newkey rsa:2048 -nodes -keyout " +
               name + ".key -out " + name +
               ".csr -subj /CN=127.0.0.1"
               " && printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth,"
               "clientAuth\\n' > " +
               name +
               ".cnf"
               " && openssl x509 -req -in " +
               name +
               ".csr -CA ca.pem -CAkey ca.key "
               "-CAcreateserial -out " +
               name + ".pem -days 1 -extfile " + name + ".cnf");
}

}  // namespace gangrun::testing
