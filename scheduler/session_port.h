#pragma once
// A plaintext job's node sessions on gangrun's own framing (docs/WIRE.md), served on the
// scheduler's strand: no gRPC call, no thread hand-off, a few tens of microseconds per node.
// The scheduler's rpc::Port hands it the connections that open with the session magic.
//
// Each connection runs the challenge-response handshake (rpc/session_auth.h) within the
// handshake timeout, holding one of the port's pre-authentication slots until it succeeds:
// a new session joins the scheduler (NodeSessions::Create), a resume moves an existing
// session to the connection. A job with TLS refuses framing sessions, saying so; a launcher
// of another protocol version is told to match versions.
//
// Everything runs on the io_context (the scheduler's strand), which one thread runs.

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "rpc/port.h"
#include "scheduler/node_session.h"

namespace gangrun::scheduler {

class SessionPort {
 public:
  struct Options {
    std::string token;   // "" = none
    std::string run_id;  // the job's, sent in the challenge
    bool tls = false;    // the job uses TLS: framing sessions are refused
    // Sessions whose pings are read as they come; the ones opened after them, of nodes that
    // can, keep quiet (docs/WIRE.md: ticks left unread, padded events, rarer pongs).
    size_t loud_sessions = 64;
    // Sessions that have opened (proven the token) but sent no event yet, at most; a new
    // node's first event is its join, which leaves with its opening.
    size_t max_unjoined = kMaxUnjoined;
  };
  // An opened session that has not joined may hold a partial frame of up to
  // rpc::kMaxJoinPayload (64 KiB): at most 512 of them per port (32 MiB), and 2,048 in all the
  // ports of a process (a daemon's jobs: 128 MiB). When one more opens, the one of its port
  // that has waited longest is closed; when its port has none, the new one is.
  static constexpr size_t kMaxUnjoined = 512;
  static constexpr size_t kMaxUnjoinedInProcess = 2048;

  SessionPort(boost::asio::io_context& io, NodeSessions& sessions, Options options);
  ~SessionPort();
  SessionPort(const SessionPort&) = delete;
  SessionPort& operator=(const SessionPort&) = delete;

  // For rpc::Port::Start.
  rpc::Port::SessionHandler Handler();
  // Waits, at most `within`, for every session to end (a finished job's scheduler closes
  // them after its last command, and their nodes close their ends), as gRPC's Shutdown waits
  // for calls; then runs `done` on the io_context.
  void Drain(std::chrono::milliseconds within, std::function<void()> done);
  // Closes the handshakes in progress and every session's connection, without telling the
  // scheduler. Idempotent.
  void Close();

  struct PortState;

 private:
  std::shared_ptr<PortState> state_;
};

}  // namespace gangrun::scheduler
