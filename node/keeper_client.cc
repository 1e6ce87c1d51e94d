#include "node/keeper_client.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "common/logging.h"
#include "common/service.h"
#include "common/spawn.h"
#include "common/status.h"
#include "gangrun/v1/keeper.pb.h"
#include "node/keeper.h"
#include "proto/conversions.h"

namespace gangrun::node {

namespace v1 = ::gangrun::v1;
using boost::asio::generic::seq_packet_protocol;

namespace {

// The keeper as a fork of this process, without an exec: no second start of a 20 MB program
// (its loader, its static constructors) before the first worker can be spawned. Only while
// this process has one thread (before any gRPC server or channel exists). The child takes the
// state a fresh keeper would have: its own process group, the user's file limit, no
// descriptor but stdio and its socket; RunKeeper sets every signal action back to the default
// and its own mask (until then every signal stays blocked, so no handler of ours runs).
absl::StatusOr<pid_t> ForkKeeper(int socket_fd) {
  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &old);
  const pid_t pid = fork();
  if (pid != 0) {
    const int error = errno;
    sigprocmask(SIG_SETMASK, &old, nullptr);
    if (pid < 0) return common::ErrnoToStatus(error, "fork");
    setpgid(pid, pid);  // as the child does: whichever runs first, the group exists
    return pid;
  }
  setpgid(0, 0);  // out of the terminal's foreground group
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = std::min<rlim_t>(common::OriginalFileLimit(), limit.rlim_max);
    setrlimit(RLIMIT_NOFILE, &limit);  // workers get the user's limit back
  }
  common::CloseDescriptorsFrom(3, socket_fd);
  prctl(PR_SET_NAME, "gangrun-keeper");
  _exit(RunKeeper(socket_fd));
}

// A keeper process: the launcher's end of its socket and its pid.
struct KeeperProcess {
  int fd = -1;
  pid_t pid = -1;
};

// The keeper forked by KeeperPrestart and not yet taken by Start.
KeeperProcess& PrestartedKeeper() {
  static KeeperProcess slot;
  return slot;
}

// Starts `keeper_argv`, or forks this process into the keeper when it is empty.
absl::StatusOr<KeeperProcess> StartKeeperProcess(const std::vector<std::string>& keeper_argv) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    return common::ErrnoToStatus(errno, "socketpair");
  }
  // Spawn requests carry whole environments: allow large packets.
  int size = 4 << 20;
  for (int fd : fds) {
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) != 0) {
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
    }
  }
  absl::StatusOr<pid_t> pid;
  if (keeper_argv.empty()) {
    pid = ForkKeeper(fds[1]);
  } else {
    common::SpawnOptions options;
    options.exec_path = keeper_argv.at(0);
    options.argv = keeper_argv;
    options.argv.push_back("3");
    options.env = common::CurrentEnvironment();
    options.fds = {{3, fds[1]}};
    options.new_process_group = true;                  // out of the terminal's foreground group
    options.file_limit = common::OriginalFileLimit();  // workers get the user's limit back
    pid = common::Spawn(options);
  }
  close(fds[1]);
  if (!pid.ok()) {
    close(fds[0]);
    return pid.status();
  }
  return KeeperProcess{fds[0], *pid};
}

