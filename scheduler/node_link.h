#pragma once
// The scheduler's way to one node (scheduler.h): a transport implements it — the launcher's
// in-process link (launcher/local_link.h), a node's session (scheduler/node_session.h).

#include <optional>
#include <string>

#include "common/clock.h"
#include "gangrun/v1/session.pb.h"

namespace gangrun::scheduler {

// The scheduler's way to one node.
class NodeLink {
 public:
  virtual ~NodeLink() = default;
  virtual void Send(const v1::NodeCommand& command) = 0;
  // Ends the connection once everything sent so far is delivered.
  virtual void Close() {}
  // The node is lost: its connection goes now, and nothing may resume its session. The
  // transport reports the end (OnNodeDisconnected) later, from its own loop turn.
  virtual void Drop() {}
  // When the transport last heard a heartbeat itself (transports may count heartbeats
  // without delivering them as events, which keeps them off the scheduler's strand).
  virtual common::TimePoint LastHeartbeat() const { return common::TimePoint::min(); }
  // A node in the scheduler's own process (the master launcher's): it runs whenever the
  // scheduler runs, so it is never lost to silence.
  virtual bool InProcess() const { return false; }
  // The remote end of the node's TCP connection, as rpc::ConnectionActivityReader names it
  // ("" when the transport has none).
  virtual std::string PeerEndpoint() const { return {}; }
  // How long ago the node's connection last received data, as its kernel says (even data
  // nobody read yet: a quiet node's ticks); nullopt when the transport cannot tell, the
  // scheduler then finding the connection by PeerEndpoint (scheduler/liveness.h).
  virtual std::optional<common::Duration> SinceLastData() const { return std::nullopt; }
  // Whatever arrives on the node's connection is sent by its launcher's event loop (a quiet
  // session's ticks), so data there also proves that loop runs: the node needs to send no
  // Heartbeat messages, and is never lost for their absence (scheduler/liveness.h).
  virtual bool DataProvesLoop() const { return false; }
  // Each heartbeat sweep's call (every node_timeout / 4, on the strand), the sign that the
  // scheduler's loop runs: a link whose node hears so only from the scheduler's own word (a
  // quiet session's pong) says it when due.
  virtual void OnSweep() {}
};

}  // namespace gangrun::scheduler
