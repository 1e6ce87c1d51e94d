#pragma once
// What the client commands (status, stop, scale, health, submit, kv) share: --master and the
// access options (rpc::AccessOptions: --token, --token_file, --tls_ca, --tls_cert, --tls_key,
// defaulting to GANGRUN_MASTER and GANGRUN_<OPTION>), parsed with CLI11, and the channel they
// open, whose calls prove the token (read from --token_file when given).

#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "launcher/options.h"
#include "rpc/credentials.h"
#include "store/run_store.h"

namespace gangrun::cli {

// --store: a job's scheduler found through its store of record (README "A store of record").
struct StoreLookup {
  std::string url, run_id, cacert, cert, key;
};

struct ClientTarget {
  std::string master;  // HOST:PORT
  rpc::Access access;  // token and TLS files
  StoreLookup store;   // url "" = none
};

// The token and TLS files a client command starts from: GANGRUN_TOKEN, GANGRUN_TOKEN_FILE,
// GANGRUN_TLS_CA, GANGRUN_TLS_CERT, GANGRUN_TLS_KEY.
rpc::Access ClientAccessFromEnv(const launcher::EnvLookup& env);

// --master's help, for every command that talks to the daemon (its clients and its agents).
std::string MasterHelp();

// Adds --master and the access options to `app`, with defaults from the environment.
void AddClientOptions(CLI::App& app, ClientTarget& target, const launcher::EnvLookup& env);

// Adds --store, --run_id, --store_cacert, --store_cert, --store_key (the job's commands:
// status, stop, scale, stacks, logs): the scheduler the store names for the run id is the
// target, wherever it is now.
void AddStoreOptions(CLI::App& app, ClientTarget& target);

// The run's keys in the store --store names (InvalidArgument for a bad URL or no --run_id).
absl::StatusOr<std::unique_ptr<store::RunStore>> OpenRunStore(const StoreLookup& lookup);

// Parses `args` with `app`. Returns a result when the command ends here: help (printed; OK),
// or bad usage (InvalidArgument, naming `command`'s --help); nullopt to go on.
std::optional<CommandResult> ParseArgs(CLI::App& app, const std::string& command,
                                       const std::vector<std::string>& args);

// --rank R[,R...] of `gangrun stacks` and `gangrun logs`: the ranks, or bad usage.
absl::StatusOr<std::vector<int>> ParseRankList(const std::string& text, const std::string& command);

// A channel to target.master (TLS when the access options ask for it), or with --store to the
// scheduler the store names.
absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenClientChannel(const ClientTarget& target);

// A context with a deadline of `seconds` (the channel adds the token's proof).
std::unique_ptr<grpc::ClientContext> CallContext(int seconds = 10);

// A failed call as the command's result: arguments the server refused are bad usage
// (InvalidArgument), anything else means the server is unreachable or refused us
// (Unavailable), and the server's message is kept.
absl::Status CallFailed(const grpc::Status& status);

}  // namespace gangrun::cli
