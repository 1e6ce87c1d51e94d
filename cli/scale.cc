#include <cstdio>

#include "cli/client.h"
#include "cli/scale_command.h"
#include "gangrun/v1/session.grpc.pb.h"
#include "rpc/channel.h"

namespace gangrun::launcher {

int RunScaleCommand(const std::vector<std::string>& args, const EnvLookup& env) {
  CLI::App app{"gangrun scale: change an elastic job's target size", "gangrun scale"};
  ClientTarget target;
  AddClientOptions(app, target, env);
  int worker_num = 0;
  app.add_option("--worker_num", worker_num, "the new maximum number of workers")->required();
  if (auto code = ParseClientArgs(app, "scale", args)) return *code;
  if (worker_num <= 0) {
    std::fprintf(stderr, "gangrun scale: --worker_num must be a positive integer\n");
    return 2;
  }
  auto channel = OpenClientChannel(target);
  if (!channel.ok()) {
    std::fprintf(stderr, "gangrun scale: %s\n", std::string(channel.status().message()).c_str());
    return 2;
  }
  auto stub = v1::Scheduler::NewStub(*channel);
  grpc::ClientContext context;
  rpc::AddToken(context, target.access.token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ScaleRequest request;
  request.set_worker_num(worker_num);
  v1::ScaleResponse response;
  grpc::Status status = stub->Scale(&context, request, &response);
  if (!status.ok()) return ClientCallFailed("scale", status);
  std::printf("gangrun scale: the job at %s now aims for %d workers\n", target.master.c_str(),
              worker_num);
  return 0;
}

}  // namespace gangrun::launcher
