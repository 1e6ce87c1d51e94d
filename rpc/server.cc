#include "rpc/server.h"

#include <grpcpp/health_check_service_interface.h>

#include <boost/asio/post.hpp>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "common/secret.h"

namespace gangrun::rpc {

int HandshakeTimeoutMs() {
  int value = 10000;
  if (const char* env = std::getenv("GANGRUN_HANDSHAKE_TIMEOUT_MS")) {
    int parsed;
    if (absl::SimpleAtoi(env, &parsed) && parsed >= 100 && parsed <= 30000) value = parsed;
  }
  return value;
}

bool Authorized(const grpc::ServerContextBase& context, const std::string& token) {
  if (token.empty()) return true;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return false;
  return common::SecretsEqual(std::string_view(it->second.data(), it->second.size()),
                              "Bearer " + token);
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(
    const std::string& listen_address, std::shared_ptr<grpc::ServerCredentials> credentials,
    const std::vector<grpc::Service*>& services) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, HandshakeTimeoutMs());
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, kMaxConnectionIdleMs);
  builder.SetMaxReceiveMessageSize(8 << 20);
  std::unique_ptr<Server> server(new Server());
  builder.AddListeningPort(listen_address,
                           credentials ? credentials : grpc::InsecureServerCredentials(),
                           &server->port_);
  for (grpc::Service* service : services) builder.RegisterService(service);
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || server->port_ == 0) {
    return absl::UnavailableError("cannot listen on " + listen_address);
  }
  return server;
}

void Server::SetServing(const std::string& service, bool serving) {
  if (auto* health = server_->GetHealthCheckService()) health->SetServingStatus(service, serving);
}

void Server::ShutdownAsync(boost::asio::io_context& io, std::function<void()> done) {
  shutdown_thread_ = std::thread([this, &io, done = std::move(done)] {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    boost::asio::post(io, done);
  });
}

void Server::ShutdownNow() { server_->Shutdown(std::chrono::system_clock::now()); }

Server::~Server() {
  if (shutdown_thread_.joinable()) shutdown_thread_.join();
}

}  // namespace gangrun::rpc
