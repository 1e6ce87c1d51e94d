#include "cli/client.h"

#include <cstdio>

#include "common/net.h"
#include "common/status.h"
#include "rpc/channel.h"

namespace gangrun::cli {

rpc::Access ClientAccessFromEnv(const launcher::EnvLookup& env) {
  rpc::Access access;
  access.token = env("GANGRUN_TOKEN").value_or("");
  access.tls_ca = env("GANGRUN_TLS_CA").value_or("");
  access.tls_cert = env("GANGRUN_TLS_CERT").value_or("");
  access.tls_key = env("GANGRUN_TLS_KEY").value_or("");
  return access;
}

void AddClientOptions(CLI::App& app, ClientTarget& target, const launcher::EnvLookup& env) {
  target.master = env("GANGRUN_MASTER").value_or("");
  target.access = ClientAccessFromEnv(env);
  app.add_option("--master", target.master, "the scheduler, HOST:PORT (GANGRUN_MASTER)");
  app.add_option("--token", target.access.token, "the job's token (GANGRUN_TOKEN)");
  app.add_option("--tls_ca", target.access.tls_ca, "CA bundle (GANGRUN_TLS_CA)");
  app.add_option("--tls_cert", target.access.tls_cert, "client certificate (GANGRUN_TLS_CERT)");
  app.add_option("--tls_key", target.access.tls_key, "client key (GANGRUN_TLS_KEY)");
}

std::optional<CommandResult> ParseArgs(CLI::App& app, const std::string& command,
                                       const std::vector<std::string>& args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return absl::OkStatus();
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(std::string(e.what()) + " (see gangrun " + command +
                                      " --help)");
  }
  return std::nullopt;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenClientChannel(const ClientTarget& target) {
  if (target.master.empty()) {
    return absl::InvalidArgumentError("--master HOST:PORT is required (or GANGRUN_MASTER)");
  }
  RETURN_IF_ERROR(common::ParseHostPort(target.master, "--master").status());
  ASSIGN_OR_RETURN(auto credentials, rpc::MakeChannelCredentials(target.access));
  return rpc::MakeChannel(target.master, credentials, "", std::chrono::seconds(30));
}

std::unique_ptr<grpc::ClientContext> CallContext(const std::string& token, int seconds) {
  auto context = std::make_unique<grpc::ClientContext>();
  rpc::AddToken(*context, token);
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return context;
}

absl::Status CallFailed(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::NOT_FOUND:
      return absl::InvalidArgumentError(status.error_message());
    default:
      return absl::UnavailableError(status.error_message());
  }
}

}  // namespace gangrun::cli
