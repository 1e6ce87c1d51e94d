// How the scheduler knows its nodes are alive: the heartbeat sweep, connection activity,
// its own stalls, and sessions that never join. Part of the Scheduler actor (scheduler.h):
// the same strand, the same state.
//
// Two signs of life, read by one sweep every node_timeout / 4:
//  - data on the node's connection (rpc/connection_activity.h). A node's gRPC channel sends
//    a keepalive ping every heartbeat interval; gRPC's transport answers it without waking
//    the scheduler's code, and the kernel remembers when the connection last received data.
//    A stopped, frozen or unreachable node sends nothing: it is lost after node_timeout of
//    silence, as with heartbeat messages, at the cost of one netlink request per sweep for
//    all nodes instead of one message per node per interval.
//  - the node's own messages. A node whose connection is watched is told so
//    (HeartbeatPolicy) and sends a Heartbeat message only every kMessageIntervals node
//    timeouts, which proves that its launcher's event loop (not only gRPC's threads) runs;
//    kMissedMessages missed in a row lose it. A node whose connection cannot be watched (the
//    kernel refuses sock_diag, a transport without TCP) keeps sending one every heartbeat
//    interval and is judged by them alone.
//
// Worked example: node_timeout 5 s and heartbeat interval 1 s give a sweep every 1.25 s; a
// node last heard at t=10 is lost by the first sweep after t=16, i.e. by t=17.25 at the
// latest: a cut or a pause of up to 5 s (plus the heartbeat it owed) costs nothing. A sweep due at
// t=20 that runs at t=29 (this process was stopped or its host stalled for 9 s) blames nobody:
// every node is treated as heard at t=29 and is lost only if it stays silent until t=34.
// The same node's launcher, if its event loop is stuck while gRPC still answers pings, is
// lost 30 s after its last message (3 missed messages, one every 10 s).

#include <algorithm>

#include "common/logging.h"
#include "scheduler/scheduler.h"

