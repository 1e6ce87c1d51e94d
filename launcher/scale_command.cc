#include "launcher/scale_command.h"

#include <cstdio>

#include "absl/strings/numbers.h"
#include "gangrun/v1/session.grpc.pb.h"
#include "launcher/credentials.h"
#include "worker/grpc_link.h"

namespace gangrun::launcher {
namespace {

int Usage(const std::string& problem) {
  std::fprintf(stderr,
               "gangrun scale: %s\nusage: gangrun scale --master HOST:PORT --worker_num N "
               "[--token T] [--tls_ca F --tls_cert F --tls_key F]\n",
               problem.c_str());
  return 2;
}

}  // namespace

int RunScaleCommand(const std::vector<std::string>& args, const EnvLookup& env) {
  std::string master = env("GANGRUN_MASTER").value_or("");
  Options tls = ClientAccessFromEnv(env);
  int worker_num = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    size_t eq = flag.find('=');
    if (eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return Usage("missing value for " + flag);
    }
    if (flag == "--master")
      master = value;
    else if (flag == "--worker_num" && absl::SimpleAtoi(value, &worker_num))
      continue;
    else if (flag == "--token")
      tls.token = value;
    else if (flag == "--tls_ca")
      tls.tls_ca = value;
    else if (flag == "--tls_cert")
      tls.tls_cert = value;
    else if (flag == "--tls_key")
      tls.tls_key = value;
    else
      return Usage("bad option " + flag);
  }
  if (master.empty()) return Usage("--master is required");
  if (worker_num <= 0) return Usage("--worker_num must be a positive integer");
  auto credentials = MakeChannelCredentials(tls);
  if (!credentials.ok()) return Usage(std::string(credentials.status().message()));
  auto stub = v1::Scheduler::NewStub(
      worker::MakeChannel(master, *credentials, "", std::chrono::seconds(30)));
  grpc::ClientContext context;
  worker::AddToken(context, tls.token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ScaleRequest request;
  request.set_worker_num(worker_num);
  v1::ScaleResponse response;
  grpc::Status status = stub->Scale(&context, request, &response);
  if (status.ok()) {
    std::printf("gangrun scale: the job at %s now aims for %d workers\n", master.c_str(),
                worker_num);
    return 0;
  }
  std::fprintf(stderr, "gangrun scale: %s\n", status.error_message().c_str());
  switch (status.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return 2;
    default:
      return 3;
  }
}

}  // namespace gangrun::launcher
