// The heartbeat sweep (scheduler/liveness.h).

#include "scheduler/liveness.h"

#include <algorithm>

#include "common/logging.h"

namespace gangrun::scheduler {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

// The longest message interval a node is told (a day: "none", for a node whose data proves
// its loop); HeartbeatPolicy.message_interval_ms is 32 bits.
constexpr int64_t kMaxIntervalMs = int64_t{24} * 3600 * 1000;

void Liveness::Add(int node_id, NodeLink* link) {
  const common::TimePoint now = clock_.Now();
  nodes_seen_[node_id] = Signs{link, now, now, false, now, false, now, {}};
}

void Liveness::Heard(int node_id) {
  auto it = nodes_seen_.find(node_id);
  if (it != nodes_seen_.end()) it->second.last_seen = it->second.last_message = clock_.Now();
}

void Liveness::Unlink(int node_id) {
  auto it = nodes_seen_.find(node_id);
  if (it != nodes_seen_.end()) it->second.link = nullptr;
}

common::TimePoint Liveness::HeardAt(int node_id) const {
  auto it = nodes_seen_.find(node_id);
  if (it == nodes_seen_.end()) return {};
  const Signs& signs = it->second;
  common::TimePoint heard = signs.last_seen;
  if (signs.link != nullptr) {
    heard = std::max(heard, signs.link->LastHeartbeat());
    // Between sweeps, a quiet node's last_seen may be a node timeout old.
    if (auto since = signs.link->SinceLastData()) heard = std::max(heard, clock_.Now() - *since);
  }
  return heard;
}

common::TimePoint Liveness::LastSeen(int node_id) const {
  auto it = nodes_seen_.find(node_id);
  return it == nodes_seen_.end() ? common::TimePoint() : it->second.last_seen;
}

std::string Liveness::StallNote() const {
  return clock_.Now() < stall_note_until_ ? stall_note_ : std::string();
}

void Liveness::Sweep() {
  if (options_.node_timeout <= common::Duration::zero()) return;
  const common::TimePoint now = clock_.Now();
  const common::Duration period = options_.node_timeout / 4;
  if (sweep_due_ != common::TimePoint() && now - sweep_due_ > options_.node_timeout / 2) {
    OnSchedulerStalled(now - sweep_due_ + period);
  }
  Found found;
  for (auto& [id, signs] : nodes_seen_) {
    if (signs.link == nullptr || signs.link->InProcess()) continue;
    signs.link->OnSweep();
    // The core is asked only when the answer matters: at 12,500 nodes a lookup per node per
    // sweep doubled the sweep's cost. A node that has joined never becomes unjoined again.
    if (!signs.joined && now - signs.connected_at >= options_.join_timeout) {
      if (core_.standing(id) == Standing::kUnjoined) {
        found.unjoined.push_back(id);
        continue;
      }
      signs.joined = true;
    }
    signs.last_message = std::max(signs.last_message, signs.link->LastHeartbeat());
    signs.last_seen = std::max(signs.last_seen, signs.last_message);
    // Whether this sweep learns how long the node is silent now: a node judged by its
    // messages, or one whose connection is read now (it is not read while recently heard).
    const bool learns = !signs.watched ||
                        now - signs.last_seen > options_.node_timeout + options_.heartbeat_interval;
    if (!ReadConnectionActivity(signs, now, found, id)) continue;
    auto why = Silence(signs, now);
    if (why && core_.standing(id) == Standing::kJudged) {
      found.silent.emplace_back(id, std::move(*why));
    } else if (!why && learns) {
      NoteSilence(id, signs, now);
    }
  }
  ReadActivityDump(now, found);
  for (int id : found.unjoined) {
    common::Logger("scheduler")
        ->warn("closing a session that did not join within {} s",
               std::chrono::duration_cast<std::chrono::seconds>(options_.join_timeout).count());
    core_.close_unjoined(id);
  }
  for (const auto& [id, why] : found.silent) {
    if (nodes_.state() == JobState::kFinished) break;
    if (nodes_seen_.count(id) == 0) continue;  // forgotten since
    core_.lost(id, why);
  }
  if (nodes_.state() == JobState::kFinished) return;
  sweep_due_ = now + period;
  timer_ = clock_.After(period, [this] { Sweep(); });
}

void Liveness::OnConnectionData(Signs& signs, common::TimePoint at) {
  signs.last_seen = std::max(signs.last_seen, at);
  if (signs.watched) return;
  signs.watched = true;
  SendHeartbeatPolicy(signs, signs.link->DataProvesLoop()
                                 ? milliseconds(kMaxIntervalMs)
                                 : options_.node_timeout * kMessageIntervals);
}

// A node heard within the node timeout (and the interval it may be late by) cannot be lost at
// this sweep: its connection is read only once it could be, about once per node timeout
// instead of once per sweep. A session's connection tells its kernel's figure itself (one
// getsockopt); the others (gRPC's) wait for one sock_diag dump (false).
bool Liveness::ReadConnectionActivity(Signs& signs, common::TimePoint now, Found& found, int id) {
  if (signs.watched &&
      now - signs.last_seen <= options_.node_timeout + options_.heartbeat_interval) {
    return true;
  }
  if (auto since = signs.link->SinceLastData()) {
    OnConnectionData(signs, now - *since);
    return true;
  }
  std::string peer = signs.link->PeerEndpoint();
  if (!read_activity_ || peer.empty()) return true;
  found.pending.emplace_back(id, &signs, std::move(peer));
  return false;
}

void Liveness::ReadActivityDump(common::TimePoint now, Found& found) {
  if (found.pending.empty()) return;
  auto activity = read_activity_();
  if (activity.ok()) {
    activity_error_.clear();
    for (auto& [id, signs, peer] : found.pending) {
      auto at = activity->find(peer);
      if (at != activity->end()) OnConnectionData(*signs, now - at->second);
    }
  } else {
    StopWatching(now, activity.status());
  }
  for (auto& [id, signs, peer] : found.pending) {
    auto why = Silence(*signs, now);
    if (why && core_.standing(id) == Standing::kJudged) {
      found.silent.emplace_back(id, std::move(*why));
    } else if (!why) {
      NoteSilence(id, *signs, now);
    }
  }
}

void Liveness::NoteSilence(int node_id, Signs& signs, common::TimePoint now) {
  if (signs.last_seen > signs.sampled_seen) {
    // Heard since the last sample: the silence seen then ended. The core is asked only for a
    // new longest (rarely: a few times a job).
    if (signs.sampled_silence > longest_silence_ && core_.standing(node_id) == Standing::kJudged) {
      longest_silence_ = signs.sampled_silence;
    }
    signs.sampled_seen = signs.last_seen;
  }
  signs.sampled_silence = now - signs.last_seen;
}

// The connections cannot be read (the kernel refused, or this process ran out of file
// descriptors): every node watched through them goes back to a Heartbeat message per
// interval, and gets a fresh node timeout for its messages to come.
void Liveness::StopWatching(common::TimePoint now, const absl::Status& why) {
  if (activity_error_.empty()) {
    activity_error_ = std::string(why.message());
    common::Logger("scheduler")
        ->warn(
            "cannot read the nodes' connection activity ({}); nodes send heartbeat "
            "messages instead",
            activity_error_);
  }
  for (auto& [id, signs] : nodes_seen_) {
    if (!signs.watched || signs.link == nullptr || signs.link->SinceLastData()) continue;
    signs.watched = false;
    signs.last_seen = std::max(signs.last_seen, now);
    SendHeartbeatPolicy(signs, common::Duration::zero());
  }
}

void Liveness::SendHeartbeatPolicy(Signs& signs, common::Duration message_interval) {
  v1::NodeCommand command;
  command.mutable_heartbeat_policy()->set_message_interval_ms(static_cast<uint32_t>(
      std::min<int64_t>(duration_cast<milliseconds>(message_interval).count(), kMaxIntervalMs)));
  signs.link->Send(command);
}

std::optional<std::string> Liveness::Silence(const Signs& signs, common::TimePoint now) const {
  if (now - signs.last_seen > options_.node_timeout + options_.heartbeat_interval) {
    const auto silence = duration_cast<milliseconds>(now - signs.last_seen).count();
    return "no heartbeat for " + std::to_string(silence) + " ms" +
           (signs.watched ? " (its connection was silent)" : "");
  }
  const auto message_timeout = options_.node_timeout * kMessageIntervals * kMissedMessages;
  const bool loop_proven = signs.link != nullptr && signs.link->DataProvesLoop();
  if (signs.watched && !loop_proven && now - signs.last_message >= message_timeout) {
    const auto silence = duration_cast<milliseconds>(now - signs.last_message).count();
    return "no message from its launcher for " + std::to_string(silence) +
           " ms while its connection still answered (its launcher is stuck)";
  }
  return std::nullopt;
}

void Liveness::OnSchedulerStalled(common::Duration stalled) {
  const auto ms = duration_cast<milliseconds>(stalled).count();
  common::Logger("scheduler")
      ->warn(
          "the scheduler did not run for {} ms (its host stalled or its launcher was "
          "stopped); the nodes are not blamed for that silence",
          ms);
  nodes_.Record(Event::kSchedulerStalled, {{"stalled_ms", ms}});
  const common::TimePoint now = clock_.Now();
  for (auto& [id, signs] : nodes_seen_) signs.last_seen = signs.last_message = now;
  stall_note_ = " (after this scheduler did not run for " + std::to_string(ms) + " ms)";
  stall_note_until_ = now + options_.node_timeout;
}

}  // namespace gangrun::scheduler
