#include "rpc/server.h"

#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cstdlib>
#include <map>

#include "absl/strings/numbers.h"
#include "common/env_names.h"
#include "common/mutex.h"
#include "common/numbers.h"
#include "common/secret.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace gangrun::rpc {

int HandshakeTimeoutMs() {
  int value = 10000;
  if (const char* env = std::getenv(env::kHandshakeTimeoutMs)) {
    value = static_cast<int>(common::ParseInt(env, 100, 30000).value_or(value));
  }
  return value;
}

class Server::Health : public grpc::health::v1::Health::CallbackService {
 public:
  Health() { Set("", true); }
  void Set(const std::string& service, bool serving) {
    common::MutexLock lock(&mu_);
    serving_[service] = serving;
  }
  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override {
    auto* reactor = context->DefaultReactor();
    common::MutexLock lock(&mu_);
    auto it = serving_.find(request->service());
    if (it == serving_.end()) {
      reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service"));
      return reactor;
    }
    response->set_status(it->second ? grpc::health::v1::HealthCheckResponse::SERVING
                                    : grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  common::Mutex mu_;
  std::map<std::string, bool> serving_ ABSL_GUARDED_BY(mu_);
};

Server::Server() : health_(std::make_unique<Health>()) {}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(
    const std::string& listen_address, std::shared_ptr<grpc::ServerCredentials> credentials,
    const std::vector<grpc::Service*>& services) {
  grpc::ServerBuilder builder;
  builder.SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, HandshakeTimeoutMs());
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, kMaxConnectionIdleMs);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.AddChannelArgument(GRPC_ARG_ENABLE_CHANNELZ, 0);
  builder.SetMaxReceiveMessageSize(8 << 20);
  std::unique_ptr<Server> server(new Server());
  auto access = credentials ? credentials : grpc::InsecureServerCredentials();
  if (!listen_address.empty()) {
    builder.AddListeningPort(listen_address, access, &server->port_);
  } else {
    // Connections accepted by the owner go through gRPC's usual path (handshake timeout,
    // peer names) as if gRPC had accepted them.
    server->external_ = builder.experimental().AddExternalConnectionAcceptor(
        grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, access);
  }
  for (grpc::Service* service : services) builder.RegisterService(service);
  builder.RegisterService(server->health_.get());
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || (server->port_ == 0 && !listen_address.empty())) {
    return absl::UnavailableError("cannot listen on " + listen_address);
  }
  return server;
}

void Server::AddConnection(int listener_fd, int fd) {
  if (!external_) {
    close(fd);
    return;
  }
  grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters connection;
  connection.listener_fd = listener_fd;
  connection.fd = fd;
  external_->HandleNewConnection(&connection);
}

void Server::SetServing(const std::string& service, bool serving) {
  health_->Set(service, serving);
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
