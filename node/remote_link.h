#pragma once
// A node's link to a scheduler in another process, usually on another host: gangrun's own
// framing over TCP for plaintext jobs (TcpSchedulerLink, node/tcp_link.h), or a gRPC stream
// for jobs with TLS (GrpcSchedulerLink, node/grpc_link.h).

#include <algorithm>
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

// How long a node waits for the answer to a keepalive ping before it gives the scheduler up,
// for a job's --heartbeat_interval and --node_timeout: the rest of the node timeout, at
// least half of it; so that the scheduler hears the node as often as it asked and the node
// notices a silent scheduler within the node timeout.
inline common::Duration KeepaliveTimeoutFor(common::Duration heartbeat_interval,
                                            common::Duration node_timeout) {
  return std::max<common::Duration>(node_timeout - heartbeat_interval, node_timeout / 2);
}

}  // namespace gangrun::node
