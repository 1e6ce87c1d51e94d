#pragma once
// A launcher's node: one per host. It joins the scheduler, and for each generation the
// scheduler starts it spawns this host's processes (through a ProcessManager), reports
// their starts and exits, stops them when told to, and ends when the scheduler says the
// job is finished. Every command carries a generation; stale ones are refused.
//
// Its Supervisor (node/supervisor.h) watches its workers: their GANGRUN_PROGRESS reports, the
// hang rules the scheduler gives with each generation, torch FileTimers, and stack capture
// when the scheduler asks.
//
// Runs on the io_context's single thread (its strand). It owns its ProcessManager and its
// Supervisor; the backend, clock, link and the Supervision's parts must outlive it.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/check.h"
#include "common/clock.h"
#include "gangrun/v1/session.pb.h"
#include "node/device_holders.h"
#include "node/kernel_log.h"
#include "node/process_manager.h"
#include "node/supervisor.h"

namespace gangrun::node {

// The node's way to the scheduler: in-process for the launcher that hosts it
// (launcher/local_link.h), a resumable session otherwise (node/remote_link.h).
class SchedulerLink {
 public:
  virtual ~SchedulerLink() = default;
  virtual void Send(const v1::NodeEvent& event) = 0;
};

// When a node sends a Heartbeat message (Node::SendHeartbeat; the rendezvous benchmark's
// simulated nodes follow the same rule). The interval a HeartbeatPolicy asks for, never
// shorter than the node's own heartbeat interval:
common::Duration MessageIntervalFor(common::Duration heartbeat_interval,
                                    const v1::HeartbeatPolicy& policy);
// Whether the heartbeat tick at `now` sends one, the last message of any kind having gone at
// `last_sent`: with half an interval of slack (ticks are not exact); a zero
// `message_interval` (no policy yet) means every tick.
bool HeartbeatMessageDue(common::TimePoint now, common::TimePoint last_sent,
                         common::Duration heartbeat_interval, common::Duration message_interval);

class Node : private Supervisor::Owner {
 public:
  // Less free space than this on the log directory's file system counts as full.
  static constexpr unsigned long long kLogSpaceLow = 4096;
  struct Options {
    std::string node_name;
    std::string host_address;
    std::vector<std::string> addresses;  // this host's others (JoinRequest.addresses)
    std::string topology_domain;         // JoinRequest.topology_domain
    std::string agent;                   // JoinRequest.agent
    int node_rank = -1;
    int local_worker_num = 1;
    int free_port = 0;  // a free port on this host, offered for MASTER_PORT
    // This launcher's view of the job, checked by the scheduler (JoinRequest).
    int world_size = 0;
    int min_world_size = 0;
    std::string run_id;  // only when given explicitly
    std::string personality;
    common::Duration grace = std::chrono::seconds(30);
    size_t log_tail_lines = 20;
    common::Duration heartbeat_interval = std::chrono::seconds(1);
    // How long to wait for the first generation; negative = forever.
    common::Duration formation_timeout = common::Duration(-1);
    // Where the workers' logs are ("" = the current directory): its file system is watched
    // at every heartbeat, and an exit while it is or was full reports lost log output.
    std::string log_dir;
    // --health_check: the process to run before joining and whenever the scheduler asks
    // (CheckHealth), its output in its log_path; no exec_path = none.
    ProcessSpec health_check;
    common::Duration health_check_timeout = std::chrono::seconds(60);
    // The kernel's log (node/kernel_log.h): /dev/kmsg, a text file, or "" = none. Each failed
    // rank's report carries what it said since the generation started.
    std::string kernel_log = "/dev/kmsg";
    // The accelerators' device files (shell globs; node/device_holders.h): a failed rank's
    // report names the processes outside the job that hold one.
    std::vector<std::string> device_files = {"/dev/nvidia[0-9]*", "/dev/davinci[0-9]*",
                                             "/dev/accel/accel[0-9]*"};
    // This launcher hosts the scheduler: excluded from the job, it runs no more workers but
    // stays until the job ends (its scheduler serves the others).
    bool hosts_scheduler = false;
  };
  // Builds the processes of a generation from this node's rank assignment.
  using Planner = std::function<absl::StatusOr<std::vector<ProcessSpec>>(
      const v1::RankAssignment& assignment, uint64_t generation, int restart_count)>;
  struct Callbacks {
    std::function<void(const ProcessSpec&, pid_t)> on_process_started;
    std::function<void(const ProcessSpec&, pid_t, common::ExitStatus)> on_process_exited;
    std::function<void(uint64_t generation)> on_generation_running;  // all processes started
    std::function<void(const v1::JobOutcome&)> on_finished;
  };

