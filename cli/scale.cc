// gangrun scale: changes an elastic job's maximum size.

#include <cstdio>

#include "cli/client.h"
#include "cli/command.h"
#include "gangrun/v1/session.grpc.pb.h"
#include "launcher/options.h"

namespace gangrun::cli {

CommandResult RunScale(const CommandArgs& command) {
  CLI::App app{"gangrun scale: change an elastic job's target size", "gangrun scale"};
  ClientTarget target;
  AddClientOptions(app, target, command.env);
  AddStoreOptions(app, target);
  int worker_num = 0;
  app.add_option("--worker_num", worker_num, "the new maximum number of workers")
      ->required()
      ->check(CLI::Range(1, launcher::kMaxWorkers));
  if (auto done = ParseArgs(app, "scale", command.args)) return *done;
  auto channel = OpenClientChannel(target);
  if (!channel.ok()) return channel.status();
  v1::ScaleRequest request;
  request.set_worker_num(worker_num);
  v1::ScaleResponse response;
  grpc::Status status =
      v1::Scheduler::NewStub(*channel)->Scale(CallContext().get(), request, &response);
  if (!status.ok()) return CallFailed(status);
  std::printf("gangrun scale: the job at %s now aims for %d workers\n", target.master.c_str(),
              worker_num);
  return absl::OkStatus();
}

}  // namespace gangrun::cli
