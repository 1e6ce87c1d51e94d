#pragma once
// A node's session with a scheduler in another process (usually on another host), which
// outlives its connections. The transport makes the connections (gangrun's framing on TCP
// for plaintext jobs, node/tcp_link.h; a gRPC stream for jobs with TLS, node/grpc_link.h);
// this class decides when to make one, what to send again on it, and when the scheduler is
// lost.
//
// Events carry a sequence number; the scheduler acknowledges them in its pongs and the node
// keeps every event not yet acknowledged (bounded). Pieces of logs (LogRead) are the
// exception: unsequenced, sent on the current connection or not at all. Commands carry theirs; the
// node drops one it already has. A ping goes every heartbeat interval with the last command
// received. Over TCP the scheduler answers it only every node_timeout / 2 (or at once when it
// has events to acknowledge): its kernel's ACK of the ping, which the node reads through
// TCP_INFO, is the proof that the path works, the rarer pong the proof that the scheduler's
// event loop does. At 12,500 nodes a pong per ping was half the scheduler's heartbeat cost.
//
// The timing rules, with T = --node_timeout and I = --heartbeat_interval (defaults 5 s, 1 s):
//   - nothing heard on the session's connection, and (over TCP) no ACK of its pings, for 2 I
//     (a cut, a reset, a host that stalls): the node opens a new connection beside the old one and
//     resumes the session on it, attempt after attempt, each bounded (connecting by
//     ConnectTimeoutFor(I));
//   - the connection closed by the scheduler's host, and a new one refused there: the
//     scheduler's launcher is gone, the scheduler is lost at once;
//   - nothing heard for T + 2 I: lost (the scheduler loses a node after T + I of silence, so a
//     cut or a pause shorter than T costs nothing on either side);
//   - a resume the scheduler refuses (it no longer holds the session): lost;
//   - a quiet session (docs/WIRE.md: the transport sends ticks, the node no Heartbeat
//     messages, the scheduler a pong every 2 T of its own accord): lost after T + 2 I without
//     an ACK or a pong, or after QuietPongTimeout() (6 T) without a pong while the ACKs still
//     come.
// Worked example: a 4 s cut at t = 10 (T 5, I 1), the last pong at t = 9.6. At t = 11.6 the
// node starts connecting anew; attempts at 11.6, 12.6, 13.6 time out; the cut heals at 14;
// the attempt of 14.6 resumes the session at ~14.6, the node sends again its events of
// 10..14.6 and the scheduler its commands; the scheduler's silence was 5 s < 6 s.
//
// Everything runs on the clock's executor (the launcher's io_context thread): construct,
// Connect, Send and destroy there. Tests run it on a FakeClock with a fake transport.

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "gangrun/v1/session.pb.h"
#include "node/remote_link.h"

