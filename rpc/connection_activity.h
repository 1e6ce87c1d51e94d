#pragma once
// What the kernel knows about a server's TCP connections: for each established connection
// to a local port, how long ago it last received data. Read in one netlink request
// (sock_diag, as `ss -ti` does), whatever the number of connections.
//
// The scheduler watches gRPC's connections this way (a session's connection reads its own
// figure: rpc::FrameConnection::SinceLastData; scheduler/liveness.h): a node pings every heartbeat
// interval (a session ping, rpc/frames.h, or a gRPC channel's HTTP/2 keepalive ping, which
// gRPC's transport answers without waking the application), and any data (a ping, a
// message) refreshes the connection's "last received" time. A stopped or frozen node process sends
// nothing, a crashed one resets the connection, so the kernel's figure is a heartbeat that costs
// the scheduler no message.

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace gangrun::rpc {

// Remote endpoint ("10.0.0.2:41234", "[fd00::2]:41234"; IPv4-mapped IPv6 addresses are
// written as IPv4) -> time since the connection last received data.
using ConnectionActivity = std::map<std::string, common::Duration>;

// Reads the activity of every established TCP connection (IPv4 and IPv6) whose local port
// is `local_port`. Keeps its netlink socket open, so that a process out of file descriptors
// can still read. Not thread-safe.
class ConnectionActivityReader {
 public:
  explicit ConnectionActivityReader(int local_port);
  ~ConnectionActivityReader();
  ConnectionActivityReader(const ConnectionActivityReader&) = delete;
  ConnectionActivityReader& operator=(const ConnectionActivityReader&) = delete;

  // Fails when the kernel does not answer sock_diag requests (no netlink in a sandbox).
  absl::StatusOr<ConnectionActivity> Read();

 private:
  absl::Status Dump(int family, ConnectionActivity& out);
  int port_;
  int fd_;
};

// The remote endpoint of a gRPC peer string ("ipv4:10.0.0.2:41234", "ipv6:[::1]:41234",
// also URI-escaped), written as ConnectionActivityReader writes it; "" for anything else
// (a Unix socket, an in-process channel, a malformed string).
std::string PeerEndpoint(const std::string& grpc_peer);

}  // namespace gangrun::rpc