namespace gangrun::scheduler {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

constexpr int64_t kMaxIntervalMs = int64_t{24} * 3600 * 1000;

void Scheduler::WatchConnections(ActivityReader reader) {
  GANGRUN_ON_STRAND(strand_);
  read_activity_ = std::move(reader);
}

void Scheduler::CheckHeartbeats() {
  if (options_.node_timeout <= common::Duration::zero()) return;
  const common::TimePoint now = clock_.Now();
  const common::Duration period = options_.node_timeout / 4;
  if (sweep_due_ != common::TimePoint() && now - sweep_due_ > options_.node_timeout / 2) {
    OnSchedulerStalled(now - sweep_due_ + period);
  }
  CloseSilentSessions(now);
  ReadConnectionActivity(now);
  std::vector<std::pair<int, std::string>> silent;
  for (auto& [id, node] : nodes_) {
    if (node.link == nullptr || node.link->InProcess()) continue;
    node.last_message = std::max(node.last_message, node.link->LastHeartbeat());
    node.last_seen = std::max(node.last_seen, node.last_message);
    if ((node.joined && !node.lost && !node.ended) || (node.spare && !node.lost)) {
      if (auto why = Silence(node, now)) silent.emplace_back(id, std::move(*why));
    }
  }
  for (const auto& [id, why] : silent) {
    auto it = nodes_.find(id);
    if (it == nodes_.end() || state_ == State::kFinished) continue;
    OnNodeLost(id, it->second, FailureCause::kHeartbeatTimeout, why);
  }
  if (state_ == State::kFinished) return;
  sweep_due_ = now + period;
  heartbeat_timer_ = clock_.After(period, [this] { CheckHeartbeats(); });
}

void Scheduler::ReadConnectionActivity(common::TimePoint now) {
  if (!read_activity_) return;
  std::vector<std::pair<NodeState*, std::string>> watchable;  // with their endpoints
  for (auto& [id, node] : nodes_) {
    if (node.link == nullptr || node.link->InProcess()) continue;
    std::string peer = node.link->PeerEndpoint();
    if (!peer.empty()) watchable.emplace_back(&node, std::move(peer));
  }
  if (watchable.empty()) return;
  auto activity = read_activity_();
  if (!activity.ok()) return StopWatching(now, activity.status());
  activity_error_.clear();
  for (auto& [node, peer] : watchable) {
    auto found = activity->find(peer);
    if (found == activity->end()) continue;
    node->last_seen = std::max(node->last_seen, now - found->second);
    if (node->watched) continue;
    node->watched = true;
    SendHeartbeatPolicy(*node, options_.node_timeout * kMessageIntervals);
  }
}

// The connections cannot be read (the kernel refused, or this process ran out of file
// descriptors): every watched node goes back to a Heartbeat message per interval, and gets
// a fresh node timeout for its messages to come.
void Scheduler::StopWatching(common::TimePoint now, const absl::Status& why) {
  if (activity_error_.empty()) {
    activity_error_ = std::string(why.message());
    common::Logger("scheduler")
        ->warn(
            "cannot read the nodes' connection activity ({}); nodes send heartbeat "
            "messages instead",
            activity_error_);
  }
  for (auto& [id, node] : nodes_) {
    if (!node.watched) continue;
    node.watched = false;
    node.last_seen = std::max(node.last_seen, now);
    SendHeartbeatPolicy(node, common::Duration::zero());
  }
}

void Scheduler::SendHeartbeatPolicy(NodeState& node, common::Duration message_interval) {
  v1::NodeCommand command;
  command.mutable_heartbeat_policy()->set_message_interval_ms(static_cast<uint32_t>(
      std::min<int64_t>(duration_cast<milliseconds>(message_interval).count(), kMaxIntervalMs)));
  node.link->Send(command);
}

std::optional<std::string> Scheduler::Silence(const NodeState& node, common::TimePoint now) const {
  if (now - node.last_seen > options_.node_timeout + options_.heartbeat_interval) {
    const auto silence = duration_cast<milliseconds>(now - node.last_seen).count();
    return "no heartbeat for " + std::to_string(silence) + " ms" +
           (node.watched ? " (its connection was silent)" : "");
  }
  const auto message_timeout = options_.node_timeout * kMessageIntervals * kMissedMessages;
  if (node.watched && now - node.last_message >= message_timeout) {
    const auto silence = duration_cast<milliseconds>(now - node.last_message).count();
    return "no message from its launcher for " + std::to_string(silence) +
           " ms while its connection still answered (its launcher is stuck)";
  }
  return std::nullopt;
}

void Scheduler::OnSchedulerStalled(common::Duration stalled) {
  const auto ms = duration_cast<milliseconds>(stalled).count();
  common::Logger("scheduler")
      ->warn(
          "the scheduler did not run for {} ms (its host stalled or its launcher was "
          "stopped); the nodes are not blamed for that silence",
          ms);
  Record(Event::kSchedulerStalled, {{"stalled_ms", ms}});
  const common::TimePoint now = clock_.Now();
  for (auto& [id, node] : nodes_) node.last_seen = node.last_message = now;
  stall_note_ = " (after this scheduler did not run for " + std::to_string(ms) + " ms)";
  stall_note_until_ = now + options_.node_timeout;
}

void Scheduler::CloseSilentSessions(common::TimePoint now) {
  std::vector<int> silent;
  for (const auto& [id, node] : nodes_) {
    if (!node.joined && !node.spare && !node.excluded && node.link != nullptr &&
        !node.link->InProcess() && now - node.connected_at >= options_.join_timeout) {
      silent.push_back(id);
    }
  }
  for (int id : silent) {
    common::Logger("scheduler")
        ->warn("closing a session that did not join within {} s",
               std::chrono::duration_cast<std::chrono::seconds>(options_.join_timeout).count());
    v1::NodeCommand command;
    command.mutable_rejected()->set_reason("no join request within the join timeout");
    SendAndClose(nodes_.at(id), std::move(command));
    nodes_.erase(id);
  }
}

}  // namespace gangrun::scheduler
