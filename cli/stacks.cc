// gangrun stacks: every rank's stack of a running job, now — a one-shot job's scheduler or a
// daemon's job — grouped as a hang report groups them; the job goes on untouched.

#include <cstdio>

#include "absl/strings/str_format.h"
#include "cli/client.h"
#include "cli/command.h"
#include "gangrun/v1/daemon.grpc.pb.h"
#include "gangrun/v1/session.grpc.pb.h"
#include "proto/conversions.h"
#include "scheduler/stacks_request.h"

namespace gangrun::cli {
namespace {

std::string Format(const v1::StacksResponse& response) {
  std::string out = absl::StrFormat("generation %d: %s\n", response.generation(),
                                    response.summary().empty() ? "no rank" : response.summary());
  for (const auto& stack : response.stacks()) {
    out += absl::StrFormat("\n--- rank %d (pid %d on %s)", stack.rank(), stack.pid(), stack.host());
    if (stack.has_collectives()) {
      out += absl::StrFormat(", collective #%d", stack.collectives());
      if (!stack.last_op().empty()) {
        out += " (" + stack.last_op() + (stack.in_collective() ? ", inside it)" : ")");
      }
    }
    if (!stack.error().empty()) {
      out += ": no stack: " + stack.error() + "\n";
      continue;
    }
    out += ", " + stack.kind() + " stack" + (stack.where().empty() ? "" : ", in " + stack.where()) +
           ":\n";
    out += stack.text();
    if (!stack.text().empty() && stack.text().back() != '\n') out += "\n";
  }
  if (response.texts_left_out()) {
    out += absl::StrFormat(
        "\n(more than %d ranks: only where each one is; ask for some with --rank for their "
        "stacks)\n",
        scheduler::StacksRequests::kMaxStackTexts);
  }
  return out;
}

}  // namespace

CommandResult RunStacks(const CommandArgs& command) {
  CLI::App app{"gangrun stacks: every rank's stack of a running job, now (the job goes on)",
               "gangrun stacks"};
  ClientTarget target;
  AddClientOptions(app, target, command.env);
  AddStoreOptions(app, target);
  std::string ranks_text, job_id;
  bool json = false;
  double timeout = 0;
  app.add_option("--rank", ranks_text,
                 "R, R-S, ...: only these ranks (0-3,7; default: every rank)");
  app.add_option("--job", job_id, "a daemon's job id (default: its only running job)");
  app.add_flag("--json", json, "print JSON instead of text");
  app.add_option("--timeout", timeout,
                 "seconds each node may take to capture (default: the job's --stack_timeout)")
      ->check(CLI::Range(0.1, 600.0));
  if (auto done = ParseArgs(app, "stacks", command.args)) return *done;
  auto ranks = ParseRankList(ranks_text, "stacks");
  if (!ranks.ok()) return ranks.status();
  auto channel = OpenClientChannel(target);
  if (!channel.ok()) return channel.status();
  v1::StacksRequest request;
  request.set_job_id(job_id);
  for (int rank : *ranks) request.add_ranks(rank);
  request.set_timeout_seconds(timeout);
  // The capture may take the job's whole --stack_timeout (at most 600 s), and then some.
  const int deadline = static_cast<int>(timeout > 0 ? timeout : 600) + 15;
  v1::StacksResponse response;
  grpc::Status status = grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "");
  if (job_id.empty()) {
    status =
        v1::Scheduler::NewStub(*channel)->Stacks(CallContext(deadline).get(), request, &response);
  }
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    status = v1::Daemon::NewStub(*channel)->Stacks(CallContext(deadline).get(), request, &response);
  }
  if (!status.ok()) return CallFailed(status);
  std::fputs((json ? proto::ToJson(response, /*pretty=*/true) : Format(response)).c_str(), stdout);
  return absl::OkStatus();
}

}  // namespace gangrun::cli