// Waits for the keeper's exit and returns its wait status.
int ReapKeeper(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace

KeeperPrestart::KeeperPrestart() {
  KeeperProcess& slot = PrestartedKeeper();
  if (slot.fd >= 0) return;  // another one's: left to it
  // On failure, Start forks again and reports what fails.
  if (auto started = StartKeeperProcess({}); started.ok()) {
    slot = *started;
    forked_ = started->pid;
  }
}

KeeperPrestart::~KeeperPrestart() {
  KeeperProcess& slot = PrestartedKeeper();
  if (forked_ < 0 || slot.pid != forked_) return;  // none forked, or taken by Start
  close(slot.fd);  // the keeper, with nothing below it, exits at once
  ReapKeeper(slot.pid);
  slot = {};
}

absl::StatusOr<std::unique_ptr<KeeperClient>> KeeperClient::Start(
    boost::asio::io_context& io, const std::vector<std::string>& keeper_argv) {
  KeeperProcess& slot = PrestartedKeeper();
  absl::StatusOr<KeeperProcess> keeper = keeper_argv.empty() && slot.fd >= 0
                                             ? std::exchange(slot, KeeperProcess{})
                                             : StartKeeperProcess(keeper_argv);
  if (!keeper.ok()) {
    return absl::InternalError("cannot start the process keeper: " +
                               std::string(keeper.status().message()));
  }
  return std::unique_ptr<KeeperClient>(new KeeperClient(io, keeper->fd, keeper->pid));
}

KeeperClient::KeeperClient(boost::asio::io_context& io, int fd, pid_t keeper_pid)
    : socket_(io, seq_packet_protocol(AF_UNIX, 0), fd),
      keeper_pid_(keeper_pid),
      buffer_(new char[kBufferSize]) {
  ReadNext();
}

KeeperClient::~KeeperClient() {
  boost::system::error_code ec;
  socket_.close(ec);
  // Closing the socket makes the keeper kill everything and exit; reap it.
  if (!gone_) ReapKeeper(keeper_pid_);
}

void KeeperClient::Spawn(const ProcessSpec& spec, std::function<void(absl::StatusOr<pid_t>)> done) {
  GANGRUN_ON_STRAND(strand_);
  if (gone_) {
    done(absl::UnavailableError("the process keeper is gone"));
    return;
  }
  v1::KeeperRequest request;
  auto* spawn = request.mutable_spawn();
  uint64_t id = next_id_++;
  spawn->set_id(id);
  proto::ToProto(spec, spawn->mutable_program());
  spawn->set_log_path(spec.log_path);
  spawn->set_log_append(spec.log_append);
  spawn->set_log_header(spec.log_header);
  pending_spawns_.emplace(id, std::move(done));
  Send(request);
}

void KeeperClient::SignalGroup(pid_t pgid, int sig) {
  GANGRUN_ON_STRAND(strand_);
  if (gone_) return;
  v1::KeeperRequest request;
  request.mutable_signal()->set_pgid(pgid);
  request.mutable_signal()->set_signal(sig);
  Send(request);
}

void KeeperClient::OwnDirectory(const std::string& path) {
  GANGRUN_ON_STRAND(strand_);
  if (gone_) return;
  v1::KeeperRequest request;
  request.mutable_own_directory()->set_path(path);
  Send(request);
}

void KeeperClient::Shutdown(common::Duration grace, std::function<void()> done) {
  GANGRUN_ON_STRAND(strand_);
  on_shutdown_ = std::move(done);
  shutting_down_ = true;
  if (gone_) {
    auto callback = std::move(on_shutdown_);
    callback();
    return;
  }
  v1::KeeperRequest request;
  request.mutable_shutdown()->set_grace_ms(
      std::chrono::duration_cast<std::chrono::milliseconds>(grace).count());
  Send(request);
}

void KeeperClient::Send(const v1::KeeperRequest& request) {
  std::string bytes = request.SerializeAsString();
  boost::system::error_code ec;
  socket_.send(boost::asio::buffer(bytes), 0, ec);
  if (ec) {
    common::Logger("process")->error("cannot talk to the process keeper: {}", ec.message());
    if (request.has_spawn()) {
      auto it = pending_spawns_.find(request.spawn().id());
      if (it != pending_spawns_.end()) {
        auto callback = std::move(it->second);
        pending_spawns_.erase(it);
        callback(absl::UnavailableError("cannot talk to the process keeper: " + ec.message()));
      }
    }
  }
}

void KeeperClient::ReadNext() {
  socket_.async_receive(
      boost::asio::buffer(buffer_.get(), kBufferSize), receive_flags_,
      [this](const boost::system::error_code& ec, size_t size) {
        if (ec == boost::asio::error::operation_aborted) return;
        if (ec || size == 0) {
          OnKeeperGone();
          return;
        }
        v1::KeeperEvent event;
        if (event.ParseFromArray(buffer_.get(), static_cast<int>(size))) {
          if (event.has_spawned() || event.has_spawn_failed()) {
            uint64_t id = event.has_spawned() ? event.spawned().id() : event.spawn_failed().id();
            auto it = pending_spawns_.find(id);
            if (it != pending_spawns_.end()) {
              auto callback = std::move(it->second);
              pending_spawns_.erase(it);
              if (event.has_spawned()) {
                callback(static_cast<pid_t>(event.spawned().pid()));
              } else {
                callback(absl::FailedPreconditionError(event.spawn_failed().error()));
              }
            }
          } else if (event.has_exited() && on_exit_) {
            on_exit_(event.exited().pid(), proto::FromProto(event.exited().exit()));
          } else if (event.has_shutdown_complete() && on_shutdown_) {
            // Everything below the keeper is killed and reaped; its own exit (the teardown of
            // a forked copy of this process, ~0.5 ms) overlaps with what the caller does next
            // and is reaped by the destructor or the socket's end, whichever comes first.
            auto callback = std::move(on_shutdown_);
            callback();
          }
        }
        ReadNext();
      });
}

void KeeperClient::OnKeeperGone() {
  if (gone_) return;
  gone_ = true;
  const int status = ReapKeeper(keeper_pid_);
  if (shutting_down_) {
    if (on_shutdown_) {
      auto callback = std::move(on_shutdown_);
      callback();
    }
    return;
  }
  common::Logger("process")->error("the process keeper (pid {}) {}; its workers died with it",
                                   keeper_pid_,
                                   common::ExitStatus::FromWaitStatus(status).ToString());
  // The loss first, so that its owner knows why before the spawns it never answered fail.
  if (on_lost_) on_lost_();
  auto spawns = std::move(pending_spawns_);
  for (auto& [id, callback] : spawns) callback(absl::UnavailableError("process keeper lost"));
}

}  // namespace gangrun::node
