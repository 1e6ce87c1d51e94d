// gangrun drain NAME / gangrun undrain NAME: an operator keeps jobs off a daemon's agent, or
// lets them back (README "Agents' standing"). Undrain also releases a quarantined agent and
// forgets the failures attributed to it. Authenticated with the daemon's token, as every call.

#include <cstdio>

#include "cli/client.h"
#include "cli/command.h"
#include "gangrun/v1/daemon.grpc.pb.h"

namespace gangrun::cli {

namespace {

CommandResult RunDrainOrUndrain(const CommandArgs& command, bool undrain) {
  const std::string name = undrain ? "undrain" : "drain";
  CLI::App app{undrain ? "gangrun undrain: place jobs on a drained or quarantined agent again "
                         "(its attributed failures are forgotten)"
                       : "gangrun drain: place no new job on an agent (its running jobs go on)",
               "gangrun " + name};
  ClientTarget target;
  AddClientOptions(app, target, command.env);
  std::string agent, reason;
  app.add_option("agent", agent,
                 "the agent's name (gangrun agent --name; gangrun status lists them)")
      ->required();
  if (!undrain) app.add_option("--reason", reason, "why, shown in gangrun status");
  if (auto done = ParseArgs(app, name, command.args)) return *done;
  auto channel = OpenClientChannel(target);
  if (!channel.ok()) return channel.status();
  v1::DrainRequest request;
  request.set_agent(agent);
  request.set_undrain(undrain);
  request.set_reason(reason);
  v1::DrainResponse response;
  grpc::Status status =
      v1::Daemon::NewStub(*channel)->Drain(CallContext().get(), request, &response);
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    return absl::FailedPreconditionError(target.master +
                                         " is a job's scheduler, not a daemon: it has no agents");
  }
  if (!status.ok()) return CallFailed(status);
  std::printf("gangrun %s: %s\n", name.c_str(), response.message().c_str());
  return absl::OkStatus();
}

}  // namespace

CommandResult RunDrain(const CommandArgs& command) { return RunDrainOrUndrain(command, false); }
CommandResult RunUndrain(const CommandArgs& command) { return RunDrainOrUndrain(command, true); }

}  // namespace gangrun::cli