namespace gangrun::node {

// One connection of a session, as a transport makes it.
class SessionConnection {
 public:
  // How an attempt or a connection ended.
  enum class End {
    kConnectionRefused,  // nothing listens on the port
    kTimedOut,           // connecting (or the handshake) took longer than the attempt's bound
    kClosed,             // the peer closed or reset a connection that had been accepted
    kNotAScheduler,      // the peer closed without speaking the protocol (TLS on one side...)
    kFailed,             // anything else: an error, a malformed or forged frame
  };
  struct Handlers {
    // The session is open on this connection: its id, its resume key (the same as before for
    // a resume) and the last event sequence number the scheduler has (0 for a new session).
    std::function<void(uint64_t session, const std::string& key, uint64_t acked)> on_accepted;
    // A new session's opening is on its way and the scheduler proved itself: events sent from
    // now on travel with the opening, ahead of the acceptance (one round trip fewer). A
    // transport that cannot do so never calls it.
    std::function<void()> on_opened;
    std::function<void(const v1::SessionRefused& refused)> on_refused;
    std::function<void(const v1::NodeCommand& command)> on_command;
    std::function<void(uint64_t acked)> on_pong;
    std::function<void(End end, const std::string& why)> on_end;
  };
  // Closes the connection; no handler runs after.
  virtual ~SessionConnection() = default;
  // Opens a new session (`session` 0) or resumes `session` with its `key`; `acked` is the
  // last command sequence number the node has.
  virtual void Open(uint64_t session, const std::string& key, uint64_t acked) = 0;
  // Only once accepted (or opened: Handlers::on_opened).
  virtual void SendEvent(const v1::NodeEvent& event) = 0;
  // A ping; `sparse_pongs` tells the scheduler that this node needs a pong only every
  // node_timeout / 2 (it judges its path by SinceLastAck).
  virtual void SendPing(uint64_t acked, bool sparse_pongs) = 0;
  // How long ago the node's kernel last got an acknowledgement from the scheduler's (its
  // pings are acknowledged within the kernel's delayed-ACK time), or nullopt when the
  // transport cannot tell (then every ping gets a pong).
  virtual std::optional<common::Duration> SinceLastAck() const { return std::nullopt; }
  // Once accepted: non-zero when the session keeps quiet (docs/WIRE.md), the scheduler's
  // pongs then being rare: a stuck scheduler is one not heard for this long.
  virtual common::Duration QuietPongTimeout() const { return common::Duration::zero(); }
};

using ConnectionFactory =
    std::function<std::unique_ptr<SessionConnection>(SessionConnection::Handlers handlers)>;

// How long one attempt may take to connect: a lost SYN is sent again by a new attempt, not
// after the kernel's backoff (1 s, 3 s, 7 s, ...).
common::Duration ConnectTimeoutFor(common::Duration heartbeat_interval);

class SessionLink : public RemoteSchedulerLink {
 public:
  struct Options {
    std::string target;  // host:port, for messages
    common::Duration heartbeat_interval = std::chrono::seconds(1);
    common::Duration node_timeout = std::chrono::seconds(5);
    // Events sent but not yet acknowledged, at most; more loses the scheduler.
    size_t max_unacked_bytes = 16 << 20;
  };
  static constexpr std::chrono::milliseconds kInitialBackoff{100};
  static constexpr std::chrono::milliseconds kMaxBackoff{500};
  static constexpr int kMismatchesToGiveUp = 2;

  SessionLink(common::Clock& clock, Options options, ConnectionFactory factory);
  ~SessionLink() override;

  void Connect(CommandHandler on_command, LostHandler on_lost) override;
  void Send(const v1::NodeEvent& event) override;

  // The rules above, for these options.
  common::Duration ResumeAfter() const;
  common::Duration LoseAfter() const;

 private:
  void Attempt();
  void RetryLater();
  void OnOpened();
  void OnAccepted(uint64_t session, const std::string& key, uint64_t acked);
  void OnRefused(const v1::SessionRefused& refused);
  void OnCommand(const v1::NodeCommand& command);
  void OnPong(uint64_t acked);
  void OnAttemptEnded(SessionConnection::End end, const std::string& why);
  void OnActiveEnded(SessionConnection::End end, const std::string& why);
  void Tick();
  void Acknowledged(uint64_t acked);
  void Lose(const std::string& reason, bool unauthenticated);
  std::string Silence(common::Duration silent) const;

  common::Clock& clock_;
  Options options_;
  ConnectionFactory factory_;
  CommandHandler on_command_;
  LostHandler on_lost_;
  std::unique_ptr<SessionConnection> active_;   // the connection the session is on
  std::unique_ptr<SessionConnection> attempt_;  // a connection being made
  uint64_t active_id_ = 0, attempt_id_ = 0, last_connection_id_ = 0;
  std::unique_ptr<common::Timer> tick_timer_;  // pings and the silence watchdog
  std::unique_ptr<common::Timer> retry_timer_;
  std::unique_ptr<common::Timer> attempt_timer_;  // a resume attempt's bound
  std::chrono::milliseconds backoff_ = kInitialBackoff;
  uint64_t session_ = 0;  // 0 until the scheduler accepted the session
  std::string key_;
  uint64_t next_seq_ = 1;      // the next event's
  uint64_t last_command_ = 0;  // the last command's received
  std::deque<v1::NodeEvent> unacked_;
  uint64_t opened_through_ = 0;  // the last event sent with the attempt's opening
  size_t unacked_bytes_ = 0;
  common::TimePoint last_heard_{};
  common::TimePoint last_acked_{};  // when the kernel last saw an ACK (SinceLastAck)
  // The session's connection keeps quiet: the scheduler is lost after this without a pong.
  common::Duration quiet_pong_timeout_{0};
  bool active_closed_ = false;  // the scheduler's host closed our connection
  int mismatches_ = 0;
  bool lost_ = false;
  bool over_ = false;  // the scheduler finished the job (or rejected this node)
};

}  // namespace gangrun::node
