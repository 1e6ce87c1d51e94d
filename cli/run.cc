// gangrun [options] <task_script> [args...] (and msrun, the same program): parse and check
// the options, take what Slurm gives, gather this host's facts, then print a dry-run plan, run
// the job here, or (--join False) leave it to a detached supervisor.

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "common/env_names.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/numbers.h"
#include "common/status.h"
#include "launcher/launch_spec.h"
#include "launcher/launcher.h"
#include "launcher/parse_command_line.h"
#include "launcher/slurm.h"
#include "node/keeper_client.h"
#include "rpc/credentials.h"

namespace gangrun::cli {
namespace {

// The options this launch runs with, from the command line, GANGRUN_*, Slurm and msrun's
// rules, and what to say of them once the launch is known to be valid (an invalid one is
// one line, never a warning and then the error).
struct Configured {
  launcher::Options options;
  std::vector<std::string> args;  // the command line they come from
  std::vector<std::string> infos, warnings;
  void Say() const {
    for (const auto& info : infos) common::Logger("launcher")->info("{}", info);
    for (const auto& warning : warnings) common::Logger("launcher")->warn("{}", warning);
  }
};

// The command line to parse: this process's, or, for a launcher an agent started, the one its
// launch spec describes (env::kLaunchSpecFd), whose label must be this process's.
absl::StatusOr<std::vector<std::string>> LaunchArguments(const CommandArgs& command) {
  const auto fd_text = command.env(env::kLaunchSpecFd);
  if (!fd_text) return command.args;
  const auto fd = common::ParseInt(*fd_text, 3, 1 << 20);
  if (!fd)
    return absl::InvalidArgumentError(std::string(env::kLaunchSpecFd) + " is not a descriptor");
  unsetenv(env::kLaunchSpecFd);
  ASSIGN_OR_RETURN(v1::LaunchSpec spec, launcher::ReadLaunchSpec(static_cast<int>(*fd)));
  if (launcher::LaunchLabel(spec) != command.args) {
    return absl::InvalidArgumentError(
        "the launch spec on descriptor " + std::to_string(*fd) +
        " is not the job of this command line (an agent gives both: " +
        std::string(env::kLaunchSpecFd) + " is gangrun's own)");
  }
  return launcher::LaunchArgv(spec);
}

// nullopt after --help (printed).
absl::StatusOr<std::optional<Configured>> Configure(const CommandArgs& command) {
  const auto personality = launcher::PersonalityFromArgv0(command.argv0);
  ASSIGN_OR_RETURN(std::vector<std::string> args, LaunchArguments(command));
  ASSIGN_OR_RETURN(launcher::ParseResult parsed,
                   launcher::ParseCommandLine(personality, args, command.env));
  if (!parsed.help.empty()) {
    std::fputs(parsed.help.c_str(), stdout);
    return std::optional<Configured>();
  }
  Configured configured;
  launcher::Options& options = parsed.options;
  // One interpreter rule for every personality (torchrun's parser reads it too).
  if (options.python_exec.empty()) options.python_exec = command.env("PYTHON_EXEC").value_or("");
  std::vector<std::string>&infos = configured.infos, &warnings = configured.warnings;
  if (personality != launcher::Personality::kTorchrun) {
    // torchrun reads no Slurm variables: its recipes pass them on its command line.
    ASSIGN_OR_RETURN(launcher::SlurmApplied slurm,
                     launcher::ApplySlurm(options, parsed.given, command.env));
    if (!slurm.taken.empty()) infos.push_back(slurm.taken);
    warnings = slurm.warnings;
  }
  for (auto& warning : launcher::ApplyMsrunRules(options, command.env)) {
    warnings.push_back(std::move(warning));
  }
  for (auto& warning : parsed.warnings) warnings.push_back(std::move(warning));
  RETURN_IF_ERROR(launcher::Validate(options));
  configured.options = std::move(options);
  configured.args = std::move(args);
  return std::optional<Configured>(std::move(configured));
}

bool IsHelpOrVersion(const std::vector<std::string>& args) {
  return args.empty() ||
         (args.size() == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "--version"));
}

}  // namespace

CommandResult RunLaunch(const CommandArgs& command) {
  // The keeper's start overlaps with everything up to the job's first spawn; a launch that
  // ends before it (bad options, a dry run, --join False's first process) reaps it unused.
  // Not for a bare --help or --version, which never launch.
  std::optional<node::KeeperPrestart> keeper;
  if (!IsHelpOrVersion(command.args)) keeper.emplace();
  auto configured = Configure(command);
  if (!configured.ok()) return configured.status();
  if (!*configured) return absl::OkStatus();  // --help
  const launcher::Options& options = (*configured)->options;
  auto facts = launcher::GatherHostFacts(options);  // the task script is found here
  if (!facts.ok()) return facts.status();
  (*configured)->Say();
  rpc::WarnIfWeakToken(facts->token);
  if (options.dry_run) {
    std::fputs(launcher::FormatPlan(options, *facts).c_str(), stdout);
    return absl::OkStatus();
  }
  if (options.personality == launcher::Personality::kTorchrun && facts->log_dir.empty()) {
    // torchrun's default: a new directory of the job's own, not the working directory.
    auto made = common::MakeTempDir("torchelastic_");
    if (!made.ok()) return made.status();
    facts->log_dir = *made;
    common::Logger("launcher")->info("worker logs in {}", facts->log_dir);
  }
  launcher::RunContext context{command.self_exe, -1};
  if (const char* ready = std::getenv(env::kReadyFd)) {
    // We are the detached supervisor of --join False.
    context.ready_fd = static_cast<int>(common::ParseInt(ready, 3, 1 << 20).value_or(-1));
    unsetenv(env::kReadyFd);
  } else if (!options.join) {
    std::vector<std::string> argv = {command.argv0};
    argv.insert(argv.end(), (*configured)->args.begin(), (*configured)->args.end());
    auto ended = launcher::RunDetached(argv, options, *facts, command.self_exe);
    if (!ended.ok()) return ended.status();
    if (!*ended) return absl::OkStatus();  // its workers run
    return **ended;
  }
  auto outcome = launcher::RunJob(options, *facts, context);
  if (!outcome.ok()) return outcome.status();
  return *outcome;
}

}  // namespace gangrun::cli
