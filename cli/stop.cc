// gangrun stop: stops a job cleanly, as a SIGTERM to its launchers would (workers get SIGTERM,
// then SIGKILL after the grace period) — a one-shot job's scheduler, or a daemon's jobs.

#include <csignal>
#include <cstdio>

#include "cli/client.h"
#include "cli/command.h"
#include "gangrun/v1/daemon.grpc.pb.h"
#include "gangrun/v1/session.grpc.pb.h"

namespace gangrun::cli {

CommandResult RunStop(const CommandArgs& command) {
  CLI::App app{"gangrun stop: stop a running job cleanly (SIGTERM, then SIGKILL after the grace)",
               "gangrun stop"};
  ClientTarget target;
  AddClientOptions(app, target, command.env);
  AddStoreOptions(app, target);
  std::string job_id;
  app.add_option("--job", job_id, "a daemon's job id (default: every job of the daemon)");
  if (auto done = ParseArgs(app, "stop", command.args)) return *done;
  auto channel = OpenClientChannel(target);
  if (!channel.ok()) return channel.status();
  v1::StopJobRequest request;
  request.set_job_id(job_id);
  request.set_signal(SIGTERM);
  request.set_reason("stopped by gangrun stop");
  v1::StopJobResponse response;
  grpc::Status status =
      v1::Scheduler::NewStub(*channel)->Stop(CallContext().get(), request, &response);
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    status = v1::Daemon::NewStub(*channel)->Stop(CallContext().get(), request, &response);
  }
  if (!status.ok()) return CallFailed(status);
  if (response.stopped() == 0) {
    std::printf("gangrun stop: nothing to stop at %s (no running job)\n", target.master.c_str());
  } else {
    std::printf("gangrun stop: %d job(s) at %s are stopping\n", response.stopped(),
                target.master.c_str());
  }
  return absl::OkStatus();
}

}  // namespace gangrun::cli
