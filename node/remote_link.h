#pragma once
// A node's link to a scheduler in another process, usually on another host: a session that
// survives the loss of a connection (SessionLink, node/session_link.h), on gangrun's own
// framing over TCP for plaintext jobs (node/tcp_link.h) or a gRPC stream for jobs with TLS
// (node/grpc_link.h).

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>

#include "common/clock.h"
#include "gangrun/v1/session.pb.h"
#include "node/node.h"

namespace grpc {
class ChannelCredentials;
}

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

struct RemoteLinkOptions {
  std::string target;  // the scheduler's host:port
  std::string token;   // "" = none
  // Null: plaintext, on gangrun's session framing (cheaper for the scheduler than a gRPC
  // call); otherwise TLS, on a gRPC stream.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  common::Duration heartbeat_interval = std::chrono::seconds(1);
  common::Duration node_timeout = std::chrono::seconds(30);
};

// The link a launcher that does not host the scheduler joins it with: a SessionLink over the
// transport its credentials call for, with the connection and handshake bounds that follow
// from its heartbeat interval.
std::unique_ptr<RemoteSchedulerLink> MakeRemoteSchedulerLink(boost::asio::io_context& io,
                                                             common::Clock& clock,
                                                             const RemoteLinkOptions& options);

}  // namespace gangrun::node
