// gangrun health: asks a gRPC health service (a scheduler, a daemon, a launcher's
// --health_port) and prints its answer: SERVING (exit 0), otherwise exit 1; 3 when unreachable.

#include <cstdio>

#include "cli/client.h"
#include "cli/command.h"
#include "common/net.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace gangrun::cli {

CommandResult RunHealth(const CommandArgs& command) {
  CLI::App app{"gangrun health: ask a gRPC health service (exit 0 when SERVING)", "gangrun health"};
  std::string target;
  std::string service;
  double timeout = 5;
  app.add_option("--target", target, "HOST:PORT of a scheduler, daemon or --health_port")
      ->required();
  app.add_option("--service", service, "'' (the server) or gangrun.v1.Node (the node's workers)");
  app.add_option("--timeout", timeout, "seconds to wait for an answer (default 5)")
      ->check(CLI::Range(0.1, 3600.0));
  if (auto done = ParseArgs(app, "health", command.args)) return *done;
  if (auto address = common::ParseHostPort(target, "--target"); !address.ok()) {
    return address.status();
  }
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000)));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status =
      grpc::health::v1::Health::NewStub(channel)->Check(&context, request, &response);
  if (!status.ok()) {
    // An unknown service is an answer ("not serving that"), anything else is unreachable.
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      return absl::NotFoundError(status.error_message());
    }
    return absl::UnavailableError(status.error_message());
  }
  const std::string name =
      grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
  std::printf("%s\n", name.c_str());
  if (response.status() == grpc::health::v1::HealthCheckResponse::SERVING) return absl::OkStatus();
  return absl::NotFoundError(service.empty() ? "the server is " + name : service + " is " + name);
}

}  // namespace gangrun::cli
