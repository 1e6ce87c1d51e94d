#pragma once
// The process manager: the local processes of one node, by rank. Spawns them through a
// ProcessBackend, tracks their state, and stops them the one way gangrun stops processes:
// SIGTERM to each process group, then SIGKILL to the groups still alive when the grace
// period ends. Stop is idempotent; a repeated stop may only shorten the grace.
//
// Runs on the io_context's single thread (the node's strand); the backend and the clock
// must outlive it. Worked example of the grace logic: StopAll(30s) at t=0 sends SIGTERM and
// arms the kill at t=30; StopAll(0s) at t=2 moves the kill to t=2; StopAll(60s) at t=5
// changes nothing.

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "common/check.h"
#include "common/clock.h"
#include "node/process_backend.h"

namespace gangrun::node {

class ProcessManager {
 public:
  struct Callbacks {
    std::function<void(const ProcessSpec&, pid_t)> on_started;
    std::function<void(const ProcessSpec&, const absl::Status&)> on_spawn_failed;
    // `stopped_by_us`: the process ended after we started stopping it.
    std::function<void(const ProcessSpec&, pid_t, common::ExitStatus, bool stopped_by_us)>
        on_exited;
    // Every process spawned so far has ended (or failed to start) and nothing is pending.
    std::function<void()> on_all_ended;
  };

  ProcessManager(ProcessBackend& backend, common::Clock& clock, Callbacks callbacks);
  ~ProcessManager();

  void Spawn(ProcessSpec spec);
  // A generation's processes, spawned in order: `prepare` readies each one just before its
  // spawn request (so the first request waits for one process's preparation, not for all of
  // them), and its error is that process's spawn failure. Nothing counts as ended before the
  // last one has been asked for.
  void SpawnAll(std::vector<ProcessSpec> specs,
                const std::function<absl::Status(ProcessSpec&)>& prepare);
  void StopAll(common::Duration grace);
  // Sends `sig` to every live process group (SIGUSR1/SIGUSR2 forwarding).
  void SignalAll(int sig);

  bool stopping() const { return stopping_; }
  // The processes spawned and not yet reaped, by pid.
  const std::map<pid_t, ProcessSpec>& running() const { return running_; }
  size_t live() const { return pending_ + running_.size(); }
  // Every process group it created (each process leads its own), ended ones included.
  const std::set<pid_t>& groups() const { return groups_; }

 private:
  void Request(ProcessSpec spec);  // one spawn request, already counted in pending_
  void OnSpawned(ProcessSpec spec, absl::StatusOr<pid_t> pid);
  void OnExited(pid_t pid, common::ExitStatus status);
  void OnGraceExpired();
  void MaybeAllEnded();

  ProcessBackend& backend_;
  common::Clock& clock_;
  Callbacks callbacks_;
  size_t pending_ = 0;                    // spawn requests without an answer yet
  std::map<pid_t, ProcessSpec> running_;  // spawned, not yet reaped
  std::set<pid_t> groups_;                // every process group we created
  bool stopping_ = false;
  bool killed_ = false;  // SIGKILL already sent
  std::optional<common::TimePoint> kill_deadline_;
  std::unique_ptr<common::Timer> grace_timer_;
  common::ThreadAffinity strand_;  // the io_context's thread: every entry point checks it
};

}  // namespace gangrun::node
