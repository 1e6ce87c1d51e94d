#include "node/keeper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "common/descendants.h"
#include "common/exit_status.h"
#include "common/files.h"
#include "common/spawn.h"
#include "gangrun/v1/keeper.pb.h"
#include "proto/conversions.h"

namespace gangrun::node {
namespace {

namespace v1 = ::gangrun::v1;
using Clock = std::chrono::steady_clock;

class Keeper {
 public:
  Keeper(int socket_fd, int signal_fd) : socket_fd_(socket_fd), signal_fd_(signal_fd) {}

  int Run() {
    while (true) {
      pollfd fds[2] = {{socket_fd_, POLLIN, 0}, {signal_fd_, POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return KillEverythingAndExit(std::chrono::milliseconds(0));
      }
      if (fds[1].revents & POLLIN) OnChildSignal();
      if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        if (!OnRequest())
          return done_ ? Exit(0) : KillEverythingAndExit(std::chrono::milliseconds(0));
        if (done_) return Exit(0);
      }
    }
  }

 private:
  // Returns false when the launcher is gone.
  bool OnRequest() {
    ssize_t size = recv(socket_fd_, buffer_.data(), 0, MSG_PEEK | MSG_TRUNC);
    if (size <= 0) return false;
    // Kept between requests and only grown: no allocation and zeroing per spawn.
    if (buffer_.size() < static_cast<size_t>(size)) {
      buffer_.resize(std::max(static_cast<size_t>(size), 2 * buffer_.size()));
    }
    size = recv(socket_fd_, buffer_.data(), static_cast<size_t>(size), 0);
    if (size <= 0) return false;
    v1::KeeperRequest request;
    if (!request.ParseFromArray(buffer_.data(), static_cast<int>(size))) return true;
    switch (request.request_case()) {
      case v1::KeeperRequest::kSpawn:
        OnSpawn(request.spawn());
        break;
      case v1::KeeperRequest::kSignal:
        if (request.signal().pgid() > 1) kill(-request.signal().pgid(), request.signal().signal());
        break;
      case v1::KeeperRequest::kOwnDirectory:
        owned_directory_ = request.own_directory().path();
        break;
      case v1::KeeperRequest::kShutdown: {
        KillEverything(std::chrono::milliseconds(request.shutdown().grace_ms()));
        v1::KeeperEvent event;
        event.mutable_shutdown_complete();
        Send(event);
        done_ = true;
        break;
      }
      case v1::KeeperRequest::REQUEST_NOT_SET:
        break;
    }
    return true;
  }

  void OnSpawn(const v1::SpawnProcess& spawn) {
    v1::KeeperEvent event;
    int log_fd = -1;
    if (!spawn.log_path().empty()) {
      // Never through a link, never into somebody else's file (common/files.h).
      auto opened = common::OpenOwnFileForWriting(spawn.log_path(), spawn.log_append());
      if (!opened.ok()) {
        auto* failed = event.mutable_spawn_failed();
        failed->set_id(spawn.id());
        failed->set_error("the log file: " + std::string(opened.status().message()));
        Send(event);
        return;
      }
      log_fd = *opened;
    }
    if (log_fd >= 0 && !spawn.log_header().empty()) {
      (void)!write(log_fd, spawn.log_header().data(), spawn.log_header().size());
    }
    common::SpawnOptions& options = spawn_options_;
    proto::FromProto(spawn.program(), &options);
    options.fds.clear();
    if (log_fd >= 0) options.fds = {{1, log_fd}, {2, log_fd}};
    options.new_process_group = true;
    options.parent_death_signal = SIGKILL;
    options.signal_actions_are_default = true;  // RunKeeper made them so
    auto pid = common::Spawn(options);
    if (log_fd >= 0) close(log_fd);
    if (pid.ok()) {
      workers_.insert(*pid);
      event.mutable_spawned()->set_id(spawn.id());
      event.mutable_spawned()->set_pid(*pid);
    } else {
      event.mutable_spawn_failed()->set_id(spawn.id());
      event.mutable_spawn_failed()->set_error(std::string(pid.status().message()));
    }
    Send(event);
  }

  void OnChildSignal() {
    signalfd_siginfo info;
    while (read(signal_fd_, &info, sizeof(info)) == sizeof(info)) {
    }
    while (true) {
      int status;
      pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid < 0 && errno == EINTR) continue;
      if (pid <= 0) break;
      if (workers_.erase(pid) == 0) continue;  // an adopted orphan: reaped, nothing to report
      v1::KeeperEvent event;
      event.mutable_exited()->set_pid(pid);
      *event.mutable_exited()->mutable_exit() =
          proto::ToProto(common::ExitStatus::FromWaitStatus(status));
      Send(event);
    }
  }

  // SIGTERM to everything below us, SIGKILL to whatever is left after `grace`.
  void KillEverything(std::chrono::milliseconds grace) {
    if (grace.count() > 0) {
      for (pid_t pgid : workers_) kill(-pgid, SIGTERM);
      common::KillAndReapAllChildren(SIGTERM, Clock::now() + grace);
    }
    for (pid_t pgid : workers_) kill(-pgid, SIGKILL);
    while (!common::KillAndReapAllChildren(SIGKILL, Clock::now() + std::chrono::seconds(10))) {
    }
    workers_.clear();
  }

  int KillEverythingAndExit(std::chrono::milliseconds grace) {
    KillEverything(grace);
    return Exit(0);
  }

  // Every worker is gone: what only they used goes too.
  int Exit(int code) {
    if (!owned_directory_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(owned_directory_, ignored);
    }
    return code;
  }

  void Send(const v1::KeeperEvent& event) {
    std::string bytes = event.SerializeAsString();
    while (send(socket_fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
  }

  int socket_fd_;
  int signal_fd_;
  bool done_ = false;
  std::set<pid_t> workers_;
  std::string owned_directory_;
  // One request; sized by the first (an environment's few KiB), not zeroed ahead of it: the
  // pages of a 64 KiB buffer written at the keeper's start were a page fault each.
  std::vector<char> buffer_;
  // Kept between spawns: its ~70 environment strings are assigned into, not allocated, from
  // the second spawn on.
  common::SpawnOptions spawn_options_;
};

}  // namespace

int RunKeeper(int socket_fd) {
  // Only a launcher starts a keeper; anything else on the descriptor would be waited on for
  // ever.
  int type = 0;
  socklen_t length = sizeof(type);
  if (getsockopt(socket_fd, SOL_SOCKET, SO_TYPE, &type, &length) != 0 || type != SOCK_SEQPACKET) {
    std::fprintf(stderr,
                 "gangrun: error: the process keeper is started by the launcher; descriptor %d "
                 "is not a launcher's socket\n",
                 socket_fd);
    return 2;
  }
  // Every action the default one, whatever the keeper inherited (a forked keeper: the
  // launcher's handlers and ignored SIGPIPE): its workers start with them so, and its spawns
  // need not reset them one by one. The only place a keeper's actions are reset.
  common::RestoreDefaultSignalActions();
  // Terminal and service-manager signals are the launcher's business; the keeper ends
  // only when the launcher says so or disappears.
  sigset_t blocked;
  sigemptyset(&blocked);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE}) {
    sigaddset(&blocked, sig);
  }
  sigprocmask(SIG_SETMASK, &blocked, nullptr);  // a forked keeper comes with everything blocked
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  int signal_fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd < 0 || !common::BecomeChildSubreaper().ok()) return 70;
  fcntl(socket_fd, F_SETFD, FD_CLOEXEC);
  Keeper keeper(socket_fd, signal_fd);
  return keeper.Run();
}

}  // namespace gangrun::node
