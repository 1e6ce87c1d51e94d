#pragma once
// A node's link to a scheduler in another process, usually on another host: a session that
// survives the loss of a connection (SessionLink, node/session_link.h), on gangrun's own
// framing over TCP for plaintext jobs (node/tcp_link.h) or a gRPC stream for jobs with TLS
// (node/grpc_link.h).

#include <functional>
#include <string>

#include "common/clock.h"
#include "gangrun/v1/session.pb.h"
#include "node/node.h"

namespace gangrun::node {

class RemoteSchedulerLink : public SchedulerLink {
 public:
  using CommandHandler = std::function<void(const v1::NodeCommand&)>;
  // `reason` says why the session ended (unreachable, token rejected, connection lost).
  using LostHandler = std::function<void(const std::string& reason, bool unauthenticated)>;
  // Opens the session; it waits for the scheduler to be reachable. Handlers run on the
  // link's io_context.
  virtual void Connect(CommandHandler on_command, LostHandler on_lost) = 0;
};

}  // namespace gangrun::node