  Node(ProcessBackend& backend, common::Clock& clock, SchedulerLink& link, Options options,
       Planner planner, Callbacks callbacks, Supervision supervision = {});
  ~Node();

  void Start();  // sends the join request
  void OnCommand(const v1::NodeCommand& command);
  // The launcher got SIGINT/SIGTERM/SIGHUP: ask the scheduler to stop the job. A second
  // request stops the local processes at once (SIGKILL).
  void RequestStop(int sig);
  // One of --signals_to_forward reached this launcher: the scheduler passes it on to every
  // worker of the job.
  void ForwardSignal(int sig);
  // The link to the scheduler is gone: before the job formed the cluster did not form (an
  // unreachable scheduler, a rejected token); afterwards this node stops its processes and
  // ends with "node lost".
  void OnLinkLost(const std::string& reason, bool unauthenticated);
  // A daemon's job on a store (README "The daemon on a store"): the scheduler is gone but may
  // come back elsewhere. Detach keeps the workers running and sends nothing more (a stop
  // request is held); Reattach joins the next scheduler on `link` with the generation this
  // node runs (JoinRequest.resume), then sends what it held.
  void Detach(const std::string& reason);
  void Reattach(SchedulerLink& link);
  bool finished() const { return finished_; }
  // Where the workers' reports go (the channels deliver them there themselves).
  Supervisor& supervisor() { return supervisor_; }

 private:
  void OnStart(uint64_t generation, const v1::StartGeneration& start);
  void OnProcessExited(const ProcessSpec& spec, pid_t pid, common::ExitStatus status,
                       bool stopped_by_us);
  void OnSpawnFailed(const ProcessSpec& spec, const absl::Status& status);
  void Send(v1::NodeEvent event) override;
  // Supervisor::Owner
  const std::map<pid_t, ProcessSpec>* Running() const override {
    return processes_ ? &processes_->running() : nullptr;
  }
  uint64_t generation() const override { return generation_; }
  void SendHeartbeat();
  // Looks at the free space of the log directory's file system; remembers that it was full.
  void CheckLogSpace();
  void FinishLocally(v1::JobOutcome outcome);
  void SendJoin();
  void OnExcluded(const std::string& reason);
  // health.cc: runs the health check; `done(healthy, message)` on the strand.
  void RunHealthCheck(std::function<void(bool healthy, std::string message)> done);
  void OnHealthCheckEnded(common::ExitStatus status);
  void AnswerHealthCheck(uint64_t round);
  void OnReadLog(const v1::ReadLog& read);

  ProcessBackend& backend_;
  common::Clock& clock_;
  SchedulerLink* link_;
  bool detached_ = false;
  v1::ResumeGeneration resume_;  // this generation as far as it went, for a Reattach
  std::optional<v1::NodeEvent> held_stop_;
  Options options_;
  Planner planner_;
  Callbacks callbacks_;
  uint64_t generation_ = 0;
  size_t expected_ = 0;
  size_t started_ = 0;
  bool finished_ = false;
  int stop_requests_ = 0;
  std::unique_ptr<ProcessManager> processes_;
  bool spare_ = false;  // waiting as a spare (SpareStandby) until a StartGeneration
  int last_node_rank_ = -1;
  std::optional<v1::JobOutcome> excluded_;  // hosting the scheduler: exit with it at the end
  // The health check running now, its timer, and who waits for its verdict.
  std::unique_ptr<ProcessManager> health_;
  std::unique_ptr<common::Timer> health_timer_;
  bool health_timed_out_ = false;
  std::function<void(bool, std::string)> health_done_;
  std::unique_ptr<common::Timer> heartbeat_timer_;
  // How often a Heartbeat message goes (the heartbeat interval unless the scheduler watches
  // this node's connection), and when the last message of any kind went.
  common::Duration message_interval_ = common::Duration::zero();
  common::TimePoint last_sent_;
  std::unique_ptr<common::Timer> formation_timer_;
  // Set when the node ends on its own (scheduler lost): reported once processes are gone.
  std::optional<v1::JobOutcome> local_outcome_;
  std::string log_space_lost_;              // why log output may be lost ("" while there is space)
  std::map<int, std::string> log_of_rank_;  // this generation's ranks' logs (gangrun logs)
  KernelLog kernel_log_;                    // marked as each generation starts
  // This generation's holders of the devices outside the job, found at its first failure.
  std::optional<std::vector<std::string>> device_holders_;
  Supervisor supervisor_;          // last but the strand: gone first, while the node is whole
  common::ThreadAffinity strand_;  // the io_context's thread: every entry point checks it
};

}  // namespace gangrun::node
