#pragma once
// The listening port of a job's scheduler or of the daemon: one TCP listener in front of a
// gRPC server. A connection's first bytes say what it is:
//   - "GRS" and a version (gangrun's session magic, rpc/frame_format.h): a node's session,
//     handed with its magic to the session handler;
//   - the HTTP/2 client preface (a plaintext port) or a TLS ClientHello (a TLS port): handed
//     whole to the gRPC server (gangrun status, stop and scale, the key-value store, the
//     daemon's agents and submitters, a TLS job's node sessions);
//   - anything else, or too little within rpc::HandshakeTimeoutMs(): closed.
//
// Bounded before authentication (README "Connections"): a connection that has proven nothing
// holds one of `max_unauthenticated` slots until it does (the session handler releases its
// slot once the handshake succeeds). Connections accepted while every slot is taken wait in a
// lobby of at most `max_waiting`, holding a descriptor and nothing read, and take slots in
// the order they came; when one waits and every slot is taken, the oldest holder is closed if
// it has held its slot for kMinSlotAge, otherwise the lobby waits (an attacker's idle
// connections are always the oldest, a node's handshake takes a round trip). Only a full
// lobby makes accepting wait (the kernel's backlog, SOMAXCONN, holds the rest and drops what
// does not fit: a node's SYN then waits a second to be sent again). At most
// `max_grpc_connections` connections are with the gRPC server at once (counted through
// sock_diag when the bound is reached); past it a new one is closed. The bounds follow the
// file limit, so that descriptors remain for the job's nodes.
//
// Everything runs on the io_context, which one thread runs.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "rpc/connection_activity.h"

namespace gangrun::rpc {

class Server;

// A listener on `listen_address` (host:port, [v6]:port; a wildcard host listens on both; a
// name is resolved), close-on-exec, listening. AlreadyExists when the port is taken.
absl::StatusOr<boost::asio::ip::tcp::acceptor> OpenListener(boost::asio::io_context& io,
                                                            const std::string& listen_address);
// This process' soft limit on open files (2^20 when unlimited).
uint64_t FileLimit();

// What a connection's first bytes are (the ones received so far).
enum class Opening { kUnknown, kIncomplete, kSession, kHttp2, kTls };
Opening ClassifyOpening(std::string_view first_bytes);

// One of the port's slots for connections that have proven nothing. Released once the
// connection proves itself (Release) or ends (destruction); the port may call the eviction
// handler first, to close the connection and free the slot for a newer one.
class PreAuthSlot {
 public:
  ~PreAuthSlot();
  PreAuthSlot(const PreAuthSlot&) = delete;
  PreAuthSlot& operator=(const PreAuthSlot&) = delete;
  void Release();
  void OnEvict(std::function<void()> evict) { evict_ = std::move(evict); }
  // Releases the slot and closes its connection (through the eviction handler).
  void Evict();
  std::chrono::steady_clock::time_point since() const { return since_; }

  struct Table;

 private:
  friend struct Table;
  PreAuthSlot() = default;
  std::weak_ptr<Table> table_;
  std::function<void()> evict_;
  std::chrono::steady_clock::time_point since_;
  uint64_t id_ = 0;
};

class Port {
 public:
  struct Options {
    std::string listen_address;       // host:port, [v6]:port; a wildcard host listens on both
    bool tls = false;                 // the gRPC server speaks TLS: ClientHellos go to it
    size_t max_unauthenticated = 0;   // 0: from the file limit (UnauthenticatedBound)
    size_t max_waiting = 0;           // 0: from the file limit (LobbyBound)
    size_t max_grpc_connections = 0;  // 0: from the file limit (GrpcConnectionBound)
  };
  // Connections opening with "GRS": `magic` is the 4 bytes read; the handler owns the socket
  // and the slot.
  using SessionHandler = std::function<void(boost::asio::ip::tcp::socket socket, std::string magic,
                                            std::shared_ptr<PreAuthSlot> slot)>;
  static constexpr std::chrono::seconds kMinSlotAge{1};

  // AlreadyExists when the port is taken.
  static absl::StatusOr<std::unique_ptr<Port>> Open(boost::asio::io_context& io, Options options);
  ~Port();
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  int port() const { return port_; }
  // The gRPC server a connection is handed to, started on the first call when its owner
  // starts it lazily; null when it cannot start (the connection is then closed).
  using GrpcServer = std::function<Server*()>;
  // Starts accepting. `on_session` null: session openings are closed. The server must
  // outlive Close().
  void Start(SessionHandler on_session, GrpcServer grpc);
  void Start(SessionHandler on_session, Server* grpc) {
    Start(std::move(on_session), [grpc] { return grpc; });
  }
  // Stops accepting new connections (those being sniffed are closed). Idempotent.
  void StopAccepting();
  // The kernel's view of this port's connections (also read by the scheduler's sweep).
  std::shared_ptr<ConnectionActivityReader> activity() const { return activity_; }
  // The bounds in force.
  size_t max_unauthenticated() const;
  size_t max_waiting() const;
  size_t max_grpc_connections() const;

  // Bounds for a file limit of `file_limit` descriptors.
  static size_t UnauthenticatedBound(uint64_t file_limit);
  // file limit / 4 (16..16384): a waiting connection costs a descriptor and its kernel socket.
  static size_t LobbyBound(uint64_t file_limit);
  static size_t GrpcConnectionBound(uint64_t file_limit);

  struct State;

 private:
  Port() = default;
  std::shared_ptr<State> state_;
  std::shared_ptr<ConnectionActivityReader> activity_;
  int port_ = 0;
};

}  // namespace gangrun::rpc
