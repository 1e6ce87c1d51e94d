#include "agent/agent.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/read.hpp>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/job_logs.h"
#include "common/console.h"
#include "common/env_names.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/spawn.h"
#include "common/status.h"
#include "launcher/launch_spec.h"
#include "launcher/launcher.h"
#include "proto/conversions.h"
#include "rpc/channel.h"
#include "rpc/session_auth.h"

namespace gangrun::agent {

using std::chrono::milliseconds;

namespace {
constexpr size_t kMaxPartialLine = 64 * 1024;
// Output waiting to reach the daemon (which waits for its submitter): past this, output is
// dropped and counted rather than held.
constexpr size_t kMaxQueuedOutput = 8 << 20;
}  // namespace

// One of a launcher's output pipes, read into whole lines.
struct Agent::Pipe {
  Pipe(boost::asio::io_context& io, int fd, bool is_stdout) : fd(io, fd), is_stdout(is_stdout) {}
  boost::asio::posix::stream_descriptor fd;
  bool is_stdout;
  std::array<char, 16384> buf{};
  std::string partial;  // a line not yet ended
};

// One job's launcher on this host.
struct Agent::Launcher {
  Launcher(boost::asio::io_context& io, int out_fd, int err_fd)
      : out(io, out_fd, true), err(io, err_fd, false) {}
  std::string job_id;
  pid_t pid = 0;
  Pipe out;
  Pipe err;
  std::deque<std::string> err_tail;  // last lines of its stderr, for a failure report
  uint64_t dropped_output = 0;       // bytes of stdout not relayed since the last that was
  int open_pipes = 2;
  std::optional<common::ExitStatus> exit;
};

Agent::Agent(boost::asio::io_context& io, common::Clock& clock, Options options,
             Callbacks callbacks)
    : io_(io),
      clock_(clock),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)),
      backoff_(milliseconds(200)),
      sigchld_(io, SIGCHLD),
      job_logs_(options_.log_root, options_.run_as
                                       ? std::optional<uid_t>(options_.run_as->credentials.uid)
                                       : std::nullopt) {
  if (!options_.health_check.empty()) {
    probe_ = std::make_unique<HealthProbe>(io_, clock_, options_.health_check,
                                           options_.health_check_timeout);
  }
}

Agent::~Agent() {
  if (stream_) stream_->CancelAndWait();
}

std::string Agent::MasterHost() const {
  auto parsed = common::ParseHostPort(master(), "--master");
  return parsed.ok() ? parsed->host : options_.master_host;
}

void Agent::Start() {
  GANGRUN_ON_STRAND(strand_);
  masters_ = absl::StrSplit(options_.master, ',');
  // One stub per daemon for the agent's life: a call uses its stub until gRPC lets go of it.
  for (const std::string& master : masters_) {
    stubs_.push_back(v1::Daemon::NewStub(rpc::MakeChannel(
        master, options_.credentials, options_.token, "", std::chrono::seconds(10))));
  }
  sigchld_.async_wait([this](const boost::system::error_code& ec, int) {
    if (!ec) Reap();
  });
  PruneLogs();
  Connect();
}

void Agent::PruneLogs() {
  if (options_.log_retention_days <= 0 || options_.log_root.empty()) return;
  std::set<std::string> running;
  for (const auto& [job_id, launcher] : launchers_) running.insert(job_id);
  const auto before = std::chrono::system_clock::now() -
                      std::chrono::duration_cast<std::chrono::system_clock::duration>(
                          std::chrono::duration<double>(options_.log_retention_days * 86400));
  std::string error;
  const auto removed = PruneJobLogs(options_.log_root, before, running, &error);
  if (!removed.empty()) {
    common::Logger("agent")->info(
        "removed the logs of {} job(s) last written over {} day(s) ago from {} "
        "(--log_retention_days)",
        removed.size(), options_.log_retention_days, options_.log_root);
  }
  if (!error.empty()) {
    common::Logger("agent")->warn("could not remove a job's logs: {}", error);
  }
  prune_timer_ = clock_.After(std::chrono::hours(1), [this] { PruneLogs(); });
}

