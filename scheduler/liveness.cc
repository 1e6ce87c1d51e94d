// How the scheduler knows its nodes are alive: the heartbeat sweep, connection activity,
// its own stalls, and sessions that never join. Part of the Scheduler actor (scheduler.h):
// the same strand, the same state.
//
// Two signs of life, read by one sweep every node_timeout / 4:
//  - data on the node's connection. A node's gRPC channel sends a keepalive ping every
//    heartbeat interval, which gRPC's transport answers without waking the scheduler's code; a
//    quiet session's node a tick, which nobody reads (docs/WIRE.md); the kernel remembers when
//    the connection last received data (a session's connection reads it with getsockopt, the
//    others are found in a sock_diag dump: rpc/connection_activity.h).
//    A stopped, frozen or unreachable node sends nothing: it is lost after node_timeout of
//    silence, as with heartbeat messages, at the cost of one read per node per node timeout
//    instead of one message per node per interval.
//  - the node's own messages. A node whose connection is watched is told so
//    (HeartbeatPolicy) and sends a Heartbeat message only every kMessageIntervals node
//    timeouts, which proves that its launcher's event loop (not only gRPC's threads) runs;
//    kMissedMessages missed in a row lose it. A quiet session's node sends none at all: its
//    ticks come from that loop, so its connection's data already proves it runs
//    (NodeLink::DataProvesLoop), and the pongs that tell it the scheduler's loop runs come
//    from this sweep (NodeLink::OnSweep), not as answers to messages. At 12,500 nodes the
//    messages' waves, each read, checked and answered, were two thirds of the scheduler's
//    heartbeat cost. A node whose connection cannot be watched (the kernel refuses sock_diag,
//    a transport without TCP) keeps sending one every heartbeat interval and is judged by them
//    alone.
//
// Worked example: node_timeout 5 s and heartbeat interval 1 s give a sweep every 1.25 s; a
// node last heard at t=10 is lost by the first sweep after t=16, i.e. by t=17.25 at the
// latest: a cut or a pause of up to 5 s (plus the heartbeat it owed) costs nothing. A sweep due at
// t=20 that runs at t=29 (this process was stopped or its host stalled for 9 s) blames nobody:
// every node is treated as heard at t=29 and is lost only if it stays silent until t=34.
// The same node's launcher, if its event loop is stuck while gRPC still answers pings, is
// lost 30 s after its last message (3 missed messages, one every 10 s); a quiet session's,
// whose ticks stop with its loop, as a silent connection by t=17.25.

#include <algorithm>
#include <tuple>
#include <vector>

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

// What one sweep finds, in one pass over the nodes (at 12,500 nodes a pass costs more in
// cache misses than what it does).
struct Scheduler::Sweep {
  // Nodes whose links cannot read their own connections: id, node, remote endpoint.
  std::vector<std::tuple<int, NodeState*, std::string>> pending;
  std::vector<std::pair<int, std::string>> silent;  // lost, and why
  std::vector<int> unjoined;                        // sessions that never joined
};

void Scheduler::CheckHeartbeats() {
  if (options_.node_timeout <= common::Duration::zero()) return;
  const common::TimePoint now = clock_.Now();
  const common::Duration period = options_.node_timeout / 4;
  if (sweep_due_ != common::TimePoint() && now - sweep_due_ > options_.node_timeout / 2) {
    OnSchedulerStalled(now - sweep_due_ + period);
  }
  Sweep sweep;
  for (auto& [id, node] : nodes_) {
    if (node.link == nullptr || node.link->InProcess()) continue;
    node.link->OnSweep();
    if (!node.joined && !node.spare && !node.excluded &&
        now - node.connected_at >= options_.join_timeout) {
      sweep.unjoined.push_back(id);
      continue;
    }
    node.last_message = std::max(node.last_message, node.link->LastHeartbeat());
    node.last_seen = std::max(node.last_seen, node.last_message);
    if (!ReadConnectionActivity(id, node, now, sweep)) continue;
    if (auto why = Silence(node, now)) sweep.silent.emplace_back(id, std::move(*why));
  }
  ReadActivityDump(now, sweep);
  CloseSilentSessions(sweep.unjoined);
  for (const auto& [id, why] : sweep.silent) {
    auto it = nodes_.find(id);
    if (it == nodes_.end() || state_ == State::kFinished) continue;
    OnNodeLost(id, it->second, FailureCause::kHeartbeatTimeout, why);
  }
  if (state_ == State::kFinished) return;
  sweep_due_ = now + period;
  heartbeat_timer_ = clock_.After(period, [this] { CheckHeartbeats(); });
}

void Scheduler::OnConnectionData(NodeState& node, common::TimePoint at) {
  node.last_seen = std::max(node.last_seen, at);
  if (node.watched) return;
  node.watched = true;
  SendHeartbeatPolicy(node, node.link->DataProvesLoop()
                                ? milliseconds(kMaxIntervalMs)
                                : options_.node_timeout * kMessageIntervals);
}

// A node heard within the node timeout (and the interval it may be late by) cannot be lost at
// this sweep: its connection is read only once it could be, about once per node timeout
// instead of once per sweep. A session's connection tells its kernel's figure itself (one
// getsockopt); the others (gRPC's) wait for one sock_diag dump (false).
bool Scheduler::ReadConnectionActivity(int id, NodeState& node, common::TimePoint now,
                                       Sweep& sweep) {
  if (node.watched && now - node.last_seen <= options_.node_timeout + options_.heartbeat_interval) {
    return true;
  }
  if (auto since = node.link->SinceLastData()) {
    OnConnectionData(node, now - *since);
    return true;
  }
  std::string peer = node.link->PeerEndpoint();
  if (!read_activity_ || peer.empty()) return true;
  sweep.pending.emplace_back(id, &node, std::move(peer));
  return false;
}

void Scheduler::ReadActivityDump(common::TimePoint now, Sweep& sweep) {
  if (sweep.pending.empty()) return;
  auto activity = read_activity_();
  if (activity.ok()) {
    activity_error_.clear();
    for (auto& [id, node, peer] : sweep.pending) {
      auto found = activity->find(peer);
      if (found != activity->end()) OnConnectionData(*node, now - found->second);
    }
  } else {
    StopWatching(now, activity.status());
  }
  for (auto& [id, node, peer] : sweep.pending) {
    if (auto why = Silence(*node, now)) sweep.silent.emplace_back(id, std::move(*why));
  }
}

// The connections cannot be read (the kernel refused, or this process ran out of file
// descriptors): every node watched through them goes back to a Heartbeat message per
// interval, and gets a fresh node timeout for its messages to come.
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
    if (!node.watched || node.link == nullptr || node.link->SinceLastData()) continue;
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
  if (!(node.joined && !node.lost && !node.ended) && !(node.spare && !node.lost)) {
    return std::nullopt;
  }
  if (now - node.last_seen > options_.node_timeout + options_.heartbeat_interval) {
    const auto silence = duration_cast<milliseconds>(now - node.last_seen).count();
    return "no heartbeat for " + std::to_string(silence) + " ms" +
           (node.watched ? " (its connection was silent)" : "");
  }
  const auto message_timeout = options_.node_timeout * kMessageIntervals * kMissedMessages;
  const bool loop_proven = node.link != nullptr && node.link->DataProvesLoop();
  if (node.watched && !loop_proven && now - node.last_message >= message_timeout) {
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

void Scheduler::CloseSilentSessions(const std::vector<int>& silent) {
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
