#pragma once
// The launcher as a library: what the launch command (cli/run.cc) calls to gather this host's
// facts, print a dry-run plan, run the job (job_runner.h) or detach it (--join False), and
// report its outcome. main() maps the outcome to the exit code.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env_names.h"
#include "gangrun/v1/session.pb.h"
#include "launcher/options.h"
#include "launcher/scheduler_role.h"
#include "launcher/worker_plan.h"

namespace gangrun::launcher {

// Resolves addresses, the task command, the token and the run id. Errors are
// InvalidArgument (bad configuration) and carry one line for the user.
absl::StatusOr<HostFacts> GatherHostFacts(const Options& options);

// This host's addresses besides facts.local_ip that it offers the others (with a node's join,
// in a store coordinator's record), in the kernel's order, IPv4 first, at most
// common::kMaxCandidates - 1 (README "Addresses"): none with --local_addr (it wins) or when
// local_ip is loopback (every launcher is on this host).
std::vector<std::string> OtherAddresses(const Options& options, const HostFacts& facts);

// The --dry_run plan: one block per local process with its rank, log, CPUs, command and the
// variables gangrun sets.
std::string FormatPlan(const Options& options, const HostFacts& facts);

struct RunContext {
  std::string self_exe;  // this binary, for the process keeper
  int ready_fd = -1;     // --join False: where the detached supervisor reports "running"
};

// Runs the job to its end (SIGINT/SIGTERM/SIGHUP end it early).
absl::StatusOr<v1::JobOutcome> RunJob(const Options& options, const HostFacts& facts,
                                      const RunContext& context);

// The one-paragraph root-cause report for a failed job, then the outcome's warnings, then
// where the job's time went (its ledger: scheduler/ledger.h).
std::string FormatOutcome(const v1::JobOutcome& outcome);
// The report without the warnings.
std::string FormatKind(const v1::JobOutcome& outcome);

// --join False: starts a detached copy of this launcher (same arguments, its own session,
// output to <log_dir>/gangrun.log) and returns once its workers run (nullopt), or with the
// outcome of a job that ended before they all ran.
absl::StatusOr<std::optional<v1::JobOutcome>> RunDetached(const std::vector<std::string>& argv,
                                                          const Options& options,
                                                          const HostFacts& facts,
                                                          const std::string& self_exe);

// Between gangrun's processes (common/env_names.h): env::kReadyFd marks the detached
// supervisor and names its ready pipe; env::kNodeOnly, set by `gangrun agent` for the
// launchers it starts, says the daemon hosts the job's scheduler, so this launcher only joins
// it as a node, even on the daemon's own host; env::kWorkerEnvFd is an agent-started
// launcher's descriptor with its workers' environment (NUL-separated KEY=VALUE entries): the
// launcher's own environment is the agent's.

}  // namespace gangrun::launcher
