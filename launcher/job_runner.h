#pragma once
// One host's part of a job, from the process keeper to the final report.
//
// Roles: the launcher whose --master_addr is this host hosts the scheduler (in-process, and on
// its port for the other nodes; scheduler_role.h) and talks to it over an in-process link;
// every other launcher (another host, or another launcher on this host that found the port
// taken) joins it as a node over a resumable session (node/remote_link.h). A simulation
// (--sim_level) runs the scheduler in-process only.
//
// Everything runs on one io_context, on the thread that calls Run(); the runner owns every
// component and outlives them all. Shutdown order: the scheduler ends the job (JobFinished) ->
// the keeper kills whatever is left below it and exits -> the console follower drains -> the
// gRPC server stops -> the io_context stops -> the report is printed.

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <memory>
#include <optional>
#include <thread>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/console.h"
#include "launcher/launcher.h"
#include "launcher/log_filters.h"
#include "launcher/scheduler_role.h"
#include "launcher/store_role.h"
#include "node/node.h"
#include "rpc/server.h"

namespace gangrun::node {
class KeeperClient;
class LogFollower;
class RemoteSchedulerLink;
class WorkerChannels;
}  // namespace gangrun::node

namespace gangrun::launcher {

// The detached supervisor's end of --join False's ready pipe: says "running" once, or how the
// job ended before its workers all ran.
class ReadyNotifier {
 public:
  explicit ReadyNotifier(int fd) : fd_(fd) {}
  ~ReadyNotifier();  // closes without a word: the foreground says the supervisor ended
  void Running();
  void Ended(const v1::JobOutcome& outcome);

 private:
  void Send(const std::string& bytes);
  int fd_;
};

// The service --health_port reports SERVING once this node's workers of the current generation
// run ("" is SERVING while the launcher lives).
inline constexpr char kNodeHealthService[] = "gangrun.v1.Node";

class JobRunner {
 public:
  JobRunner(const Options& options, const HostFacts& facts, const RunContext& context);
  ~JobRunner();
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  absl::StatusOr<v1::JobOutcome> Run();

 private:
  absl::Status Build();
  // The node, on the link to the scheduler (in-process or remote); again after a failover.
  absl::Status MakeNode();
  absl::Status MakeRemote(const std::string& target);
  void ConnectRemote();
  // A job with a store (store_role.h): the node lost its scheduler, the search for the next
  // one, what it found, and this launcher's scheduler stepping down.
  void OnSchedulerLost(const std::string& reason, bool unauthenticated);
  void Seek();
  void OnSought(absl::StatusOr<StoreTarget> target);
  void StepDown(const std::string& why);
  // A daemon's job (--store_follow): the node keeps its workers and rejoins the scheduler of
  // the daemon that adopts the job.
  void Follow(const std::string& reason);
  void OnFollowed(const std::string& reason, absl::StatusOr<StoreTarget> target);
  void EndWith(const v1::JobOutcome& outcome);
  absl::StatusOr<node::Node::Options> NodeOptions() const;
  node::ProcessSpec HealthCheckSpec() const;
  node::Node::Callbacks NodeCallbacks();
  // What the workers report to; without it the job runs unsupervised (an error only when
  // hang rules were asked for).
  absl::StatusOr<node::Supervision> Supervision();
  void OnProcessStarted(const node::ProcessSpec& spec, pid_t pid);
  void OnGenerationRunning(uint64_t generation);
  void OnFinished(const v1::JobOutcome& outcome);
  void OnKeeperLost();
  void StopLoop();
  void WaitForSignal();
  void OnSignal(int sig);
  void SetNodeHealth(bool serving);
  void Report();

  const Options& options_;
  HostFacts facts_;
  RunContext context_;
  ReadyNotifier ready_;
  boost::asio::io_context io_;
  common::AsioClock clock_;
  std::unique_ptr<node::KeeperClient> keeper_;
  SchedulerRole role_;
  std::unique_ptr<StoreRole> store_role_;  // with --store
  // A scheduler that stepped down, until its server has stopped.
  std::unique_ptr<SchedulerRole> retired_;
  bool seeking_ = false;  // the link was lost: seek once the node has ended
  // Set at the first command from the scheduler this node follows (a store's watch ends).
  std::shared_ptr<std::atomic<bool>> joined_;
  bool seek_pending_ = false;                   // a search is under way (no node exists meanwhile)
  std::optional<v1::JobOutcome> lost_outcome_;  // what ends the job if the search fails
  node::Supervision supervision_;
  std::unique_ptr<node::RemoteSchedulerLink> remote_;
  std::unique_ptr<rpc::Server> health_;  // with --health_port
  std::unique_ptr<common::ConsoleScope> console_;
  std::unique_ptr<node::LogFollower> follower_;
  std::unique_ptr<LogFilters> filters_;  // --duplicate_stdout_filters, ..._stderr_filters
  // What workers report to (GANGRUN_PROGRESS, TORCHELASTIC_TIMER_FILE) and the stack
  // sampler: made before the node and gone after it.
  std::unique_ptr<node::WorkerChannels> channels_;
  std::unique_ptr<node::Node> node_;
  boost::asio::signal_set signals_;
  std::optional<v1::JobOutcome> outcome_;
  bool ran_worker_ = false;  // a spare that was never needed ran none
  // The ranks started in this generation and one of their logs, for its "running" line.
  std::vector<int> started_ranks_;
  std::string started_log_;
  bool keeper_lost_ = false;  // its outcome stands; the reaper ends the loop
  std::thread reaper_;        // kills what a lost keeper left behind, off the loop
};

}  // namespace gangrun::launcher
