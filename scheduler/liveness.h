#pragma once
// How the scheduler knows its nodes are alive: a component of the scheduler
// (scheduler/node_directory.h) that owns every connected node's signs of life, the heartbeat
// sweep's timer, the connection-activity reader and the note of this process's own stalls.
// The core tells it of connections (Add, Unlink, Forget) and messages (Heard); it asks the
// core, at each sweep, what a node is to it (Standing), and tells the core which nodes are lost
// to silence and which sessions never joined. On the scheduler's strand.
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
// latest: a cut or a pause of up to 5 s (plus the heartbeat it owed) costs nothing. A sweep
// due at t=20 that runs at t=29 (this process was stopped or its host stalled for 9 s) blames
// nobody: every node is treated as heard at t=29 and is lost only if it stays silent until
// t=34. The same node's launcher, if its event loop is stuck while gRPC still answers pings,
// is lost 30 s after its last message (3 missed messages, one every 10 s); a quiet session's,
// whose ticks stop with its loop, as a silent connection by t=17.25.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "rpc/connection_activity.h"
#include "scheduler/node_directory.h"
#include "scheduler/node_link.h"

namespace gangrun::scheduler {

class Liveness {
 public:
  struct Options {
    common::Duration node_timeout{};  // zero or less: nobody is ever lost to silence
    common::Duration heartbeat_interval{};
    common::Duration join_timeout{};  // a session that has not joined by then is closed
  };
  // A watched node's Heartbeat messages come every kMessageIntervals node timeouts; it is
  // lost when none came for kMissedMessages such intervals. A node whose connection's data
  // proves its loop (NodeLink::DataProvesLoop) sends none; its session's pongs come every
  // kMessageIntervals node timeouts all the same, and it loses the scheduler after
  // kMissedMessages of them missed (scheduler/session_port.cc).
  static constexpr int kMessageIntervals = 2;
  static constexpr int kMissedMessages = 3;

  // What a node is to the sweep, as the core says.
  enum class Standing {
    kUnjoined,  // connected, and neither a member, a spare nor excluded: closed at the join
                // timeout
    kJudged,    // a member whose processes run, or a spare: lost to silence
    kIgnored,   // anything else (its part ended, excluded, lost): never lost to silence
  };
  struct Core {
    std::function<Standing(int node_id)> standing;
    // Silent past the node timeout: `why` is "no heartbeat for N ms ..." (the core adds the
    // StallNote). Called after the sweep's pass; the core may Forget any node then.
    std::function<void(int node_id, const std::string& why)> lost;
    // A session that did not join within the join timeout: the core closes and forgets it.
    std::function<void(int node_id)> close_unjoined;
  };
  // How the scheduler reads the activity of connections their links cannot read (gRPC's:
  // rpc::ConnectionActivityReader).
  using ActivityReader = std::function<absl::StatusOr<rpc::ConnectionActivity>()>;

  Liveness(NodeDirectory& nodes, common::Clock& clock, Options options, Core core)
      : nodes_(nodes), clock_(clock), options_(options), core_(std::move(core)) {}
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;

  // The first sweep, then one every node_timeout / 4 until Stop.
  void Start() { Sweep(); }
  void Stop() { timer_.reset(); }
  // Unset, connections are judged by their Heartbeat messages alone.
  void Watch(ActivityReader reader) { read_activity_ = std::move(reader); }

  // A node connected through `link` (heard now); an in-process link is never swept.
  void Add(int node_id, NodeLink* link);
  // A message (a heartbeat or any event) came from the node.
  void Heard(int node_id);
  // Its link is gone (lost, disconnected): never swept again; its signs of life stay readable.
  void Unlink(int node_id);
  // The core forgot the node.
  void Forget(int node_id) { nodes_seen_.erase(node_id); }

  // Its last sign of life as of now: a message, data on its connection, a heartbeat its
  // transport counted (the epoch for an unknown node).
  common::TimePoint HeardAt(int node_id) const;
  // Its last sign of life as of the last sweep (what its loss was judged on).
  common::TimePoint LastSeen(int node_id) const;
  // The longest silence of a node that was not lost for it (a member, a spare), as the sweep
  // saw it: since its last data when its connection is read, or since its last message for a
  // node judged by its messages; what a tighter node timeout must still allow (WhatIf).
  common::Duration LongestSilence() const { return longest_silence_; }
  // " (after this scheduler did not run for N ms)" within a node timeout of a stall of this
  // process, "" otherwise: said with the losses that follow it.
  std::string StallNote() const;

 private:
  struct Signs {
    NodeLink* link = nullptr;
    common::TimePoint last_seen;     // any sign of life: a message, or data on its connection
    common::TimePoint last_message;  // its last message
    bool watched = false;            // its connection's activity is read
    common::TimePoint connected_at;
    bool joined = false;  // the core said it is not unjoined (past the join timeout)
    // NoteSilence's last sample: its last sign of life then, and its silence then.
    common::TimePoint sampled_seen;
    common::Duration sampled_silence{};
  };
  // What one sweep finds, in one pass over the nodes (at 12,500 nodes a pass costs more in
  // cache misses than what it does).
  struct Found {
    // Nodes whose links cannot read their own connections: id, signs, remote endpoint.
    std::vector<std::tuple<int, Signs*, std::string>> pending;
    std::vector<std::pair<int, std::string>> silent;  // lost, and why
    std::vector<int> unjoined;                        // sessions that never joined
  };
  void Sweep();
  bool ReadConnectionActivity(Signs& signs, common::TimePoint now, Found& found, int id);
  void ReadActivityDump(common::TimePoint now, Found& found);
  void OnConnectionData(Signs& signs, common::TimePoint at);
  // The sweep saw how long the node is silent now: a silence it saw before counts for
  // LongestSilence once the node was heard again since (a node that is lost never is).
  void NoteSilence(int node_id, Signs& signs, common::TimePoint now);
  void StopWatching(common::TimePoint now, const absl::Status& why);
  // Tells the node how often to send Heartbeat messages (zero: every heartbeat interval).
  static void SendHeartbeatPolicy(Signs& signs, common::Duration message_interval);
  // A judged node's silence, if it is lost for it: "no heartbeat ..." or "no message ...".
  std::optional<std::string> Silence(const Signs& signs, common::TimePoint now) const;
  // The sweep ran late: this process did not run, so the nodes get a fresh node timeout.
  void OnSchedulerStalled(common::Duration stalled);

  NodeDirectory& nodes_;
  common::Clock& clock_;
  Options options_;
  Core core_;
  std::map<int, Signs> nodes_seen_;  // every connected node the core has not forgotten
  std::unique_ptr<common::Timer> timer_;
  common::TimePoint sweep_due_;  // when the next sweep should run
  ActivityReader read_activity_;
  std::string activity_error_;  // why the last read failed (said once)
  std::string stall_note_;
  common::TimePoint stall_note_until_;
  common::Duration longest_silence_{};
};

}  // namespace gangrun::scheduler
