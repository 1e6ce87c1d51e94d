#pragma once
// The scheduler's port for a plaintext job: one TCP listener in front of the gRPC server.
// A connection's first bytes say what it is:
//   - gangrun's session magic (rpc/frames.h): a node's session, held here on the scheduler's
//     strand: no gRPC call, no thread hand-off, a few tens of microseconds per node;
//   - the HTTP/2 client preface: handed whole to the gRPC server (gangrun status, stop and
//     scale, the key-value store, a node session over gRPC);
//   - anything else, or too little within rpc::HandshakeTimeoutMs(): closed.
// A session must open (v1::SessionOpen, with the job's token) within the same timeout.
//
// Everything here runs on the io_context (the scheduler's strand), which one thread runs.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "rpc/server.h"
#include "scheduler/scheduler.h"

namespace gangrun::scheduler {

// What a connection's first bytes are (the ones received so far).
enum class Opening { kUnknown, kIncomplete, kSession, kHttp2 };
Opening ClassifyOpening(std::string_view first_bytes);

class SessionPort {
 public:
  // Listens on `listen_address` (host:port, [v6]:port; a wildcard host listens on IPv6 and
  // IPv4). AlreadyExists when the port is taken.
  static absl::StatusOr<std::unique_ptr<SessionPort>> Open(boost::asio::io_context& io,
                                                           const std::string& listen_address);
  ~SessionPort();
  SessionPort(const SessionPort&) = delete;
  SessionPort& operator=(const SessionPort&) = delete;

  // Starts accepting: node sessions join `scheduler` (with `token`, "" = none), HTTP/2
  // connections go to `grpc`. Both must outlive Close().
  void Start(Scheduler& scheduler, std::string token, rpc::Server* grpc);
  int port() const { return port_; }
  // Stops accepting and waits, at most `within`, for every session to end (a finished job's
  // scheduler closes them after its last command, and their nodes close their ends), as
  // gRPC's Shutdown waits for calls; then closes the port and runs `done` on the io_context.
  void Drain(std::chrono::milliseconds within, std::function<void()> done);
  // Stops accepting and closes every connection not yet handed to gRPC, without telling the
  // scheduler. Idempotent.
  void Close();

  struct State;

 private:
  SessionPort() = default;
  std::shared_ptr<State> state_;
  int port_ = 0;
};

}  // namespace gangrun::scheduler
