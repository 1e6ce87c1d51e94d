#pragma once
// The scheduler's side of a node's session, whatever carries it (gangrun's framing on TCP,
// scheduler/session_port.h; a gRPC stream, scheduler/grpc_server.h): the scheduler's NodeLink
// for the node. A session outlives the connection it opened on: a node that heard nothing for
// a while resumes it on a new connection (node/session_link.h), and the session moves there,
// sending again the commands the node had not acknowledged and dropping the events it had
// already got.
//
// Commands carry a sequence number and are kept until the node acknowledges them (its pings
// say the last it has; bounded: a node that acknowledges nothing is dropped). Events must
// arrive in order: one already had is dropped, one out of order ends the session.
//
// A connection that ends while it is the session's loses the node at once (a killed node's
// kernel closes its connections; a node that only heard nothing never closes its old
// connection before its new one is accepted).
//
// Everything runs on the scheduler's strand, on the scheduler's clock. A session never calls
// the scheduler from inside one of the scheduler's own calls (Send, Close): what those find is
// dealt with from the loop.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "common/check.h"
#include "common/clock.h"
#include "gangrun/v1/session.pb.h"
#include "scheduler/scheduler.h"

namespace gangrun::scheduler {

class NodeSessions;

class NodeSession : public NodeLink {
 public:
  // Where a session's commands go, as its transport makes it.
  class Wire {
   public:
    virtual ~Wire() = default;
    virtual void SendCommand(const v1::NodeCommand& command) = 0;
    // May skip the pong while earlier writes still wait (the next one carries a later ack):
    // false then.
    virtual bool SendPong(uint64_t acked) = 0;
    // Ends the connection once everything sent is written.
    virtual void CloseAfterWrites() = 0;
    // Ends it now, without a word (the session moved on, or the port closes).
    virtual void Drop() = 0;
    virtual std::string PeerEndpoint() const = 0;
    virtual std::optional<common::Duration> SinceLastData() const { return std::nullopt; }
  };
  // Unacknowledged commands, at most.
  static constexpr size_t kMaxUnackedBytes = 16 << 20;

  NodeSession(NodeSessions& sessions, uint64_t id, std::string key);
  ~NodeSession() override;

  uint64_t id() const { return id_; }
  const std::string& key() const { return key_; }
  uint64_t last_event() const { return last_event_; }
  // The scheduler has sent it a command (it answered the node's join).
  bool commanded() const { return next_seq_ > 1; }
  bool closing() const { return closing_; }

  // NodeLink, for the scheduler.
  void Send(const v1::NodeCommand& command) override;
  void Close() override;
  void Drop() override;
  common::TimePoint LastHeartbeat() const override { return last_heard_; }
  std::string PeerEndpoint() const override { return wire_ ? wire_->PeerEndpoint() : ""; }
  std::optional<common::Duration> SinceLastData() const override {
    return wire_ ? wire_->SinceLastData() : std::nullopt;
  }
  // A quiet session's ticks come from its launcher's loop (node/session_link.h).
  bool DataProvesLoop() const override {
    return quiet_pong_timeout_ > std::chrono::milliseconds::zero();
  }
  // A quiet session gets a pong once its last is its pong timeout / kMissedMessages old: its
  // node, which sends no Heartbeat messages (scheduler/liveness.h), hears this way that the
  // scheduler's loop runs.
  void OnSweep() override;

  // The transport's calls. `wire` is the connection an event or ping came on: ones from a
  // connection the session has left are ignored. OnEvent returns false when the event breaks
  // the session's order (the transport then ends the connection).
  void Attach(std::unique_ptr<Wire> wire, uint64_t acked);
  bool OnEvent(const Wire* wire, const v1::NodeEvent& event);
  // `sparse_pongs`: the node needs a pong only every node_timeout / 2, or when there are
  // events to acknowledge (node/session_link.h).
  void OnPing(const Wire* wire, uint64_t acked, bool sparse_pongs = false);
  // The session keeps quiet (scheduler/session_port.cc), its node losing the scheduler after
  // `pong_timeout` without a pong; zero: it does not (any more).
  void KeepQuiet(std::chrono::milliseconds pong_timeout) { quiet_pong_timeout_ = pong_timeout; }
  std::chrono::milliseconds quiet_pong_timeout() const { return quiet_pong_timeout_; }
  // The connection `wire` ended: if it is the session's, the scheduler hears of it (a node
  // lost, unless the scheduler closed the session first) and the session is done.
  void OnWireEnded(const Wire* wire, const std::string& why);

 private:
  friend class NodeSessions;
  void Acknowledged(uint64_t acked);
  void Pong(common::TimePoint now);
  void End(const std::string& why);

  NodeSessions& sessions_;
  uint64_t id_;
  std::string key_;
  std::unique_ptr<Wire> wire_;
  int node_id_ = -1;
  uint64_t next_seq_ = 1;
  uint64_t last_event_ = 0;
  std::deque<v1::NodeCommand> unacked_;
  size_t unacked_bytes_ = 0;
  bool closing_ = false;
  bool ended_ = false;
  common::TimePoint last_heard_ = common::TimePoint::min();
  common::TimePoint last_pong_ = common::TimePoint::min();
  uint64_t last_pong_acked_ = 0;  // the event the last pong acknowledged
  std::chrono::milliseconds quiet_pong_timeout_{0};
};

// The sessions of one scheduler, by id: made by the transports, found again for resumes.
class NodeSessions {
 public:
  NodeSessions(boost::asio::io_context& io, Scheduler& scheduler)
      : io_(io), scheduler_(scheduler) {}
  ~NodeSessions();
  NodeSessions(const NodeSessions&) = delete;
  NodeSessions& operator=(const NodeSessions&) = delete;

  // A new session (its node joins the scheduler) on `wire`.
  NodeSession* Create(std::string key, std::unique_ptr<NodeSession::Wire> wire);
  // The session `id`, unless it is unknown or closing (to resume).
  NodeSession* Find(uint64_t id);
  // The session `id`, unless it is unknown or has ended (to deliver what its wire got).
  NodeSession* Lookup(uint64_t id);
  // Every session's connection dropped, without a word to the scheduler (the port closes).
  void DropAll();
  size_t size() const { return sessions_.size(); }
  // Called when the last session is gone (set by a draining port).
  void OnEmpty(std::function<void()> on_empty) { on_empty_ = std::move(on_empty); }

  Scheduler& scheduler() { return scheduler_; }
  boost::asio::io_context& io() { return io_; }

 private:
  friend class NodeSession;
  void Remove(uint64_t id);

  boost::asio::io_context& io_;
  Scheduler& scheduler_;
  std::map<uint64_t, std::unique_ptr<NodeSession>> sessions_;
  std::function<void()> on_empty_;
  bool dropping_ = false;
  common::ThreadAffinity strand_;
};

}  // namespace gangrun::scheduler
