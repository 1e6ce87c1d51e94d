#pragma once
// What the client subcommands (status, stop, scale, submit) share: --master and the access
// options (--token, --tls_ca, --tls_cert, --tls_key, defaulting to GANGRUN_MASTER,
// GANGRUN_TOKEN, GANGRUN_TLS_*), parsed with CLI11, and the channel they open.

#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/options.h"
#include "rpc/credentials.h"

namespace gangrun::launcher {

struct ClientTarget {
  std::string master;  // HOST:PORT
  rpc::Access access;  // token and TLS files
};

// The token and TLS files a client command starts from: GANGRUN_TOKEN, GANGRUN_TLS_CA,
// GANGRUN_TLS_CERT, GANGRUN_TLS_KEY.
rpc::Access ClientAccessFromEnv(const EnvLookup& env);

// Adds --master and the access options to `app`, with defaults from the environment.
void AddClientOptions(CLI::App& app, ClientTarget& target, const EnvLookup& env);

// Parses `args`; returns an exit code when the command should end here (help: 0, bad
// usage: 2, with one line on stderr that names `command`), nullopt to go on.
std::optional<int> ParseClientArgs(CLI::App& app, const std::string& command,
                                   const std::vector<std::string>& args);

// A channel to target.master (TLS when the access options ask for it).
absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenClientChannel(const ClientTarget& target);

// Exit code for a failed call: 2 for refused arguments, 3 otherwise (unreachable, token).
int ClientCallFailed(const std::string& command, const grpc::Status& status);

}  // namespace gangrun::launcher
