#include <cstdio>

#include "absl/strings/numbers.h"
#include "cli/client.h"
#include "cli/kv_command.h"
#include "common/net.h"
#include "gangrun/v1/kv.grpc.pb.h"
#include "rpc/channel.h"
#include "rpc/credentials.h"

namespace gangrun::launcher {
namespace {

constexpr char kUsage[] =
    "usage: gangrun kv put KEY VALUE | get KEY | wait KEY [--timeout SECONDS] | add KEY N | "
    "del KEY";

int Usage(const std::string& problem) {
  std::fprintf(stderr, "gangrun kv: %s\n%s\n", problem.c_str(), kUsage);
  return 2;
}

int Report(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return 0;
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      std::fprintf(stderr, "gangrun kv: %s\n", status.error_message().c_str());
      return 1;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      std::fprintf(stderr, "gangrun kv: %s\n", status.error_message().c_str());
      return 2;
    default:
      std::fprintf(stderr, "gangrun kv: the scheduler refused or is unreachable: %s\n",
                   status.error_message().c_str());
      return 3;
  }
}

}  // namespace

int RunKvCommand(const std::vector<std::string>& args, const EnvLookup& env) {
  if (args.empty()) return Usage("missing command");
  const std::string& verb = args[0];
  auto target = env("GANGRUN_SCHEDULER");
  if (!target || target->empty())
    return Usage("GANGRUN_SCHEDULER is not set (run me from a worker)");
  if (auto address = common::ParseHostPort(*target, "GANGRUN_SCHEDULER"); !address.ok()) {
    return Usage(std::string(address.status().message()));
  }
  const rpc::Access access = ClientAccessFromEnv(env);
  auto credentials = rpc::MakeChannelCredentials(access);
  if (!credentials.ok()) return Usage(std::string(credentials.status().message()));
  auto stub =
      v1::KeyValue::NewStub(rpc::MakeChannel(*target, *credentials, "", std::chrono::seconds(30)));
  grpc::ClientContext context;
  rpc::AddToken(context, access.token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));

  if (verb == "put" && args.size() == 3) {
    v1::PutRequest request;
    request.set_key(args[1]);
    request.set_value(args[2]);
    v1::PutResponse response;
    return Report(stub->Put(&context, request, &response));
  }
  if ((verb == "get" && args.size() == 2) ||
      (verb == "wait" && (args.size() == 2 || args.size() == 4))) {
    v1::GetRequest request;
    request.set_key(args[1]);
    if (verb == "wait") {
      double seconds = 3600 * 24 * 365;
      if (args.size() == 4 &&
          (args[2] != "--timeout" || !absl::SimpleAtod(args[3], &seconds) || seconds < 0)) {
        return Usage("bad --timeout");
      }
      request.set_wait_ms(static_cast<int64_t>(seconds * 1000));
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::milliseconds(request.wait_ms() + 30000));
      context.set_wait_for_ready(true);
    }
    v1::GetResponse response;
    grpc::Status status = stub->Get(&context, request, &response);
    if (status.ok()) std::printf("%s\n", response.value().c_str());
    return Report(status);
  }
  if (verb == "add" && args.size() == 3) {
    v1::AddRequest request;
    request.set_key(args[1]);
    int64_t delta;
    if (!absl::SimpleAtoi(args[2], &delta)) return Usage("N must be an integer");
    request.set_delta(delta);
    v1::AddResponse response;
    grpc::Status status = stub->Add(&context, request, &response);
    if (status.ok()) std::printf("%lld\n", static_cast<long long>(response.value()));
    return Report(status);
  }
  if (verb == "del" && args.size() == 2) {
    v1::DeleteRequest request;
    request.set_key(args[1]);
    v1::DeleteResponse response;
    return Report(stub->Delete(&context, request, &response));
  }
  return Usage("unknown command or wrong number of arguments");
}

}  // namespace gangrun::launcher
