#pragma once
// The per-host agent (`gangrun agent`): registers with a daemon (`gangrun scheduler`) and
// waits for work. For each job placed on it, it starts one ordinary launcher (this binary,
// with the arguments the daemon chose) that joins the job's own scheduler port as a node,
// relays the launcher's console output to the daemon, and reports its exit.
//
// Who a job runs as: the user --run_as names (the agent then runs as root and its launchers
// drop to that user before they start), else the agent's own user. The submitter's exported
// environment reaches the job's processes only: each launcher runs with the agent's
// environment and gets the workers' in a memfd (so a submitter's LD_PRELOAD, say, never loads
// into the launcher itself).
//
// Guarantee: the agent is a child subreaper, each launcher gets PR_SET_PDEATHSIG(SIGKILL),
// and a killed launcher's process keeper kills its workers; so nothing a job started outlives
// its agent. If the daemon goes away the agent keeps its launchers (their jobs end on their
// own when the job's scheduler is gone, or, on a store, go on under the next active daemon)
// and registers again, with the jobs it still runs, when a daemon is back.

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "agent/health_probe.h"
#include "agent/job_logs.h"
#include "common/check.h"
#include "common/clock.h"
#include "common/exit_status.h"
#include "common/spawn.h"
#include "gangrun/v1/daemon.grpc.pb.h"
#include "rpc/client_stream.h"

namespace gangrun::agent {

class Agent {
 public:
  struct Options {
    std::string master;           // the daemon, host:port; several daemons on a store: a,b,...
    std::string master_host;      // the first one's host
    std::string name;             // default: hostname
    std::string topology_domain;  // its launchers' --topology_domain ("" = none)
    std::string address;          // default: this host's address towards the daemon
    int slots = 1;
    std::string log_root;  // each job logs to <log_root>/<job id> unless it says otherwise
    // > 0: a job's <log_root>/<job id> is removed this many days after it was last written
    // (agent/job_logs.h: PruneJobLogs), at the start and hourly; 0 = kept. An absolute
    // log_root only.
    double log_retention_days = 0;
    // Run when the daemon probes this agent (a quarantined one; agent/health_probe.h); "" =
    // none: only `gangrun undrain` releases it.
    std::string health_check;
    common::Duration health_check_timeout = std::chrono::seconds(60);
    std::string self_exe;  // this binary, to start launchers
    std::string token;
    std::shared_ptr<grpc::ChannelCredentials> credentials;  // null = insecure
    // Who the jobs run as (--run_as): unset, the agent's own user.
    struct RunAs {
      std::string name;
      std::string home;
      common::SpawnCredentials credentials;
    };
    std::optional<RunAs> run_as;
  };
  struct Callbacks {
    std::function<void()> on_registered;               // every (re)registration
    std::function<void(const std::string&)> on_fatal;  // the daemon refused us
  };

  Agent(boost::asio::io_context& io, common::Clock& clock, Options options, Callbacks callbacks);
  ~Agent();

  void Start();
  // Stops every launcher (`sig`, SIGKILL on a second call) and runs `done` once all have
  // exited and been reaped.
  void Stop(int sig, std::function<void()> done);
  int running() const { return static_cast<int>(launchers_.size()); }

 private:
  struct Pipe;
  struct Launcher;
  using Stream = rpc::ClientStream<v1::AgentEvent, v1::AgentCommand>;

  void Connect();
  void OnCommand(const v1::AgentCommand& command);
  void OnStreamDone(const grpc::Status& status);
  void Run(const v1::RunLauncher& run);
  void ReadPipe(const std::shared_ptr<Launcher>& launcher, Pipe& pipe);
  std::vector<std::string> LauncherOwnEnvironment(const std::vector<std::string>& agent_env,
                                                  const std::string& job_id) const;
  // HOME, USER and LOGNAME of the --run_as user.
  void SetIdentity(std::vector<std::string>& env) const;
  // Unless the job names its log directory, its logs go under --log_root (made the run-as
  // user's own there).
  absl::Status PlaceLogs(v1::LaunchSpec& spec, const std::string& job_id) const;
  // A job's launcher's two memory files: the workers' environment (descriptor 3) and the
  // whole launch spec (descriptor 4); (workers' environment, spec).
  absl::StatusOr<std::pair<int, int>> LauncherFiles(
      const v1::LaunchSpec& spec, const std::vector<std::string>& agent_env) const;
  // Relays a launcher's output, or drops and counts it while too much waits for the daemon.
  void SendOutput(Launcher& launcher, std::string lines);
  void Reap();
  void MaybeReport(std::shared_ptr<Launcher> launcher);
  void Send(v1::AgentEvent event);
  // `gangrun logs --job` of an ended job (agent/job_logs.h): which ranks' logs this host
  // holds, and a piece of one.
  void FindLogs(const v1::FindJobLogs& find);
  void ReadLog(const v1::ReadJobLog& read);
  // --log_retention_days: one pass now, the next in an hour.
  void PruneLogs();
  const std::string& master() const { return masters_[current_]; }
  std::string MasterHost() const;

  boost::asio::io_context& io_;
  common::Clock& clock_;
  Options options_;
  Callbacks callbacks_;
  std::vector<std::unique_ptr<v1::Daemon::Stub>> stubs_;  // one per daemon; before stream_
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<common::Timer> reconnect_timer_;
  common::Duration backoff_;
  boost::asio::signal_set sigchld_;
  std::map<std::string, std::shared_ptr<Launcher>> launchers_;  // by job id
  std::vector<std::string> masters_;  // --master, split: the daemon that stands by is skipped
  size_t current_ = 0;
  // Launchers that ended while no daemon heard of it: told at the next registration.
  std::vector<v1::LauncherExited> unreported_;
  JobLogServer job_logs_;                       // `gangrun logs --job` of the jobs that ended here
  std::unique_ptr<HealthProbe> probe_;          // with --health_check
  void Probe();                                 // the daemon's AgentProbe
  std::unique_ptr<common::Timer> prune_timer_;  // PruneLogs' next pass
  bool connected_ = false;
  bool stopping_ = false;
  std::function<void()> on_stopped_;
  common::ThreadAffinity strand_;  // the io_context's thread: every entry point checks it
};

}  // namespace gangrun::agent
