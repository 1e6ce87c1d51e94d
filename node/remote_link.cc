#include "node/remote_link.h"

#include "node/grpc_link.h"
#include "node/session_link.h"
#include "node/tcp_link.h"
#include "rpc/server.h"

namespace gangrun::node {

std::unique_ptr<RemoteSchedulerLink> MakeRemoteSchedulerLink(boost::asio::io_context& io,
                                                             common::Clock& clock,
                                                             const RemoteLinkOptions& options) {
  SessionLink::Options link;
  link.target = options.target;
  link.heartbeat_interval = options.heartbeat_interval;
  link.node_timeout = options.node_timeout;
  const common::Duration connect_timeout = ConnectTimeoutFor(link.heartbeat_interval);
  ConnectionFactory factory;
  if (options.credentials == nullptr) {
    TcpSessionConnection::Options tcp;
    tcp.target = options.target;
    tcp.token = options.token;
    tcp.connect_timeout = connect_timeout;
    tcp.handshake_timeout = std::chrono::milliseconds(rpc::HandshakeTimeoutMs());
    factory = TcpSessionConnection::Factory(io, tcp);
  } else {
    GrpcSessionConnection::Options grpc;
    grpc.target = options.target;
    grpc.token = options.token;
    grpc.credentials = options.credentials;
    grpc.keepalive = link.heartbeat_interval;
    // Never before the session link gives up: it decides, on its own pings.
    grpc.keepalive_timeout = link.node_timeout + 4 * link.heartbeat_interval;
    grpc.attempt_timeout = connect_timeout + std::chrono::seconds(1);
    factory = GrpcSessionConnection::Factory(io, grpc);
  }
  return std::make_unique<SessionLink>(clock, link, std::move(factory));
}

}  // namespace gangrun::node
