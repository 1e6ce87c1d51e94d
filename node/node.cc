#include "node/node.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>

#include "common/logging.h"
#include "node/error_file.h"
#include "node/log_files.h"
#include "proto/conversions.h"

namespace gangrun::node {

common::Duration MessageIntervalFor(common::Duration heartbeat_interval,
                                    const v1::HeartbeatPolicy& policy) {
  return std::max<common::Duration>(heartbeat_interval,
                                    std::chrono::milliseconds(policy.message_interval_ms()));
}

bool HeartbeatMessageDue(common::TimePoint now, common::TimePoint last_sent,
                         common::Duration heartbeat_interval, common::Duration message_interval) {
  return now - last_sent + heartbeat_interval / 2 >= message_interval;
}

Node::Node(ProcessBackend& backend, common::Clock& clock, SchedulerLink& link, Options options,
           Planner planner, Callbacks callbacks, Supervision supervision)
    : backend_(backend),
      clock_(clock),
      link_(&link),
      options_(std::move(options)),
      planner_(std::move(planner)),
      callbacks_(std::move(callbacks)),
      kernel_log_(options_.kernel_log),
      supervisor_(clock, *this, std::move(supervision)) {}

Node::~Node() = default;

void Node::Start() {
  GANGRUN_ON_STRAND(strand_);
  if (options_.health_check.exec_path.empty()) return SendJoin();
  // Checked before it joins: an unhealthy host never takes a place.
  RunHealthCheck([this](bool healthy, std::string message) {
    if (healthy) return SendJoin();
    common::Logger("node")->error("excluded before joining: {}", message);
    v1::JobOutcome outcome;
    outcome.set_kind(v1::JobOutcome::KIND_EXCLUDED);
    outcome.set_message("its health check failed: " + message);
    FinishLocally(std::move(outcome));
  });
}

void Node::SendJoin() {
  if (finished_) return;
  v1::NodeEvent event;
  auto* join = event.mutable_join();
  join->set_node_name(options_.node_name);
  join->set_host_address(options_.host_address);
  for (const auto& address : options_.addresses) join->add_addresses(address);
  join->set_topology_domain(options_.topology_domain);
  join->set_agent(options_.agent);
  join->set_node_rank(options_.node_rank);
  join->set_local_worker_num(options_.local_worker_num);
  join->set_free_port(options_.free_port);
  join->set_pid(getpid());
  join->set_world_size(options_.world_size);
  join->set_min_world_size(options_.min_world_size);
  join->set_run_id(options_.run_id);
  join->set_personality(options_.personality);
  join->set_health_check(!options_.health_check.exec_path.empty());
  if (generation_ > 0) *join->mutable_resume() = resume_;
  Send(std::move(event));
  SendHeartbeat();
  kernel_log_.Open();  // while the scheduler answers
  if (options_.formation_timeout >= common::Duration::zero()) {
    formation_timer_ = clock_.After(options_.formation_timeout, [this] {
      if (generation_ == 0) OnLinkLost("no answer from the scheduler in time", false);
    });
  }
}

void Node::CheckLogSpace() {
  const std::string dir = options_.log_dir.empty() ? "." : options_.log_dir;
  struct statvfs fs;
  if (statvfs(dir.c_str(), &fs) != 0) return;
  // What this process's workers may still use: root may also take the reserved blocks.
  const unsigned long long blocks = geteuid() == 0 ? fs.f_bfree : fs.f_bavail;
  const bool full = blocks * fs.f_frsize < kLogSpaceLow || (fs.f_files > 0 && fs.f_favail == 0);
  if (!full || !log_space_lost_.empty()) return;
  log_space_lost_ = "the file system of " + dir + " is full";
  common::Logger("node")->error("{}: worker log output is being lost", log_space_lost_);
}

// Every heartbeat interval: the log space, progress, and a Heartbeat message unless the
// scheduler watches this node's connection (HeartbeatPolicy) and the last message is recent.
// Any message counts: the scheduler hears it as a sign of life.
void Node::SendHeartbeat() {
  if (finished_) return;
  CheckLogSpace();
  supervisor_.SendProgress();
  if (HeartbeatMessageDue(clock_.Now(), last_sent_, options_.heartbeat_interval,
                          message_interval_)) {
    v1::NodeEvent event;
    event.mutable_heartbeat();
    Send(std::move(event));
  }
  heartbeat_timer_ = clock_.After(options_.heartbeat_interval, [this] { SendHeartbeat(); });
}

void Node::OnLinkLost(const std::string& reason, bool unauthenticated) {
  GANGRUN_ON_STRAND(strand_);
  if (finished_ || local_outcome_) return;
  v1::JobOutcome outcome;
  if (generation_ == 0) {
    outcome.set_kind(v1::JobOutcome::KIND_FORMATION_FAILED);
    // A refusal that names the token mismatch itself is said as it is (never "token
    // mismatch ...: ... (a token mismatch)").
    outcome.set_message(!unauthenticated ? "cannot join the scheduler: " + reason
                        : reason.find("token mismatch") != std::string::npos
                            ? reason
                            : "token mismatch with the scheduler: " + reason);
    FinishLocally(std::move(outcome));
    return;
  }
  outcome.set_kind(v1::JobOutcome::KIND_NODE_LOST);
  outcome.set_message("this node lost the scheduler: " + reason);
  common::Logger("node")->error("lost the scheduler ({}): stopping local processes", reason);
  local_outcome_ = std::move(outcome);
  if (processes_ && processes_->live() > 0) {
    processes_->StopAll(options_.grace);
  } else {
    FinishLocally(*local_outcome_);
  }
}

void Node::FinishLocally(v1::JobOutcome outcome) {
  if (finished_) return;
  finished_ = true;
  supervisor_.Stop();
  heartbeat_timer_.reset();
  formation_timer_.reset();
  if (callbacks_.on_finished) callbacks_.on_finished(outcome);
}

void Node::OnCommand(const v1::NodeCommand& command) {
  GANGRUN_ON_STRAND(strand_);
  // The logs stay readable to the end (`gangrun logs` reads what the ranks wrote last).
  if (command.has_read_log()) return OnReadLog(command.read_log());
  if (finished_) return;
  switch (command.command_case()) {
    case v1::NodeCommand::kStart:
      if (command.generation() <= generation_) {
        common::Logger("node")->warn("refusing stale start of generation {} (now {})",
                                     command.generation(), generation_);
        return;
      }
      OnStart(command.generation(), command.start());
      return;
    case v1::NodeCommand::kAbort:
      if (command.generation() > generation_ && !processes_) {
        // A spare that just took a place: it ran nothing of that generation.
        common::Logger("node")->debug("nothing of generation {} to stop", command.generation());
        return;
      }
      if (command.generation() != generation_) {
        common::Logger("node")->warn("refusing abort of generation {} (now {})",
                                     command.generation(), generation_);
        return;
      }
      common::Logger("node")->info("stopping generation {}: {}", generation_,
                                   command.abort().reason());
      if (processes_) processes_->StopAll(options_.grace);
      return;
    case v1::NodeCommand::kRejected: {
      v1::JobOutcome outcome;
      outcome.set_kind(v1::JobOutcome::KIND_FORMATION_FAILED);
      outcome.set_message(command.rejected().reason());
      FinishLocally(std::move(outcome));
      return;
    }
    case v1::NodeCommand::kFinished:
      FinishLocally(excluded_ ? *excluded_ : command.finished().outcome());
      return;
    case v1::NodeCommand::kSpare:
      spare_ = true;
      formation_timer_.reset();  // a spare may wait as long as the job runs
      common::Logger("node")->info(
          "waiting as a spare ({} spare(s) in the job): this node runs no worker until it takes "
          "a lost or excluded node's place",
          command.spare().spares());
      return;
    case v1::NodeCommand::kExcluded:
      OnExcluded(command.excluded().reason());
      return;
    case v1::NodeCommand::kCheckHealth:
      return AnswerHealthCheck(command.check_health().round());
    case v1::NodeCommand::kSignal:
      common::Logger("node")->info("passing {} on to this node's workers (job-wide)",
                                   common::SignalName(command.signal().signal()));
      if (processes_) processes_->SignalAll(command.signal().signal());
      return;
    case v1::NodeCommand::kCaptureStacks:
      if (command.generation() != generation_) return;
      supervisor_.CaptureStacks(command.capture_stacks());
      return;
    case v1::NodeCommand::kWaiting:
      // The launcher that hosts the scheduler said it already.
      if (!options_.hosts_scheduler) {
        common::Logger("node")->info("the scheduler is still {}", command.waiting().line());
      }
      return;
    case v1::NodeCommand::kHeartbeatPolicy:
      message_interval_ =
          MessageIntervalFor(options_.heartbeat_interval, command.heartbeat_policy());
      common::Logger("node")->debug(
          "heartbeat messages every {} ms",
          std::chrono::duration_cast<std::chrono::milliseconds>(message_interval_).count());
      return;
    default:
      common::Logger("node")->warn("ignoring an empty command");
  }
}

void Node::AnswerHealthCheck(uint64_t round) {
  RunHealthCheck([this, round](bool healthy, std::string message) {
    v1::NodeEvent event;
    event.mutable_health_checked()->set_round(round);
    event.mutable_health_checked()->set_healthy(healthy);
    event.mutable_health_checked()->set_message(std::move(message));
    Send(std::move(event));
  });
}

// `gangrun logs`: a piece of one of this generation's ranks' logs (node/log_files.h).
void Node::OnReadLog(const v1::ReadLog& read) {
  constexpr uint32_t kMaxPiece = 256 * 1024;
  v1::NodeEvent event;
  auto* answer = event.mutable_log_read();
  answer->set_request(read.request());
  answer->set_rank(read.rank());
  answer->set_offset(read.offset());
  auto log = log_of_rank_.find(read.rank());
  if (log == log_of_rank_.end() || log->second.empty()) {
    answer->set_error("this node has no log of rank " + std::to_string(read.rank()));
    answer->set_at_end(true);
    return Send(std::move(event));
  }
  // Whether it runs, before the read: a rank that had ended by then has all of its log in
  // the file, so an end of file then is the end of its log.
  bool running = false;
  if (processes_) {
    for (const auto& [pid, spec] : processes_->running()) running |= spec.rank == read.rank();
  }
  LogPiece piece = ReadLogPiece(log->second, read.offset(), read.tail_lines(),
                                std::clamp<uint32_t>(read.max_bytes(), 1, kMaxPiece));
  answer->set_data(std::move(piece.data));
  answer->set_next_offset(piece.next_offset);
  answer->set_at_end(piece.at_end);
  answer->set_error(piece.error);
  answer->set_running(running);
  Send(std::move(event));
}

void Node::OnStart(uint64_t generation, const v1::StartGeneration& start) {
  // OnCommand refuses a stale start (a peer's input); past it, going back is a bug.
  GANGRUN_CHECK(generation > generation_, "a node's generation numbers only increase");
  generation_ = generation;
  formation_timer_.reset();
  if (spare_) {
    spare_ = false;
    common::Logger("node")->warn(
        "a spare no more: this node takes node rank {} (ranks {}..{})",
        start.assignment().node_rank(), start.assignment().first_rank(),
        start.assignment().first_rank() + start.assignment().local_worker_num() - 1);
  }
  health_.reset();  // a health check is over before any generation starts
  last_node_rank_ = start.assignment().node_rank();
  resume_.Clear();
  resume_.set_generation(generation);
  kernel_log_.Mark();
  device_holders_.reset();
  *resume_.mutable_start() = start;
  auto plan = planner_(start.assignment(), generation, start.restart_count());
  if (!plan.ok()) {
    ProcessSpec spec;
    spec.rank = start.assignment().first_rank();
    OnSpawnFailed(spec, plan.status());
    v1::NodeEvent ended;
    ended.mutable_generation_ended();
    Send(std::move(ended));
    return;
  }
  ProcessManager::Callbacks callbacks;
  callbacks.on_started = [this](const ProcessSpec& spec, pid_t pid) {
    v1::NodeEvent event;
    event.mutable_worker_started()->set_rank(spec.rank);
    event.mutable_worker_started()->set_pid(pid);
    Send(std::move(event));
    if (callbacks_.on_process_started) callbacks_.on_process_started(spec, pid);
    if (++started_ == expected_ && callbacks_.on_generation_running) {
      callbacks_.on_generation_running(generation_);
    }
  };
  callbacks.on_spawn_failed = [this](const ProcessSpec& spec, const absl::Status& status) {
    OnSpawnFailed(spec, status);
  };
  callbacks.on_exited = [this](const ProcessSpec& spec, pid_t pid, common::ExitStatus status,
                               bool stopped_by_us) {
    OnProcessExited(spec, pid, status, stopped_by_us);
  };
  callbacks.on_all_ended = [this] {
    if (local_outcome_) {
      FinishLocally(*local_outcome_);
      return;
    }
    v1::NodeEvent event;
    event.mutable_generation_ended();
    Send(std::move(event));
  };
  processes_.reset();  // the previous generation's (all ended): it lets go of the backend
  processes_ = std::make_unique<ProcessManager>(backend_, clock_, std::move(callbacks));
  supervisor_.StartGeneration(start);
  log_of_rank_.clear();
  expected_ = plan->size();
  started_ = 0;
  processes_->SpawnAll(std::move(*plan), [this, &start](ProcessSpec& spec) {
    if (spec.rank >= 0) log_of_rank_[spec.rank] = spec.log_path;
    return supervisor_.AddWorker(start, spec);
  });
}

void Node::OnProcessExited(const ProcessSpec& spec, pid_t pid, common::ExitStatus status,
                           bool stopped_by_us) {
  auto log = common::Logger("node");
  supervisor_.RemoveWorker(spec, pid, /*read_last=*/true);
  if (spec.rank >= 0) {
    // A rank that ended as asked (0, or stopped by us) is a debug line: the job's own lines
    // say as much once ("job succeeded", the report's "stopped because of it"). Anything
    // else is said.
    const bool usual = stopped_by_us || (status.signal == 0 && status.code == 0);
    log->log(usual ? spdlog::level::debug : spdlog::level::info, "rank {} (pid {}) {}", spec.rank,
             pid, status.ToString());
  } else {
    log->info("MindSpore scheduler process (pid {}) {}", pid, status.ToString());
  }
  if (callbacks_.on_process_exited) callbacks_.on_process_exited(spec, pid, status);
  v1::NodeEvent event;
  auto* exited = event.mutable_worker_exited();
  exited->set_rank(spec.rank);
  exited->set_pid(pid);
  *exited->mutable_exit() = proto::ToProto(status);
  exited->set_stopped_by_us(stopped_by_us);
  exited->set_log_path(spec.log_path);
  if (!status.success() && !stopped_by_us) {
    for (auto& line : ReadLastLines(spec.log_path, options_.log_tail_lines)) {
      exited->add_log_tail(std::move(line));
    }
    if (!spec.error_file.empty()) {
      if (auto error = ReadWorkerError(spec.error_file)) *exited->mutable_error() = *error;
    }
    for (auto& line : kernel_log_.Since()) exited->add_kernel_log(std::move(line));
    if (!device_holders_) {
      device_holders_ = DeviceHolders(DeviceFiles(options_.device_files),
                                      processes_ ? processes_->groups() : std::set<pid_t>{});
    }
    for (const auto& line : *device_holders_) exited->add_device_holders(line);
  }
  CheckLogSpace();
  exited->set_log_lost(log_space_lost_);
  Send(std::move(event));
}

void Node::OnSpawnFailed(const ProcessSpec& spec, const absl::Status& status) {
  common::Logger("node")->error("rank {} could not start: {}", spec.rank,
                                std::string(status.message()));
  supervisor_.RemoveWorker(spec, 0, /*read_last=*/false);
  v1::NodeEvent event;
  auto* exited = event.mutable_worker_exited();
  exited->set_rank(spec.rank);
  exited->set_pid(0);
  exited->mutable_exit()->set_exit_code(127);
  exited->set_log_path(spec.log_path);
  exited->add_log_tail("could not start: " + std::string(status.message()));
  Send(std::move(event));
}

void Node::RequestStop(int sig) {
  GANGRUN_ON_STRAND(strand_);
  if (finished_) return;
  if (++stop_requests_ > 1) {
    common::Logger("node")->warn("second {}: killing local processes now", common::SignalName(sig));
    if (processes_) processes_->StopAll(common::Duration::zero());
    return;
  }
  if (spare_ || excluded_) {
    // Not in the job: this launcher leaves, the job goes on.
    v1::JobOutcome outcome;
    outcome.set_kind(v1::JobOutcome::KIND_STOPPED_BY_SIGNAL);
    outcome.set_signal(sig);
    outcome.set_message("the launcher received " + common::SignalName(sig) + " (it was " +
                        (spare_ ? "a spare" : "excluded") + ")");
    FinishLocally(std::move(outcome));
    return;
  }
  v1::NodeEvent event;
  event.mutable_stop_request()->set_signal(sig);
  event.mutable_stop_request()->set_reason("launcher on " + options_.node_name + " received " +
                                           common::SignalName(sig));
  Send(std::move(event));
  if (generation_ == 0) {
    // Not part of a running job yet: nothing to stop anywhere on our behalf.
    v1::JobOutcome outcome;
    outcome.set_kind(v1::JobOutcome::KIND_STOPPED_BY_SIGNAL);
    outcome.set_signal(sig);
    FinishLocally(std::move(outcome));
    return;
  }
  // Stop here at once; the scheduler stops the other nodes.
  if (processes_) processes_->StopAll(options_.grace);
}

void Node::ForwardSignal(int sig) {
  GANGRUN_ON_STRAND(strand_);
  if (finished_) return;
  v1::NodeEvent event;
  event.mutable_forward_signal()->set_signal(sig);
  Send(std::move(event));
}

void Node::OnExcluded(const std::string& reason) {
  v1::JobOutcome outcome;
  outcome.set_kind(v1::JobOutcome::KIND_EXCLUDED);
  outcome.set_message(reason);
  common::Logger("node")->error("excluded from the job: {}", reason);
  if (!options_.hosts_scheduler) return FinishLocally(std::move(outcome));
  // This launcher's scheduler serves the others: it stays, runs nothing, and exits 6 at the end.
  common::Logger("node")->warn(
      "this launcher hosts the scheduler: it runs no more workers and stays until the job ends");
  excluded_ = std::move(outcome);
}

void Node::Send(v1::NodeEvent event) {
  event.set_generation(generation_);
  if (event.has_worker_started()) *resume_.add_started() = event.worker_started();
  if (event.has_worker_exited()) *resume_.add_exited() = event.worker_exited();
  if (event.has_generation_ended()) resume_.set_ended(true);
  if (detached_) {
    if (event.has_stop_request()) held_stop_ = std::move(event);
    return;  // what the next scheduler needs goes with the resume
  }
  last_sent_ = clock_.Now();
  link_->Send(event);
}

}  // namespace gangrun::node
