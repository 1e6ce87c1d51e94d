#pragma once
// The scheduler's port and what it serves: node sessions (gangrun's framing for plaintext jobs,
// scheduler/session_port.h; the Scheduler service's Session stream for jobs with TLS), the
// rest of the Scheduler service (GetStatus, Scale, Stop), the KeyValue service and the
// standard health service. An rpc::Port owns the listener and hands gRPC its connections;
// both kinds of session are NodeSessions (scheduler/node_session.h).
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
#include "rpc/port.h"
#include "rpc/server.h"
#include "rpc/server_stream.h"
#include "scheduler/kv_store.h"
#include "scheduler/node_session.h"
#include "scheduler/scheduler.h"
#include "scheduler/session_port.h"

namespace gangrun::scheduler {

struct ServerOptions {
  std::string listen_address;                            // host:port ([v6]:port)
  std::string token;                                     // "" = no token required
  std::shared_ptr<grpc::ServerCredentials> credentials;  // null = insecure
  std::string run_id;                                    // the job's, told to nodes
  // Node sessions whose pings are read as they come; the later ones keep quiet
  // (scheduler/session_port.h).
  size_t loud_sessions = 64;
  // Opened node sessions that have not joined, at most (scheduler/session_port.h).
  size_t max_unjoined = SessionPort::kMaxUnjoined;
};

class SchedulerServer {
 public:
  // Fails with AlreadyExists when the port is taken (another launcher hosts the scheduler).
  static absl::StatusOr<std::unique_ptr<SchedulerServer>> Start(boost::asio::io_context& io,
                                                                Scheduler& scheduler,
                                                                KvStore& store,
                                                                const ServerOptions& options);
  ~SchedulerServer();
  int port() const { return port_number_; }
  // Node sessions (of either transport) enough for the event loop to batch its wake-ups
  // (common/event_loop.h): below it every arrival is handled at once.
  static constexpr size_t kCoalescingSessions = 64;
  bool Busy() const { return sessions_->size() >= kCoalescingSessions; }
  // Stops the server (ending every call and session) and then runs `done` on `io`. Call on
  // `io`'s thread after the job has finished and the store's waiters were cancelled.
  void ShutdownAsync(boost::asio::io_context& io, std::function<void()> done);

  class Services;

 private:
  SchedulerServer() = default;
  // The gRPC server, started on the first call; null when it cannot start.
  rpc::Server* Grpc();
  std::unique_ptr<NodeSessions> sessions_;
  std::unique_ptr<Services> services_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  absl::Status grpc_error_;              // why the gRPC server could not start
  std::unique_ptr<rpc::Server> server_;  // destroyed before services_: it refers to them
  std::unique_ptr<SessionPort> session_port_;
  std::unique_ptr<rpc::Port> port_;  // the listener, in front of server_ and session_port_
  int port_number_ = 0;
};

}  // namespace gangrun::scheduler
