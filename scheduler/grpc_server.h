#pragma once
// The scheduler's gRPC face: the Scheduler service (one Session stream per node, GetStatus),
// the KeyValue service and the standard health service, on one listening port. For a
// plaintext job a SessionPort owns that port: node sessions use gangrun's own framing there
// (rpc/frames.h), other connections are handed to the gRPC server.
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
#include "rpc/connection_activity.h"
#include "rpc/server.h"
#include "rpc/server_stream.h"
#include "scheduler/kv_store.h"
#include "scheduler/scheduler.h"
#include "scheduler/session_port.h"

namespace gangrun::scheduler {

struct ServerOptions {
  std::string listen_address;                            // host:port ([v6]:port)
  std::string token;                                     // "" = no token required
  std::shared_ptr<grpc::ServerCredentials> credentials;  // null = insecure
};

class SchedulerServer {
 public:
  // Fails with AlreadyExists when the port is taken (another launcher hosts the scheduler).
  static absl::StatusOr<std::unique_ptr<SchedulerServer>> Start(boost::asio::io_context& io,
                                                                Scheduler& scheduler,
                                                                KvStore& store,
                                                                const ServerOptions& options);
  ~SchedulerServer();
  int port() const { return port_; }
  // Stops the server (ending every call and session) and then runs `done` on `io`. Call on
  // `io`'s thread after the job has finished and the store's waiters were cancelled.
  void ShutdownAsync(boost::asio::io_context& io, std::function<void()> done);

  class Services;

 private:
  SchedulerServer() = default;
  std::unique_ptr<Services> services_;
  std::shared_ptr<rpc::ConnectionActivityReader> activity_;  // read by the scheduler
  std::unique_ptr<rpc::Server> server_;  // destroyed first: it refers to services_
  std::unique_ptr<SessionPort> sessions_;  // plaintext jobs: the port, in front of server_
  int port_ = 0;
};

}  // namespace gangrun::scheduler
