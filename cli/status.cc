#include <google/protobuf/util/json_util.h>

#include <csignal>
#include <cstdio>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/client.h"
#include "cli/control_command.h"
#include "common/exit_status.h"
#include "common/net.h"
#include "gangrun/v1/daemon.grpc.pb.h"
#include "gangrun/v1/session.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "rpc/channel.h"

namespace gangrun::launcher {
namespace {

std::unique_ptr<grpc::ClientContext> Context(const ClientTarget& target) {
  auto context = std::make_unique<grpc::ClientContext>();
  rpc::AddToken(*context, target.access.token);
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return context;
}

std::string ToJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

std::string ExitText(const v1::ProcessExit& exit, const std::string& state) {
  if (state == "starting" || state == "running") return "-";
  if (exit.signal() > 0) return common::SignalName(exit.signal());
  return std::to_string(exit.exit_code());
}

int BadChannel(const std::string& command, const absl::Status& status) {
  std::fprintf(stderr, "gangrun %s: %s\n", command.c_str(), std::string(status.message()).c_str());
  return 2;
}

}  // namespace

std::string FormatJobStatus(const v1::GetStatusResponse& s) {
  std::string out = absl::StrFormat("job %s  phase %s  generation %d  restarts %d/%d  workers %d",
                                    s.job_id().empty() ? "-" : s.job_id(), s.phase(),
                                    s.generation(), s.restarts(), s.max_restarts(), s.world_size());
  if (s.min_world_size() != s.world_size()) {
    out += absl::StrFormat(" (elastic %d:%d)", s.min_world_size(), s.world_size());
  }
  out += "\n";
  if (s.has_outcome()) {
    out += "outcome: " + v1::JobOutcome::Kind_Name(s.outcome().kind()).substr(5);
    if (!s.outcome().message().empty()) out += " (" + s.outcome().message() + ")";
    out += "\n";
  }
  out += absl::StrFormat("%-20s %-16s %9s %6s %12s %-8s %9s\n", "NODE", "ADDRESS", "NODE_RANK",
                         "RANKS", "LAUNCHER_PID", "STATE", "HEARTBEAT");
  for (const auto& n : s.nodes()) {
    std::string ranks =
        n.first_rank() < 0
            ? "-"
            : absl::StrFormat("%d-%d", n.first_rank(), n.first_rank() + n.local_worker_num() - 1);
    out +=
        absl::StrFormat("%-20s %-16s %9s %6s %12d %-8s %8.1fs\n", n.node_name(), n.host_address(),
                        n.node_rank() < 0 ? std::string("-") : std::to_string(n.node_rank()), ranks,
                        n.launcher_pid(), n.state(), n.heartbeat_age_seconds());
  }
  bool any = false;
  for (const auto& n : s.nodes()) any = any || n.workers_size() > 0;
  if (!any) return out;
  out += absl::StrFormat("%6s %-20s %8s %-10s %s\n", "RANK", "NODE", "PID", "STATE", "EXIT");
  for (const auto& n : s.nodes()) {
    for (const auto& w : n.workers()) {
      out += absl::StrFormat("%6d %-20s %8s %-10s %s\n", w.rank(), n.node_name(),
                             w.pid() > 0 ? std::to_string(w.pid()) : std::string("-"), w.state(),
                             ExitText(w.exit(), w.state()));
    }
  }
  return out;
}

std::string FormatDaemonStatus(const v1::DaemonStatusResponse& s) {
  std::string out = absl::StrFormat("agents %d  jobs %d running or waiting  %d submitted\n",
                                    s.agents_size(), s.jobs_size(), s.jobs_submitted());
  out += absl::StrFormat("%5s %-20s %-16s %8s %5s %4s %s\n", "AGENT", "NAME", "ADDRESS", "PID",
                         "SLOTS", "USED", "JOBS");
  for (const auto& a : s.agents()) {
    out += absl::StrFormat("%5d %-20s %-16s %8d %5d %4d %s\n", a.agent_id(), a.name(), a.address(),
                           a.pid(), a.slots(), a.used_slots(),
                           a.jobs().empty() ? "-" : absl::StrJoin(a.jobs(), ","));
  }
  for (const auto& job : s.jobs()) out += "\n" + FormatJobStatus(job);
  return out;
}

int RunStatusCommand(const std::vector<std::string>& args, const EnvLookup& env) {
  CLI::App app{"gangrun status: nodes, ranks, pids and states of a running job", "gangrun status"};
  ClientTarget target;
  AddClientOptions(app, target, env);
  bool json = false;
  app.add_flag("--json", json, "print JSON instead of tables");
  if (auto code = ParseClientArgs(app, "status", args)) return *code;
  auto channel = OpenClientChannel(target);
  if (!channel.ok()) return BadChannel("status", channel.status());

  // A job's own scheduler first; a daemon answers UNIMPLEMENTED there.
  v1::GetStatusResponse job;
  grpc::Status status =
      v1::Scheduler::NewStub(*channel)->GetStatus(Context(target).get(), {}, &job);
  if (status.ok()) {
    std::fputs((json ? ToJson(job) : FormatJobStatus(job)).c_str(), stdout);
    return 0;
  }
  if (status.error_code() != grpc::StatusCode::UNIMPLEMENTED)
    return ClientCallFailed("status", status);
  v1::DaemonStatusResponse daemon;
  status = v1::Daemon::NewStub(*channel)->Status(Context(target).get(), {}, &daemon);
  if (!status.ok()) return ClientCallFailed("status", status);
  std::fputs((json ? ToJson(daemon) : FormatDaemonStatus(daemon)).c_str(), stdout);
  return 0;
}

int RunStopCommand(const std::vector<std::string>& args, const EnvLookup& env) {
  CLI::App app{"gangrun stop: stop a running job cleanly (SIGTERM, then SIGKILL after the grace)",
               "gangrun stop"};
  ClientTarget target;
  AddClientOptions(app, target, env);
  v1::StopJobRequest request;
  std::string job_id;
  app.add_option("--job", job_id, "a daemon's job id (default: every job of the daemon)");
  if (auto code = ParseClientArgs(app, "stop", args)) return *code;
  auto channel = OpenClientChannel(target);
  if (!channel.ok()) return BadChannel("stop", channel.status());
  request.set_job_id(job_id);
  request.set_signal(SIGTERM);
  request.set_reason("stopped by gangrun stop");
  v1::StopJobResponse response;
  grpc::Status status =
      v1::Scheduler::NewStub(*channel)->Stop(Context(target).get(), request, &response);
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    status = v1::Daemon::NewStub(*channel)->Stop(Context(target).get(), request, &response);
  }
  if (!status.ok()) return ClientCallFailed("stop", status);
  if (response.stopped() == 0) {
    std::printf("gangrun stop: nothing to stop at %s (no running job)\n", target.master.c_str());
  } else {
    std::printf("gangrun stop: %d job(s) at %s are stopping\n", response.stopped(),
                target.master.c_str());
  }
  return 0;
}

int RunHealthCommand(const std::vector<std::string>& args, const EnvLookup& env) {
  CLI::App app{"gangrun health: ask a gRPC health service (exit 0 when SERVING)", "gangrun health"};
  std::string target;
  std::string service;
  double timeout = 5;
  app.add_option("--target", target, "HOST:PORT of a scheduler, daemon or --health_port")
      ->required();
  app.add_option("--service", service, "'' (the server) or gangrun.v1.Node (the node's workers)");
  app.add_option("--timeout", timeout, "seconds to wait for an answer (default 5)");
  if (auto code = ParseClientArgs(app, "health", args)) return *code;
  if (auto address = common::ParseHostPort(target, "--target"); !address.ok()) {
    return BadChannel("health", address.status());
  }
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000)));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status =
      grpc::health::v1::Health::NewStub(channel)->Check(&context, request, &response);
  if (!status.ok()) return ClientCallFailed("health", status);
  const std::string name =
      grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
  std::printf("%s\n", name.c_str());
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

}  // namespace gangrun::launcher
