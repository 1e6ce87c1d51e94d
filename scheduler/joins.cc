// Admitting nodes: what a join must satisfy (its numbers, this job's options, the nodes
// already there), refusing a node alone when it does not, and checking what a joined node
// sends. Part of the Scheduler actor (scheduler.h): the same strand, the same state.

#include "common/logging.h"
#include "common/status.h"
#include "scheduler/adoption.h"
#include "scheduler/scheduler.h"

namespace gangrun::scheduler {

absl::Status Scheduler::CheckJoinAllowed(const KnownNode& node, const v1::JoinRequest& join) const {
  RETURN_IF_ERROR(CheckJoinRequest(join, identity_));
  if (node.joined) {
    return absl::FailedPreconditionError(Describe(node) + " sent a second join; it has " +
                                         "already joined");
  }
  const bool forming = state_ == JobState::kForming || state_ == JobState::kAwaitingReplacement;
  const bool growing = Elastic() && (Live() || state_ == JobState::kStopping);
  if (!forming && !growing) {
    return absl::FailedPreconditionError(DescribeJoin(join) +
                                         " cannot join: the job has already formed");
  }
  NodeJoin candidate{join.node_name(), join.host_address(), join.node_rank(),
                     join.local_worker_num()};
  RETURN_IF_ERROR(CheckJoin(membership_, candidate, options_.world_size));
  if (!Elastic() && join.node_rank() >= 0) {
    // Every node brings at least one worker: the job can still have at most this many nodes.
    int joined = 0;
    for (const auto& [id, other] : nodes_) joined += other.joined;
    const int most =
        joined + 1 + (options_.world_size - membership_.workers - join.local_worker_num());
    if (join.node_rank() >= most) {
      return absl::OutOfRangeError(
          "node rank " + std::to_string(join.node_rank()) + " of " + DescribeJoin(join) +
          " is out of range: with the nodes already joined, the job has at most " +
          std::to_string(most) + " node(s)");
    }
  }
  return absl::OkStatus();
}

void Scheduler::Reject(KnownNode& node, const v1::JoinRequest& join, const absl::Status& why) {
  common::Logger("scheduler")->error("rejected: {}", std::string(why.message()));
  Record(Event::kNodeRejected, {{"node", Sanitize(join.node_name(), kMaxNameBytes)},
                                {"address", Sanitize(join.host_address(), 64)},
                                {"reason", std::string(why.message())}});
  v1::NodeCommand command;
  command.mutable_rejected()->set_reason(std::string(why.message()));
  SendAndClose(node, std::move(command));
}

void Scheduler::TakeJoinFacts(KnownNode& node, const v1::JoinRequest& join) const {
  node.free_port = join.free_port();
  node.addresses.assign(join.addresses().begin(), join.addresses().end());
  node.pid = join.pid();
  node.health_check = join.health_check();
  node.domain = Sanitize(join.topology_domain(), kMaxNameBytes);
  node.agent = Sanitize(join.agent(), kMaxNameBytes);
}

void Scheduler::OnJoin(int node_id, KnownNode& node, const v1::JoinRequest& join) {
  if (!join.has_resume() && adoption_ && options_.adopt_or_form && adoption_->generation == 0) {
    common::Logger("scheduler")
        ->info("{} joins afresh: the job had not started a generation; it forms as at first",
               DescribeJoin(join));
    adoption_.reset();
    formation_.Begin(started_at_);
  }
  if (join.has_resume() || adoption_) {
    if (join.has_resume()) return OnResume(node, join);
    return Reject(node, join,
                  absl::UnavailableError(DescribeJoin(join) +
                                         " cannot join now: the job's running generation is "
                                         "being taken over by a new scheduler"));
  }
  if (JoinsAsSpare(node, join)) return AdmitSpare(node, join);
  if (absl::Status status = CheckJoinAllowed(node, join); !status.ok()) {
    Reject(node, join, status);
    return;
  }
  NodeJoin candidate{join.node_name(), join.host_address(), join.node_rank(),
                     join.local_worker_num()};
  node.joined = true;
  node.join = candidate;
  TakeJoinFacts(node, join);
  membership_.Add(candidate);
  Record(Event::kNodeJoined, {{"node", join.node_name()},
                              {"address", join.host_address()},
                              {"pid", join.pid()},
                              {"node_rank", join.node_rank()},
                              {"workers", join.local_worker_num()},
                              {"present", membership_.workers},
                              {"world_size", options_.world_size}});
  common::Logger("scheduler")
      ->debug("node {} '{}' joined with {} worker(s); {} of {} workers present", node_id,
              join.node_name(), join.local_worker_num(), membership_.workers, options_.world_size);
  if (Live() || state_ == JobState::kStopping) {
    // An elastic job grows: the newcomer waits for the next generation.
    node.ended = true;
    Reform(Describe(node) + " joined");
    return;
  }
  if (membership_.workers == options_.world_size) {
    Form();
  } else if (membership_.workers >= min_world()) {
    const bool called = formation_.CallLast(options_.last_call, [this] {
      if (Forming() && membership_.workers >= min_world()) Form();
    });
    if (called) {
      common::Logger("scheduler")
          ->info("{} of {} to {} workers present; forming in {} ms unless more join",
                 membership_.workers, min_world(), options_.world_size,
                 std::chrono::duration_cast<std::chrono::milliseconds>(options_.last_call).count());
    }
  } else {
    LogProgress();
  }
}

bool Scheduler::RejectUnreachableNodeRanks() {
  if (Elastic()) return false;  // explicit node ranks only order an elastic job's nodes
  int count = 0;
  for (const auto& [id, node] : nodes_) count += node.joined;
  std::vector<int> refused;
  for (const auto& [id, node] : nodes_) {
    if (node.joined && node.join.requested_rank >= count) refused.push_back(id);
  }
  for (int id : refused) {
    KnownNode& node = nodes_.at(id);
    v1::JoinRequest join;
    join.set_node_name(node.join.node_name);
    join.set_host_address(node.join.host_address);
    join.set_pid(node.pid);
    Reject(node, join,
           absl::OutOfRangeError("node rank " + std::to_string(node.join.requested_rank) + " of " +
                                 DescribeJoin(join) + " is out of range: the job has " +
                                 std::to_string(count) + " node(s)"));
    membership_.Remove(node.join);
    Forget(id);
  }
  if (!refused.empty()) LogProgress();
  return !refused.empty();
}

bool Scheduler::CheckEvent(const KnownNode& node, const v1::NodeEvent& event) const {
  auto in_range = [&node](int rank) {
    // -1: the MindSpore scheduler process (msrun personality).
    return rank == -1 || (rank >= node.slot.first_rank &&
                          rank < node.slot.first_rank + node.join.local_worker_num);
  };
  std::string problem;
  if (event.has_worker_started()) {
    if (!in_range(event.worker_started().rank())) problem = "a start of a rank it does not run";
    if (event.worker_started().pid() <= 0) problem = "a start without a pid";
  } else if (event.has_worker_exited()) {
    if (!in_range(event.worker_exited().rank())) problem = "an exit of a rank it does not run";
    const auto& exited = event.worker_exited();
    if (exited.log_tail_size() > kMaxLogTailLines) problem = "an oversized log tail";
    if (exited.kernel_log_size() > kMaxLogTailLines) problem = "an oversized kernel log";
    if (exited.device_holders_size() > kMaxLogTailLines) problem = "too many device holders";
    if (exited.error().traceback_size() > kMaxLogTailLines ||
        exited.error().message().size() > kMaxReasonBytes * 4) {
      problem = "an oversized error";
    }
  } else if (event.has_progress()) {
    if (event.progress().ranks_size() > node.join.local_worker_num) problem = "oversized progress";
    for (const auto& rank : event.progress().ranks()) {
      if (rank.rank() < 0 || !in_range(rank.rank())) problem = "progress of a rank it does not run";
    }
  } else if (event.has_rank_hung()) {
    if (event.rank_hung().rank() < 0 || !in_range(event.rank_hung().rank())) {
      problem = "a hang of a rank it does not run";
    }
  } else if (event.has_timer_expired()) {
    if (event.timer_expired().rank() < 0 || !in_range(event.timer_expired().rank())) {
      problem = "a timer of a rank it does not run";
    }
  } else if (event.has_stacks_captured()) {
    if (event.stacks_captured().stacks_size() > node.join.local_worker_num) {
      problem = "oversized stacks";
    }
    for (const auto& stack : event.stacks_captured().stacks()) {
      if (stack.rank() < 0 || !in_range(stack.rank()))
        problem = "a stack of a rank it does not run";
    }
  }
  if (problem.empty()) return true;
  common::Logger("scheduler")->warn("ignoring {} from {}", problem, Describe(node));
  return false;
}

}  // namespace gangrun::scheduler
