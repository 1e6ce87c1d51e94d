// The job's outcome as the user reads it: one root-cause report for a failure.

#include <sstream>

#include "common/exit_status.h"
#include "launcher/launcher.h"
#include "proto/conversions.h"
#include "scheduler/hang_report.h"
#include "scheduler/ledger.h"

namespace gangrun::launcher {

namespace {

std::string Warnings(const v1::JobOutcome& outcome) {
  std::string out;
  for (const auto& warning : outcome.warnings()) out += "gangrun: warning: " + warning + "\n";
  return out;
}

// `heading`, then each of `lines` quoted ("    | LINE"); nothing without lines.
void Quote(std::ostream& out, const std::string& heading,
           const google::protobuf::RepeatedPtrField<std::string>& lines) {
  if (lines.empty()) return;
  out << heading;
  for (const auto& line : lines) out << "    | " << line << "\n";
}

// Which rank failed where and how, and its evidence: its recorded exception, its log's last
// lines, its host's kernel log, the processes outside the job holding its host's devices.
std::string RootCause(const v1::RootCause& cause) {
  std::ostringstream out;
  const common::ExitStatus exit = proto::FromProto(cause.exit());
  out << "gangrun: job failed. Root cause: "
      << (cause.rank() >= 0 ? "rank " + std::to_string(cause.rank())
                            : std::string("the MindSpore scheduler process"))
      << " on host " << cause.host();
  if (cause.pid() > 0) out << " (pid " << cause.pid() << ")";
  out << " " << (cause.pid() > 0 ? exit.ToString() : std::string("could not start")) << ".\n";
  if (!cause.error().message().empty() || cause.error().traceback_size() > 0) {
    out << "  its exception (torch @record, TORCHELASTIC_ERROR_FILE): " << cause.error().message()
        << "\n";
    Quote(out, "  last lines of its traceback:\n", cause.error().traceback());
  }
  Quote(out, "  last lines of " + (cause.log_path().empty() ? "its log" : cause.log_path()) + ":\n",
        cause.log_tail());
  Quote(out, "  the kernel's log on " + cause.host() + " since the generation started:\n",
        cause.kernel_log());
  Quote(out, "  outside this job, holding " + cause.host() + "'s devices:\n",
        cause.device_holders());
  return out.str();
}

}  // namespace

std::string FormatOutcome(const v1::JobOutcome& outcome) {
  std::string time;
  if (outcome.has_ledger()) {
    time = "gangrun: the job's time: " + scheduler::DescribeLedger(outcome.ledger()) + "\n";
    if (!outcome.ledger().what_if().empty()) {
      time += "gangrun: what if: " + outcome.ledger().what_if() + "\n";
    }
  }
  return FormatKind(outcome) + Warnings(outcome) + time;
}

std::string FormatKind(const v1::JobOutcome& outcome) {
  std::ostringstream out;
  switch (outcome.kind()) {
    case v1::JobOutcome::KIND_SUCCEEDED:
      return "";
    case v1::JobOutcome::KIND_WORKER_FAILED:
      out << RootCause(outcome.root_cause());
      if (!outcome.message().empty()) out << "  " << outcome.message() << ".\n";
      break;
    case v1::JobOutcome::KIND_STOPPED_BY_SIGNAL:
      out << "gangrun: job stopped: "
          << (outcome.message().empty()
                  ? "the launcher received " + common::SignalName(outcome.signal())
                  : outcome.message())
          << ".\n";
      break;
    case v1::JobOutcome::KIND_FORMATION_FAILED:
      out << "gangrun: the cluster did not form: " << outcome.message() << "\n";
      return out.str();
    case v1::JobOutcome::KIND_NODE_LOST:
      out << "gangrun: a node was lost: " << outcome.message() << "\n";
      return out.str();
    case v1::JobOutcome::KIND_EXCLUDED:
      out << "gangrun: this node was excluded from the job: " << outcome.message() << "\n";
      return out.str();
    case v1::JobOutcome::KIND_TIME_LIMIT:
      out << "gangrun: job stopped: " << outcome.message() << ".\n";
      break;
    case v1::JobOutcome::KIND_HUNG: {
      out << "gangrun: job hung. " << outcome.message() << "\n";
      out << scheduler::WhereEveryRankWas(
          {outcome.stack_groups().begin(), outcome.stack_groups().end()});
      const auto& cause = outcome.root_cause();
      if (!cause.host().empty()) {
        out << "  root cause: rank " << cause.rank() << " on host " << cause.host();
        if (cause.pid() > 0) out << " (pid " << cause.pid() << ")";
        out << "\n";
      }
      break;
    }
    default:
      out << "gangrun: the job ended without an outcome\n";
      return out.str();
  }
  if (outcome.stopped_ranks_size() > 0) {
    out << "  stopped because of it: rank";
    out << (outcome.stopped_ranks_size() > 1 ? "s " : " ");
    for (int i = 0; i < outcome.stopped_ranks_size(); ++i) {
      out << (i ? ", " : "") << outcome.stopped_ranks(i);
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace gangrun::launcher
