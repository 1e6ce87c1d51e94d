// gangrun status: a job's phase, nodes, ranks, pids and states — or, against a daemon, its
// agents and every job — as tables or JSON.

#include <cstdio>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "cli/client.h"
#include "cli/command.h"
#include "common/exit_status.h"
#include "gangrun/v1/daemon.grpc.pb.h"
#include "gangrun/v1/session.grpc.pb.h"
#include "proto/conversions.h"
#include "scheduler/job_record.h"
#include "scheduler/ledger.h"
#include "store/run_store.h"

namespace gangrun::cli {
namespace {

// A time in this host's time zone, to the minute ("-" when not known: an older record).
std::string WhenUnix(double unix) {
  if (unix <= 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M", absl::FromUnixSeconds(static_cast<int64_t>(unix)),
                          absl::LocalTimeZone());
}

// When a finished job was submitted.
std::string Submitted(const v1::FinishedJob& job) { return WhenUnix(job.submitted_unix()); }

std::string ExitText(const v1::WorkerStatus& worker) {
  if (worker.state() == v1::WORKER_STATE_STARTING || worker.state() == v1::WORKER_STATE_RUNNING) {
    return "-";
  }
  if (worker.exit().signal() > 0) return common::SignalName(worker.exit().signal());
  return std::to_string(worker.exit().exit_code());
}

std::string NodeTable(const v1::GetStatusResponse& s) {
  std::string out = absl::StrFormat("%-20s %-16s %9s %6s %12s %-8s %9s\n", "NODE", "ADDRESS",
                                    "NODE_RANK", "RANKS", "LAUNCHER_PID", "STATE", "HEARTBEAT");
  for (const auto& n : s.nodes()) {
    std::string ranks =
        n.first_rank() < 0
            ? "-"
            : absl::StrFormat("%d-%d", n.first_rank(), n.first_rank() + n.local_worker_num() - 1);
    out +=
        absl::StrFormat("%-20s %-16s %9s %6s %12d %-8s %8.1fs\n", n.node_name(), n.host_address(),
                        n.node_rank() < 0 ? std::string("-") : std::to_string(n.node_rank()), ranks,
                        n.launcher_pid(), proto::Name(n.state()), n.heartbeat_age_seconds());
  }
  return out;
}

// STEP, AGE (since its last progress report), S/STEP (recent seconds per step) and SECTION
// come from GANGRUN_PROGRESS; "-" until the rank reports. A straggler is marked "*".
std::string WorkerTable(const v1::GetStatusResponse& s) {
  std::string out = absl::StrFormat("%6s %-20s %8s %-10s %-6s %8s %8s %8s  %s\n", "RANK", "NODE",
                                    "PID", "STATE", "EXIT", "STEP", "AGE", "S/STEP", "SECTION");
  for (const auto& n : s.nodes()) {
    for (const auto& w : n.workers()) {
      const bool reported = w.reports() > 0;
      out += absl::StrFormat(
          "%6d %-20s %8s %-10s %-6s %8s %8s %8s%s %s\n", w.rank(), n.node_name(),
          w.pid() > 0 ? std::to_string(w.pid()) : std::string("-"), proto::Name(w.state()),
          ExitText(w), reported && w.step() >= 0 ? std::to_string(w.step()) : std::string("-"),
          reported ? absl::StrFormat("%.1fs", w.progress_age_seconds()) : std::string("-"),
          w.step_seconds() > 0 ? absl::StrFormat("%.3f", w.step_seconds()) : std::string("-"),
          w.straggler() ? "*" : " ", w.section().empty() ? "-" : w.section());
    }
  }
  if (s.stragglers() > 0) {
    out += absl::StrFormat(
        "* %d straggler(s): slower per step than %.3f s (the median) by more than "
        "the straggler factor\n",
        s.stragglers(), s.median_step_seconds());
  }
  return out;
}

}  // namespace

std::string FormatJobStatus(const v1::GetStatusResponse& s) {
  std::string out = absl::StrFormat("job %s  phase %s  generation %d  restarts %d/%d  workers %d",
                                    s.job_id().empty() ? "-" : s.job_id(), proto::Name(s.phase()),
                                    s.generation(), s.restarts(), s.max_restarts(), s.world_size());
  if (s.min_world_size() != s.world_size()) {
    out += absl::StrFormat(" (elastic %d:%d)", s.min_world_size(), s.world_size());
  }
  if (s.spare_nodes() > 0) out += absl::StrFormat("  spares %d", s.spare_nodes());
  if (s.time_left_seconds() > 0) out += absl::StrFormat("  time left %.0fs", s.time_left_seconds());
  out += "\n";
  if (!s.store_note().empty()) out += "store: " + s.store_note() + "\n";
  if (!s.last_generation_end().empty()) out += "last: " + s.last_generation_end() + "\n";
  for (const auto& verdict : s.verdicts()) {
    out +=
        absl::StrFormat("verdict: generation %d: %s%s\n", verdict.generation(), verdict.verdict(),
                        verdict.fingerprint().empty() ? "" : " [" + verdict.fingerprint() + "]");
  }
  if (s.has_ledger()) {
    out += "time: " + scheduler::DescribeLedger(s.ledger()) + " (now " + s.ledger().phase() + ")\n";
  }
  if (!s.failures().empty()) {
    // Sorted by cause (the map on the wire has no order).
    std::map<std::string, uint64_t> failures(s.failures().begin(), s.failures().end());
    std::vector<std::string> parts;
    for (const auto& [cause, count] : failures) {
      if (count > 0) parts.push_back(absl::StrCat(cause, " ", count));  // only what happened
    }
    if (!parts.empty()) out += "failures: " + absl::StrJoin(parts, ", ") + "\n";
  }
  if (s.has_outcome()) {
    out += "outcome: " + proto::Name(s.outcome().kind());
    if (!s.outcome().message().empty()) out += " (" + s.outcome().message() + ")";
    out += "\n";
  }
  out += NodeTable(s);
  bool any = false;
  for (const auto& n : s.nodes()) any = any || n.workers_size() > 0;
  return any ? out + WorkerTable(s) : out;
}

std::string FormatDaemonStatus(const v1::DaemonStatusResponse& s) {
  if (s.standby()) {
    return "standing by: the active daemon is " +
           (s.active().empty() ? std::string("not known now") : "at " + s.active()) + "\n";
  }
  std::string out = absl::StrFormat("agents %d  jobs %d running or waiting  %d submitted\n",
                                    s.agents_size(), s.jobs_size(), s.jobs_submitted());
  out += absl::StrFormat("%5s %-20s %-16s %8s %5s %4s %-11s %s\n", "AGENT", "NAME", "ADDRESS",
                         "PID", "SLOTS", "USED", "STATE", "JOBS");
  for (const auto& a : s.agents()) {
    // An agent held out that is not registered now has no id, address or slots.
    const bool registered = a.agent_id() > 0;
    out += absl::StrFormat(
        "%5s %-20s %-16s %8s %5s %4s %-11s %s\n", registered ? std::to_string(a.agent_id()) : "-",
        a.name(), registered ? a.address() : "(not registered)",
        registered ? std::to_string(a.pid()) : "-", registered ? std::to_string(a.slots()) : "-",
        registered ? std::to_string(a.used_slots()) : "-", a.state().empty() ? "-" : a.state(),
        a.jobs().empty() ? "-" : absl::StrJoin(a.jobs(), ","));
    if (!a.reason().empty()) {
      out += "      " + a.state() + " since " + WhenUnix(a.since_unix()) + ": " + a.reason() + "\n";
    }
    if (!a.failures().empty()) {
      const auto& last = a.failures(a.failures_size() - 1);
      out += absl::StrFormat("      %d failure(s) attributed to it; the last %s, job %s: %s\n",
                             a.failures_size(), WhenUnix(last.unix()), last.job_id(), last.why());
    }
  }
  for (const auto& job : s.jobs()) out += "\n" + FormatJobStatus(job);
  if (!s.finished().empty()) {
    out += absl::StrFormat("\nfinished, newest first (the last %d kept):\n", s.finished_size());
    out += absl::StrFormat("%-14s %-12s %-16s %-18s %-8s %8s %8s %5s %s\n", "JOB", "USER",
                           "SUBMITTED", "OUTCOME", "EXIT", "RESTARTS", "WALL", "ETTR", "COMMAND");
    for (const auto& f : s.finished()) {
      std::string exit = "-";
      if (f.outcome().kind() == v1::JobOutcome::KIND_SUCCEEDED) {
        exit = "0";
      } else if (f.outcome().has_root_cause()) {
        exit = proto::FromProto(f.outcome().root_cause().exit()).signaled
                   ? common::SignalName(f.outcome().root_cause().exit().signal())
                   : std::to_string(f.outcome().root_cause().exit().exit_code());
      }
      const std::string wall = f.submitted_unix() > 0 && f.ended_unix() >= f.submitted_unix()
                                   ? absl::StrFormat("%.1fs", f.ended_unix() - f.submitted_unix())
                                   : std::string("-");
      const std::string ettr = f.outcome().has_ledger()
                                   ? absl::StrFormat("%.0f%%", f.outcome().ledger().ettr() * 100)
                                   : std::string("-");
      out += absl::StrFormat("%-14s %-12s %-16s %-18s %-8s %8d %8s %5s %s\n", f.job_id(),
                             f.user().empty() ? "-" : f.user(), Submitted(f),
                             proto::Name(f.outcome().kind()), exit, f.restarts(), wall, ettr,
                             f.command());
    }
  }
  return out;
}

namespace {

// `status --job ID` against a daemon: the running or waiting job as its scheduler says, else
// the finished one as the daemon kept it; NotFound (exit 1) when it knows neither.
CommandResult OneDaemonJob(const v1::DaemonStatusResponse& daemon, const std::string& job_id,
                           const std::string& master, bool json) {
  for (const auto& job : daemon.jobs()) {
    if (job.job_id() != job_id) continue;
    std::fputs((json ? proto::ToJson(job, /*pretty=*/true) : FormatJobStatus(job)).c_str(), stdout);
    return absl::OkStatus();
  }
  for (const auto& finished : daemon.finished()) {
    if (finished.job_id() != job_id) continue;
    if (json) {
      std::fputs(proto::ToJson(finished, /*pretty=*/true).c_str(), stdout);
      return absl::OkStatus();
    }
    std::string out = absl::StrFormat("job %s  finished: %s", finished.job_id(),
                                      proto::Name(finished.outcome().kind()));
    if (!finished.outcome().message().empty()) out += " (" + finished.outcome().message() + ")";
    out += absl::StrFormat("\ngenerations %d  restarts %d  workers %d\n", finished.generations(),
                           finished.restarts(), finished.world_size());
    out += "submitted " + Submitted(finished) +
           (finished.user().empty() ? "" : " by " + finished.user()) + "\n";
    if (finished.submitted_unix() > 0 && finished.ended_unix() >= finished.submitted_unix()) {
      out +=
          absl::StrFormat("wall time %.1fs\n", finished.ended_unix() - finished.submitted_unix());
    }
    if (finished.outcome().has_root_cause()) {
      const auto& cause = finished.outcome().root_cause();
      out += absl::StrFormat("root cause: rank %d on %s %s%s\n", cause.rank(), cause.host(),
                             proto::FromProto(cause.exit()).ToString(),
                             cause.log_path().empty() ? "" : " (log: " + cause.log_path() + ")");
    }
    for (const std::string& end : finished.generation_ends()) out += "  " + end + "\n";
    if (finished.outcome().has_ledger()) {
      out += "time: " + scheduler::DescribeLedger(finished.outcome().ledger()) + "\n";
    }
    out += "command: " + finished.command() + "\n";
    std::fputs(out.c_str(), stdout);
    return absl::OkStatus();
  }
  return absl::NotFoundError("the daemon at " + master + " has no job " + job_id +
                             " (running, waiting, or among the last " +
                             std::to_string(daemon.finished_size()) + " finished)");
}

// --store: the run's scheduler as the store names it, and the job's status from it; with no
// scheduler now (a failover under way, or the run is over), the store's record.
CommandResult StatusThroughStore(const ClientTarget& base, bool json) {
  const StoreLookup& flags = base.store;
  auto opened = OpenRunStore(flags);
  if (!opened.ok()) return opened.status();
  store::RunStore& run = **opened;
  auto holder = run.Scheduler();
  if (!holder.ok()) return holder.status();
  if (!holder->has_value()) {
    auto record = run.ReadRecord();
    if (!record.ok()) return record.status();
    if (!record->value.is_object()) {
      return absl::NotFoundError("run " + flags.run_id + " is not in the store " + flags.url);
    }
    nlohmann::json out = {
        {"run_id", flags.run_id}, {"scheduler", nullptr}, {"record", record->value}};
    if (json) {
      std::fputs((out.dump(2) + "\n").c_str(), stdout);
    } else {
      std::string state = "a failover may be under way";
      if (record->value.contains("outcome")) {
        const nlohmann::json& outcome = record->value["outcome"];
        state = "the run is over: " + scheduler::RecordField(outcome, "kind", std::string());
        const std::string message = scheduler::RecordField(outcome, "message", std::string());
        if (!message.empty()) state += ", " + message;
      }
      std::fputs(
          ("run " + flags.run_id + ": no scheduler holds it now (" + state +
           "); the store's record: generation " +
           std::to_string(scheduler::RecordField(record->value, "generation", 0)) + ", restarts " +
           std::to_string(scheduler::RecordField(record->value, "restarts_used", 0)) + "\n")
              .c_str(),
          stdout);
    }
    return absl::OkStatus();
  }
  const store::SchedulerInfo& scheduler = **holder;
  ClientTarget target = base;
  target.master = store::AddressToReach(scheduler);
  target.store = {};
  auto channel = OpenClientChannel(target);
  if (!channel.ok()) return channel.status();
  v1::GetStatusResponse job;
  grpc::Status status = v1::Scheduler::NewStub(*channel)->GetStatus(CallContext().get(), {}, &job);
  if (!status.ok()) return CallFailed(status);
  nlohmann::json who = scheduler.ToJson();
  who["term"] = scheduler.term;
  if (json) {
    nlohmann::json out = nlohmann::json::parse(proto::ToJson(job, /*pretty=*/false));
    out["scheduler"] = who;
    std::fputs((out.dump(2) + "\n").c_str(), stdout);
  } else {
    std::fputs(("scheduler: " + scheduler.host + " at " + scheduler.address + " (launcher pid " +
                std::to_string(scheduler.pid) + ", term " + std::to_string(scheduler.term) + ")\n" +
                FormatJobStatus(job))
                   .c_str(),
               stdout);
  }
  return absl::OkStatus();
}

}  // namespace

CommandResult RunStatus(const CommandArgs& command) {
  CLI::App app{"gangrun status: nodes, ranks, pids and states of a running job", "gangrun status"};
  ClientTarget target;
  AddClientOptions(app, target, command.env);
  bool json = false;
  app.add_flag("--json", json, "print JSON instead of tables");
  std::string job_id;
  app.add_option("--job", job_id,
                 "a daemon's job, running, waiting or among the last finished ones: that job only");
  AddStoreOptions(app, target);
  if (auto done = ParseArgs(app, "status", command.args)) return *done;
  if (!target.store.url.empty()) return StatusThroughStore(target, json);
  auto channel = OpenClientChannel(target);
  if (!channel.ok()) return channel.status();
  // A job's own scheduler first; a daemon answers UNIMPLEMENTED there.
  v1::GetStatusResponse job;
  grpc::Status status = v1::Scheduler::NewStub(*channel)->GetStatus(CallContext().get(), {}, &job);
  if (status.ok()) {
    if (!job_id.empty() && job.job_id() != job_id) {
      return absl::NotFoundError("the scheduler at " + target.master + " runs job " + job.job_id() +
                                 ", not " + job_id);
    }
    std::fputs((json ? proto::ToJson(job, /*pretty=*/true) : FormatJobStatus(job)).c_str(), stdout);
    return absl::OkStatus();
  }
  if (status.error_code() != grpc::StatusCode::UNIMPLEMENTED) return CallFailed(status);
  v1::DaemonStatusResponse daemon;
  status = v1::Daemon::NewStub(*channel)->Status(CallContext().get(), {}, &daemon);
  if (!status.ok()) return CallFailed(status);
  if (!job_id.empty()) return OneDaemonJob(daemon, job_id, target.master, json);
  std::fputs((json ? proto::ToJson(daemon, /*pretty=*/true) : FormatDaemonStatus(daemon)).c_str(),
             stdout);
  return absl::OkStatus();
}

}  // namespace gangrun::cli