void Agent::Connect() {
  if (stopping_) return;
  stream_.reset();  // cancelled and let go of by gRPC
  stream_ = std::make_unique<Stream>(
      io_, [this](const v1::AgentCommand& command) { OnCommand(command); },
      [this](const grpc::Status& status) { OnStreamDone(status); });
  // wait_for_ready: the daemon may start after us (or restart); we wait for it. With several
  // daemons, one that does not answer is passed over for the next.
  stream_->Begin(masters_.size() == 1, [this](auto* context, auto* reactor) {
    stubs_[current_]->async()->Agent(context, reactor);
  });
  v1::AgentEvent event;
  auto* reg = event.mutable_register_();
  reg->set_name(options_.name);
  reg->set_address(options_.address);
  reg->set_slots(options_.slots);
  reg->set_pid(getpid());
  reg->set_health_check(probe_ != nullptr);
  for (const auto& [job_id, launcher] : launchers_) {
    if (!launcher->exit) reg->add_running_jobs(job_id);
  }
  for (const auto& exited : unreported_) *reg->add_exited() = exited;
  stream_->Queue(event);
}

void Agent::OnStreamDone(const grpc::Status& status) {
  connected_ = false;
  if (stopping_) return;
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    callbacks_.on_fatal("the daemon at " + options_.master + " rejected our token");
    return;
  }
  const std::string lost = master();
  current_ = (current_ + 1) % masters_.size();
  // The next daemon of the list at once; once round the list, with a growing backoff.
  const common::Duration wait = current_ == 0 ? backoff_ : milliseconds(50);
  common::Logger("agent")->warn("lost the daemon at {} ({}); registering with {} in {} ms", lost,
                                status.error_message(), master(),
                                std::chrono::duration_cast<milliseconds>(wait).count());
  reconnect_timer_ = clock_.After(wait, [this] { Connect(); });
  if (current_ == 0) backoff_ = std::min<common::Duration>(backoff_ * 2, std::chrono::seconds(5));
}

void Agent::OnCommand(const v1::AgentCommand& command) {
  if (command.has_registered()) {
    connected_ = true;
    backoff_ = milliseconds(200);
    unreported_.clear();  // they went with the registration
    common::Logger("agent")->info("registered with the daemon at {} as agent {} ({} slot(s))",
                                  master(), command.registered().agent_id(), options_.slots);
    if (callbacks_.on_registered) callbacks_.on_registered();
  } else if (command.has_rejected()) {
    stopping_ = true;
    callbacks_.on_fatal("the daemon refused this agent: " + command.rejected().reason());
  } else if (command.has_run()) {
    Run(command.run());
  } else if (command.has_stop()) {
    auto it = launchers_.find(command.stop().job_id());
    if (it != launchers_.end() && !it->second->exit) {
      kill(it->second->pid, command.stop().signal() > 0 ? command.stop().signal() : SIGTERM);
    }
  } else if (command.has_find_logs()) {
    FindLogs(command.find_logs());
  } else if (command.has_read_log()) {
    ReadLog(command.read_log());
  } else if (command.has_probe()) {
    Probe();
  }
}

void Agent::Probe() {
  auto answer = [this](bool healthy, const std::string& message) {
    common::Logger("agent")->info("the daemon's probe: {}", message);
    v1::AgentEvent event;
    event.mutable_probed()->set_healthy(healthy);
    event.mutable_probed()->set_message(message);
    Send(std::move(event));
  };
  if (!probe_) return answer(false, "this agent has no --health_check");
  probe_->Run(answer);
}

void Agent::FindLogs(const v1::FindJobLogs& find) {
  v1::AgentEvent event;
  *event.mutable_logs_found() = job_logs_.Find(find.place());
  Send(std::move(event));
}

void Agent::ReadLog(const v1::ReadJobLog& read) {
  v1::AgentEvent event;
  *event.mutable_log_read() = job_logs_.Read(read);
  Send(std::move(event));
}

