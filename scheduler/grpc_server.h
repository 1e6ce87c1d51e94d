#pragma once
// The scheduler's gRPC face: the Scheduler service (one Session stream per node, GetStatus),
// the KeyValue service and the standard health service, on one listening port.
//
// gRPC runs its reactors on its own threads. A reactor never touches scheduler state: it
// posts to the io_context (the scheduler's strand), which does the work and finishes the
// RPC. Owned by the launcher; destroy it (which shuts the server down) before the
// scheduler, the store and the io_context.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/kv_store.h"
#include "scheduler/scheduler.h"
#include "scheduler/server_stream.h"

namespace gangrun::scheduler {

struct ServerOptions {
  std::string listen_address;                            // host:port ([v6]:port)
  std::string token;                                     // "" = no token required
  std::shared_ptr<grpc::ServerCredentials> credentials;  // null = insecure
};

// A connection must finish its TLS and HTTP/2 handshake within this long (default 10 s;
// GANGRUN_HANDSHAKE_TIMEOUT_MS, 100..30000, changes it), and one that carries no call for
// kMaxConnectionIdleMs is closed.
int HandshakeTimeoutMs();
inline constexpr int kMaxConnectionIdleMs = 60000;

// A gRPC server with gangrun's settings (no SO_REUSEPORT, the keepalive ping policy nodes
// use, handshake and idle timeouts, 8 MiB messages, the standard health service) for `services` on
// `listen_address`.
// `*port` is 0 afterwards when it could not listen.
std::unique_ptr<grpc::Server> BuildServer(const std::string& listen_address,
                                          std::shared_ptr<grpc::ServerCredentials> credentials,
                                          const std::vector<grpc::Service*>& services, int* port);

class SchedulerServer {
 public:
  // Fails with AlreadyExists when the port is taken (another launcher hosts the scheduler).
  static absl::StatusOr<std::unique_ptr<SchedulerServer>> Start(boost::asio::io_context& io,
                                                                Scheduler& scheduler,
                                                                KvStore& store,
                                                                const ServerOptions& options);
  ~SchedulerServer();
  int port() const { return port_; }
  // Stops the server (ending every call) and then runs `done` on `io`. Call on `io`'s thread
  // after the job has finished and the store's waiters were cancelled.
  void ShutdownAsync(boost::asio::io_context& io, std::function<void()> done);

  class Services;

 private:
  SchedulerServer() = default;
  std::unique_ptr<Services> services_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::thread shutdown_thread_;
};

}  // namespace gangrun::scheduler
