// gangrun kv put KEY VALUE | get KEY | wait KEY [--timeout S] | add KEY N | del KEY: a worker's
// access to its job's key-value store, found through GANGRUN_SCHEDULER and GANGRUN_TOKEN (and
// GANGRUN_TLS_*) in its environment. Prints the value (get, wait, add). Exit codes: 0 done,
// 1 key absent or wait timed out, 2 bad usage, 3 scheduler unreachable or refused.

#include <cstdio>

#include "absl/strings/numbers.h"
#include "cli/client.h"
#include "cli/command.h"
#include "common/env_names.h"
#include "common/net.h"
#include "common/version.h"
#include "gangrun/v1/kv.grpc.pb.h"
#include "rpc/channel.h"

namespace gangrun::cli {
namespace {

absl::Status KvUsage(const std::string& problem) { return UsageError("kv", problem); }

// A call's status as the command's result (see the exit codes above).
absl::Status Result(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return absl::OkStatus();
    case grpc::StatusCode::NOT_FOUND:
      return absl::NotFoundError(status.error_message());
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::DeadlineExceededError(status.error_message());
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return absl::InvalidArgumentError(status.error_message());
    default:
      return absl::UnavailableError("the scheduler refused or is unreachable: " +
                                    status.error_message());
  }
}

struct Client {
  std::unique_ptr<v1::KeyValue::Stub> stub;
};

absl::Status Put(Client& c, const std::string& key, const std::string& value) {
  v1::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  v1::PutResponse response;
  return Result(c.stub->Put(CallContext(30).get(), request, &response));
}

absl::Status Get(Client& c, const std::string& key, std::optional<double> wait_seconds) {
  v1::GetRequest request;
  request.set_key(key);
  auto context = CallContext(30);
  if (wait_seconds) {
    request.set_wait_ms(static_cast<int64_t>(*wait_seconds * 1000));
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(request.wait_ms() + 30000));
    context->set_wait_for_ready(true);
  }
  v1::GetResponse response;
  grpc::Status status = c.stub->Get(context.get(), request, &response);
  if (status.ok()) std::printf("%s\n", response.value().c_str());
  return Result(status);
}

absl::Status Add(Client& c, const std::string& key, int64_t delta) {
  v1::AddRequest request;
  request.set_key(key);
  request.set_delta(delta);
  v1::AddResponse response;
  grpc::Status status = c.stub->Add(CallContext(30).get(), request, &response);
  if (status.ok()) std::printf("%lld\n", static_cast<long long>(response.value()));
  return Result(status);
}

absl::Status Delete(Client& c, const std::string& key) {
  v1::DeleteRequest request;
  request.set_key(key);
  v1::DeleteResponse response;
  return Result(c.stub->Delete(CallContext(30).get(), request, &response));
}

}  // namespace

CommandResult RunKv(const CommandArgs& command) {
  const auto& args = command.args;
  if (args.empty()) return KvUsage("missing command");
  if (AsksForHelp(args)) {
    PrintHelp("kv", "the job's key-value store, from a worker ($GANGRUN_SCHEDULER)",
              "put KEY VALUE | get KEY | wait KEY [--timeout SECONDS] | add KEY N | del KEY",
              "Commands:\n"
              "  put KEY VALUE               set KEY\n"
              "  get KEY                     print KEY's value (exit 1 when it has none)\n"
              "  wait KEY [--timeout S]      wait until KEY is set, then print its value\n"
              "  add KEY N                   add N to KEY's number and print the sum\n"
              "  del KEY                     delete KEY");
    return absl::OkStatus();
  }
  const std::string& verb = args[0];
  if (args.size() == 1 && verb == "--version") {
    std::printf("%s\n", common::VersionLine("gangrun kv").c_str());
    return absl::OkStatus();
  }
  auto target = command.env(env::kScheduler);
  if (!target || target->empty())
    return KvUsage(std::string(env::kScheduler) + " is not set (run me from a worker)");
  if (auto address = common::ParseHostPort(*target, env::kScheduler); !address.ok()) {
    return KvUsage(std::string(address.status().message()));
  }
  const rpc::Access access = ClientAccessFromEnv(command.env);
  auto credentials = rpc::MakeChannelCredentials(access);
  if (!credentials.ok()) return KvUsage(std::string(credentials.status().message()));
  auto token = rpc::ResolveToken(access);
  if (!token.ok()) return KvUsage(std::string(token.status().message()));
  Client client{v1::KeyValue::NewStub(
      rpc::MakeChannel(*target, *credentials, *token, "", std::chrono::seconds(30)))};
  if (verb == "put" && args.size() == 3) return Put(client, args[1], args[2]);
  if (verb == "get" && args.size() == 2) return Get(client, args[1], std::nullopt);
  if (verb == "wait" && (args.size() == 2 || args.size() == 4)) {
    double seconds = 3600 * 24 * 365;
    if (args.size() == 4 && (args[2] != "--timeout" || !absl::SimpleAtod(args[3], &seconds) ||
                             seconds < 0 || seconds > 3600 * 24 * 365)) {
      return KvUsage("bad --timeout (seconds, up to a year)");
    }
    return Get(client, args[1], seconds);
  }
  if (verb == "add" && args.size() == 3) {
    int64_t delta;
    if (!absl::SimpleAtoi(args[2], &delta)) return KvUsage("N must be an integer");
    return Add(client, args[1], delta);
  }
  if (verb == "del" && args.size() == 2) return Delete(client, args[1]);
  return KvUsage("unknown command or wrong number of arguments");
}

}  // namespace gangrun::cli
