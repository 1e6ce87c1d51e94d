#pragma once
// The server side of gangrun's RPCs: one gRPC server type with gangrun's settings, used by the
// job schedulers, the daemon and the health port, and the token check every call passes.
//
// Settings: two processes must not share a port (no SO_REUSEPORT: the second one finds it
// taken); the keepalive ping policy nodes use; a connection must finish its TLS and HTTP/2
// handshake within HandshakeTimeoutMs() and is closed after kMaxConnectionIdleMs without a
// call, so idle or stray peers cannot hold descriptors for ever; 8 MiB messages; the
// standard health service (grpc.health.v1 Check), whose statuses the owner sets. That one is
// gangrun's own, on the callback API: Debian's gRPC 1.51 cannot start a server whose only
// service is its default (completion-queue) health service, which --health_port needs.

#include <grpcpp/grpcpp.h>

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace gangrun::rpc {

// 10 s, or GANGRUN_HANDSHAKE_TIMEOUT_MS (100..30000).
int HandshakeTimeoutMs();
inline constexpr int kMaxConnectionIdleMs = 60000;

// A started gRPC server. Its owner destroys it after the calls' targets can no longer be
// reached (ShutdownAsync first, from the io_context that finishes the calls).
class Server {
 public:
  // Listens on `listen_address` (host:port, [v6]:port; port 0 = any) and serves `services`.
  // Fails with Unavailable when it cannot listen (the port is taken, not local, or the TLS
  // credentials are unusable). An empty `listen_address` listens nowhere: its owner accepts
  // the connections and hands them over (AddConnection).
  static absl::StatusOr<std::unique_ptr<Server>> Start(
      const std::string& listen_address, std::shared_ptr<grpc::ServerCredentials> credentials,
      const std::vector<grpc::Service*>& services);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const { return port_; }
  // Serves a connection accepted on `listener_fd` by the owner of a server started without a
  // listening address; the owner no longer uses `fd`.
  void AddConnection(int listener_fd, int fd);
  // The standard health service: `service` ("" = the whole server, SERVING from the start)
  // SERVING or NOT_SERVING. A service never set is unknown (NOT_FOUND).
  void SetServing(const std::string& service, bool serving);

  class Health;
  // Stops the server (ending every call) on a thread of its own — Server::Shutdown waits for
  // calls that finish on `io` — and then runs `done` on `io`. Call from `io`'s thread.
  void ShutdownAsync(boost::asio::io_context& io, std::function<void()> done);
  // Stops it now; only where nothing runs on an io_context that calls need.
  void ShutdownNow();

 private:
  Server();
  std::unique_ptr<Health> health_;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> external_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::thread shutdown_thread_;
};

}  // namespace gangrun::rpc