void Agent::Send(v1::AgentEvent event) {
  if (stream_ && connected_) stream_->Queue(event);
}

void Agent::SendOutput(Launcher& launcher, std::string lines) {
  if (!stream_ || !connected_) return;
  const size_t size = lines.size();
  if (launcher.dropped_output > 0) {
    lines = "gangrun: " + std::to_string(launcher.dropped_output) +
            " bytes of output were not relayed: the submitter did not keep up\n" + lines;
  }
  v1::AgentEvent event;
  event.mutable_output()->set_job_id(launcher.job_id);
  event.mutable_output()->set_data(std::move(lines));
  if (stream_->TryQueue(event, kMaxQueuedOutput)) {
    launcher.dropped_output = 0;
  } else {
    launcher.dropped_output += size;
  }
}

void Agent::Run(const v1::RunLauncher& run) {
  auto fail = [&](const std::string& error) {
    common::Logger("agent")->error("job {}: cannot start its launcher: {}", run.job_id(), error);
    v1::AgentEvent event;
    event.mutable_exited()->set_job_id(run.job_id());
    event.mutable_exited()->set_error(error);
    Send(std::move(event));
  };
  if (stopping_) return fail("the agent is stopping");
  if (launchers_.count(run.job_id()) > 0) return fail("job already running here");
  if (struct stat st; !run.spec().cwd().empty() &&
                      (stat(run.spec().cwd().c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
    return fail("the working directory " + run.spec().cwd() + " does not exist on " +
                common::Hostname() + " (gangrun submit runs the job where it was submitted from)");
  }
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return fail(std::strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return fail(std::strerror(errno));
  }
  auto close_pipes = [&] {
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
  };
  common::SpawnOptions spawn;
  spawn.exec_path = options_.self_exe;
  // The daemon chose the job's sizes, rank, port and run id; this host's part is where the
  // daemon is and, unless the job says, where the logs go.
  v1::LaunchSpec spec = run.spec();
  launcher::SetLaunchOption(spec, "master_addr", MasterHost());
  if (absl::Status placed = PlaceLogs(spec, run.job_id()); !placed.ok()) {
    close_pipes();
    return fail(std::string(placed.message()));
  }
  // Its command line is a label (`ps` shows the run id and the task); the options travel in
  // the spec, in a memory file the launcher reads.
  spawn.argv = {options_.self_exe};
  for (auto& arg : launcher::LaunchLabel(spec)) spawn.argv.push_back(std::move(arg));
  const std::vector<std::string> agent_env = common::CurrentEnvironment();
  auto files = LauncherFiles(spec, agent_env);
  if (!files.ok()) {
    close_pipes();
    return fail(std::string(files.status().message()));
  }
  const auto [workers_env, spec_file] = *files;
  spawn.env = LauncherOwnEnvironment(agent_env, run.job_id());
  spawn.cwd = spec.cwd();
  if (options_.run_as) spawn.run_as = options_.run_as->credentials;
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  spawn.fds = {{0, devnull}, {1, out[1]}, {2, err[1]}, {3, workers_env}, {4, spec_file}};
  spawn.parent_death_signal = SIGKILL;  // its keeper then kills the workers
  auto pid = common::Spawn(spawn);
  close(devnull);
  close(workers_env);
  close(spec_file);
  close(out[1]);
  close(err[1]);
  if (!pid.ok()) {
    close(out[0]);
    close(err[0]);
    return fail(std::string(pid.status().message()));
  }
  auto launcher = std::make_shared<Launcher>(io_, out[0], err[0]);
  launcher->job_id = run.job_id();
  launcher->pid = *pid;
  launchers_[run.job_id()] = launcher;
  common::Logger("agent")->info("job {}: launcher started (pid {}), scheduler port {}",
                                run.job_id(), *pid, launcher::LaunchOption(spec, "master_port"));
  ReadPipe(launcher, launcher->out);
  ReadPipe(launcher, launcher->err);
}

absl::StatusOr<std::pair<int, int>> Agent::LauncherFiles(
    const v1::LaunchSpec& spec, const std::vector<std::string>& agent_env) const {
  // The workers' environment: the submitter's, as --export chose (the launcher's own is the
  // agent's).
  std::vector<std::string> job_env = launcher::LauncherEnvironment(spec, agent_env);
  if (options_.run_as) SetIdentity(job_env);  // who the workers are, whoever submitted
  std::string env_bytes;
  for (const auto& entry : job_env) env_bytes.append(entry).push_back('\0');
  ASSIGN_OR_RETURN(const int workers_env, common::MemoryFile("gangrun-worker-env", env_bytes));
  auto spec_file = common::MemoryFile("gangrun-launch-spec", spec.SerializeAsString());
  if (!spec_file.ok()) {
    close(workers_env);
    return spec_file.status();
  }
  return std::make_pair(workers_env, *spec_file);
}

absl::Status Agent::PlaceLogs(v1::LaunchSpec& spec, const std::string& job_id) const {
  if (!launcher::LaunchOption(spec, "log_dir").empty() || options_.log_root.empty()) {
    return absl::OkStatus();
  }
  const std::string job_logs = options_.log_root + "/" + job_id;
  launcher::SetLaunchOption(spec, "log_dir", job_logs);
  if (!options_.run_as) return absl::OkStatus();
  // Made here, the run-as user's own: the launcher then finds a directory of its user's (under
  // a log root that it may enter).
  absl::Status made = common::MakeDirs(options_.log_root, 0755);
  if (made.ok()) made = common::MakeDirs(job_logs, 0700);
  if (!made.ok()) return made;
  if (chown(job_logs.c_str(), options_.run_as->credentials.uid, options_.run_as->credentials.gid) !=
      0) {
    return absl::UnavailableError("cannot give " + job_logs + " to " + options_.run_as->name +
                                  ": " + std::strerror(errno));
  }
  return absl::OkStatus();
}

void Agent::SetIdentity(std::vector<std::string>& env) const {
  env.erase(std::remove_if(env.begin(), env.end(),
                           [](const std::string& entry) {
                             return absl::StartsWith(entry, "HOME=") ||
                                    absl::StartsWith(entry, "USER=") ||
                                    absl::StartsWith(entry, "LOGNAME=");
                           }),
            env.end());
  env.push_back("HOME=" + options_.run_as->home);
  env.push_back("USER=" + options_.run_as->name);
  env.push_back("LOGNAME=" + options_.run_as->name);
}

std::vector<std::string> Agent::LauncherOwnEnvironment(const std::vector<std::string>& agent_env,
                                                       const std::string& job_id) const {
  std::vector<std::string> env;
  const std::string token_file = std::string(env::kToken) + "_FILE";
  for (const auto& entry : agent_env) {
    const std::string key = entry.substr(0, entry.find('='));
    // systemd's notify socket and watchdog belong to the agent, not to its jobs; so does the
    // daemon's token.
    if (key == "NOTIFY_SOCKET" || absl::StartsWith(key, "WATCHDOG_") ||
        absl::StartsWith(key, "LISTEN_") || key == env::kToken || key == token_file) {
      continue;
    }
    env.push_back(entry);
  }
  // The job's own token (rpc::JobToken): it reaches the job's scheduler and nothing else.
  if (!options_.token.empty()) {
    env.push_back(std::string(env::kToken) + "=" + rpc::JobToken(options_.token, job_id));
  }
  if (options_.run_as) SetIdentity(env);
  env.push_back(std::string(env::kNodeOnly) + "=1");
  env.push_back(std::string(env::kWorkerEnvFd) + "=3");
  env.push_back(std::string(env::kLaunchSpecFd) + "=4");
  env.push_back(std::string(env::kLaunchingAgent) + "=" + options_.name);
  if (!options_.topology_domain.empty()) {
    env.push_back(std::string(env::kLaunchingDomain) + "=" + options_.topology_domain);
  }
  return env;
}

void Agent::ReadPipe(const std::shared_ptr<Launcher>& launcher, Pipe& pipe) {
  pipe.fd.async_read_some(
      boost::asio::buffer(pipe.buf),
      [this, launcher, &pipe](const boost::system::error_code& ec, size_t n) {
        pipe.partial.append(pipe.buf.data(), n);
        // Whole lines only, so that lines of different hosts do not interleave at the submitter;
        // what is left at the end goes out as it is.
        // A line that never ends goes out in pieces rather than grow here.
        const size_t last_newline = pipe.partial.rfind('\n');
        size_t end = ec || pipe.partial.size() >= kMaxPartialLine ? pipe.partial.size()
                     : last_newline == std::string::npos          ? 0
                                                                  : last_newline + 1;
        if (end > 0) {
          std::string lines = pipe.partial.substr(0, end);
          pipe.partial.erase(0, end);
          if (pipe.is_stdout) {
            SendOutput(*launcher, std::move(lines));
          } else {
            for (absl::string_view line : absl::StrSplit(absl::StripSuffix(lines, "\n"), '\n')) {
              common::Stderr().Write("[job " + launcher->job_id + "] " + std::string(line) + "\n");
              launcher->err_tail.emplace_back(line);
              if (launcher->err_tail.size() > 5) launcher->err_tail.pop_front();
            }
          }
        }
        if (ec) {
          --launcher->open_pipes;
          MaybeReport(launcher);
          return;
        }
        ReadPipe(launcher, pipe);
      });
}

void Agent::Reap() {
  // We are a subreaper: besides our launchers, orphans of theirs may land here.
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    if (probe_ && probe_->OnReaped(pid, common::ExitStatus::FromWaitStatus(status))) continue;
    for (auto& [job_id, launcher] : launchers_) {
      if (launcher->pid != pid) continue;
      launcher->exit = common::ExitStatus::FromWaitStatus(status);
      common::Logger("agent")->info("job {}: launcher (pid {}) {}", job_id, pid,
                                    launcher->exit->ToString());
      MaybeReport(launcher);
      break;
    }
  }
  sigchld_.async_wait([this](const boost::system::error_code& ec, int) {
    if (!ec) Reap();
  });
}

void Agent::MaybeReport(std::shared_ptr<Launcher> launcher) {  // a copy: we erase the map's
  // Only once its output is all read and it has been reaped: output first, then the exit.
  if (launcher->open_pipes > 0 || !launcher->exit) return;
  if (launchers_.erase(launcher->job_id) == 0) return;
  v1::AgentEvent event;
  auto* exited = event.mutable_exited();
  exited->set_job_id(launcher->job_id);
  *exited->mutable_exit() = proto::ToProto(*launcher->exit);
  if (!launcher->exit->success() && !launcher->err_tail.empty()) {
    exited->set_error("launcher " + launcher->exit->ToString() + ": " + launcher->err_tail.back());
  }
  if (!stream_ || !connected_) unreported_.push_back(*exited);
  Send(std::move(event));
  if (stopping_ && launchers_.empty() && on_stopped_) std::exchange(on_stopped_, nullptr)();
}

void Agent::Stop(int sig, std::function<void()> done) {
  GANGRUN_ON_STRAND(strand_);
  const bool again = stopping_;
  stopping_ = true;
  reconnect_timer_.reset();
  if (!on_stopped_) on_stopped_ = std::move(done);
  if (launchers_.empty()) {
    if (on_stopped_) std::exchange(on_stopped_, nullptr)();
    return;
  }
  common::Logger("agent")->info("stopping {} launcher(s) with {}", launchers_.size(),
                                again ? "SIGKILL" : common::SignalName(sig));
  for (auto& [job_id, launcher] : launchers_) {
    if (!launcher->exit) kill(launcher->pid, again ? SIGKILL : sig);
  }
}

}  // namespace gangrun::agent
