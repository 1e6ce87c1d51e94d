#include "node/process_manager.h"

#include <csignal>

#include "common/logging.h"

namespace gangrun::node {

ProcessManager::ProcessManager(ProcessBackend& backend, common::Clock& clock, Callbacks callbacks)
    : backend_(backend), clock_(clock), callbacks_(std::move(callbacks)) {
  backend_.SetExitHandler([this](pid_t pid, common::ExitStatus status) { OnExited(pid, status); });
}

ProcessManager::~ProcessManager() { backend_.SetExitHandler(nullptr); }

void ProcessManager::Spawn(ProcessSpec spec) {
  GANGRUN_ON_STRAND(strand_);
  ++pending_;
  Request(std::move(spec));
}

void ProcessManager::SpawnAll(std::vector<ProcessSpec> specs,
                              const std::function<absl::Status(ProcessSpec&)>& prepare) {
  GANGRUN_ON_STRAND(strand_);
  // All pending first: a failure answered at once must not look like the end of them all.
  pending_ += specs.size();
  for (ProcessSpec& spec : specs) {
    absl::Status prepared = prepare ? prepare(spec) : absl::OkStatus();
    if (!prepared.ok()) {
      OnSpawned(std::move(spec), prepared);
      continue;
    }
    Request(std::move(spec));
  }
}

void ProcessManager::Request(ProcessSpec spec) {
  // One spec, read by the backend and then kept by its answer: a copy per worker (its ~70
  // environment strings) was ~5% of a 32-worker launch's instructions (issue #24).
  auto owned = std::make_shared<ProcessSpec>(std::move(spec));
  backend_.Spawn(*owned, [this, owned](absl::StatusOr<pid_t> pid) {
    OnSpawned(std::move(*owned), std::move(pid));
  });
}

void ProcessManager::OnSpawned(ProcessSpec spec, absl::StatusOr<pid_t> pid) {
  --pending_;
  if (!pid.ok()) {
    if (callbacks_.on_spawn_failed) callbacks_.on_spawn_failed(spec, pid.status());
    MaybeAllEnded();
    return;
  }
  common::Logger("process")->debug("rank {} started as pid {}", spec.rank, *pid);
  groups_.insert(*pid);
  auto [it, inserted] = running_.emplace(*pid, std::move(spec));
  if (callbacks_.on_started) callbacks_.on_started(it->second, *pid);
  // A process that starts while we are stopping is stopped at once.
  if (stopping_) backend_.SignalGroup(*pid, killed_ ? SIGKILL : SIGTERM);
}

void ProcessManager::OnExited(pid_t pid, common::ExitStatus status) {
  auto it = running_.find(pid);
  if (it == running_.end()) return;
  ProcessSpec spec = std::move(it->second);
  running_.erase(it);
  if (callbacks_.on_exited) callbacks_.on_exited(spec, pid, status, stopping_);
  MaybeAllEnded();
}

void ProcessManager::StopAll(common::Duration grace) {
  GANGRUN_ON_STRAND(strand_);
  if (grace < common::Duration::zero()) grace = common::Duration::zero();
  const common::TimePoint deadline = clock_.Now() + grace;
  if (!stopping_) {
    stopping_ = true;
    for (pid_t pgid : groups_) backend_.SignalGroup(pgid, SIGTERM);
  } else if (killed_ || (kill_deadline_ && *kill_deadline_ <= deadline)) {
    return;  // a repeat may only shorten the grace
  }
  kill_deadline_ = deadline;
  if (grace == common::Duration::zero()) {
    grace_timer_.reset();
    OnGraceExpired();
    return;
  }
  grace_timer_ = clock_.After(grace, [this] { OnGraceExpired(); });
}

void ProcessManager::OnGraceExpired() {
  grace_timer_.reset();
  killed_ = true;
  if (!running_.empty()) {
    common::Logger("process")->info("grace period over: SIGKILL to {} process group(s)",
                                    running_.size());
  }
  // Every group, also those whose leader already exited but whose members stayed.
  for (pid_t pgid : groups_) backend_.SignalGroup(pgid, SIGKILL);
}

void ProcessManager::SignalAll(int sig) {
  GANGRUN_ON_STRAND(strand_);
  for (const auto& [pid, spec] : running_) backend_.SignalGroup(pid, sig);
  if (pending_ > 0) {
    // Not sent later: a process that just started has no handler yet, and most signals'
    // default is to end it.
    common::Logger("process")->warn("{} process(es) still starting do not get signal {}", pending_,
                                    sig);
  }
}

void ProcessManager::MaybeAllEnded() {
  if (pending_ == 0 && running_.empty()) {
    grace_timer_.reset();
    if (callbacks_.on_all_ended) callbacks_.on_all_ended();
  }
}

}  // namespace gangrun::node
