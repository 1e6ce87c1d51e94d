#include "agent/health_probe.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>

#include "common/logging.h"
#include "common/spawn.h"

namespace gangrun::agent {

struct HealthProbe::Running {
  explicit Running(boost::asio::io_context& io) : out(io) {}
  pid_t pid = 0;
  boost::asio::posix::stream_descriptor out;  // its stdout and stderr
  std::array<char, 4096> buf{};
  std::string tail;  // the last kTailBytes of its output
  bool read_all = false;
  bool timed_out = false;
  std::optional<common::ExitStatus> exit;
  std::unique_ptr<common::Timer> timer;
  std::vector<Done> done;
};

HealthProbe::HealthProbe(boost::asio::io_context& io, common::Clock& clock, std::string command,
                         common::Duration timeout)
    : io_(io), clock_(clock), command_(std::move(command)), timeout_(timeout) {}

HealthProbe::~HealthProbe() {
  if (running_ && !running_->exit) kill(-running_->pid, SIGKILL);
}

void HealthProbe::Run(Done done) {
  if (running_) {
    running_->done.push_back(std::move(done));
    return;
  }
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    return done(false, "health check '" + command_ + "' could not start: " + std::strerror(errno));
  }
  common::SpawnOptions spawn;
  spawn.exec_path = "/bin/sh";
  spawn.argv = {"/bin/sh", "-c", command_};
  spawn.env = common::CurrentEnvironment();
  spawn.parent_death_signal = SIGKILL;  // nothing of it outlives the agent
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  spawn.fds = {{0, devnull}, {1, out[1]}, {2, out[1]}};
  auto pid = common::Spawn(spawn);
  close(devnull);
  close(out[1]);
  if (!pid.ok()) {
    close(out[0]);
    return done(false, "health check '" + command_ +
                           "' could not start: " + std::string(pid.status().message()));
  }
  common::Logger("agent")->info("running the health check (the daemon's probe): {}", command_);
  auto running = std::make_shared<Running>(io_);
  running->pid = *pid;
  running->out.assign(out[0]);
  running->done.push_back(std::move(done));
  running->timer = clock_.After(timeout_, [running] {
    running->timed_out = true;
    kill(-running->pid, SIGKILL);  // its group: whatever it started goes too
  });
  running_ = running;
  Read(running);
}

void HealthProbe::Read(std::shared_ptr<Running> running) {
  running->out.async_read_some(boost::asio::buffer(running->buf),
                               [this, running](const boost::system::error_code& ec, size_t n) {
                                 running->tail.append(running->buf.data(), n);
                                 if (running->tail.size() > kTailBytes) {
                                   running->tail.erase(0, running->tail.size() - kTailBytes);
                                 }
                                 if (ec) {
                                   running->read_all = true;
                                   return MaybeDone(running);
                                 }
                                 Read(running);
                               });
}

bool HealthProbe::OnReaped(pid_t pid, common::ExitStatus status) {
  if (!running_ || running_->pid != pid) return false;
  running_->exit = status;
  MaybeDone(running_);
  return true;
}

void HealthProbe::MaybeDone(std::shared_ptr<Running> running) {  // a copy: it resets running_
  if (!running->read_all || !running->exit || running_ != running) return;
  running_.reset();
  running->timer.reset();
  std::string last = running->tail;
  while (!last.empty() && (last.back() == '\n' || last.back() == '\r')) last.pop_back();
  if (const size_t newline = last.rfind('\n'); newline != std::string::npos) {
    last.erase(0, newline + 1);
  }
  const bool healthy = running->exit->success() && !running->timed_out;
  std::string message =
      "health check '" + command_ + "' " +
      (running->timed_out
           ? "timed out after " +
                 std::to_string(
                     std::chrono::duration_cast<std::chrono::seconds>(timeout_).count()) +
                 " s"
           : running->exit->ToString());
  if (!last.empty()) message += ": " + last;
  for (auto& done : running->done) done(healthy, message);
}

}  // namespace gangrun::agent
