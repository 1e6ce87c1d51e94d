#pragma once
// The commands of the gangrun executable, one file each. A command returns what it ended
// with — a status (OK, or the one-line error) or a job's outcome — and prints only what it
// produces (a table, a value, a report). main() alone prints an error's line and turns the
// result into the process's exit code (cli/exit_codes.h).

#include <cstdio>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "gangrun/v1/session.pb.h"
#include "launcher/options.h"

namespace gangrun::cli {

using CommandResult = std::variant<absl::Status, v1::JobOutcome>;

struct CommandArgs {
  std::string argv0;              // the launch command's personality follows it
  std::vector<std::string> args;  // what follows the command's name
  launcher::EnvLookup env;
  std::string self_exe;  // this binary (for the keeper, detached supervisors, launchers)
};

CommandResult RunLaunch(const CommandArgs& command);     // gangrun [options] task ...
CommandResult RunStatus(const CommandArgs& command);     // gangrun status
CommandResult RunStop(const CommandArgs& command);       // gangrun stop
CommandResult RunHealth(const CommandArgs& command);     // gangrun health
CommandResult RunScale(const CommandArgs& command);      // gangrun scale
CommandResult RunKv(const CommandArgs& command);         // gangrun kv
CommandResult RunScheduler(const CommandArgs& command);  // gangrun scheduler (the daemon)
CommandResult RunAgent(const CommandArgs& command);      // gangrun agent
CommandResult RunSubmit(const CommandArgs& command);     // gangrun submit
CommandResult RunProgress(const CommandArgs& command);   // gangrun progress
CommandResult RunGenerate(const CommandArgs& command);   // gangrun generate (man, completion)
CommandResult RunStacks(const CommandArgs& command);     // gangrun stacks
CommandResult RunLogs(const CommandArgs& command);       // gangrun logs
CommandResult RunDrain(const CommandArgs& command);      // gangrun drain
CommandResult RunUndrain(const CommandArgs& command);    // gangrun undrain

// A command line `gangrun COMMAND` cannot read: one line, as CLI11 writes it for the other
// commands (InvalidArgument: exit code 2).
inline absl::Status UsageError(const std::string& command, const std::string& problem) {
  return absl::InvalidArgumentError(problem + " (see gangrun " + command + " --help)");
}

// -h or --help, alone.
inline bool AsksForHelp(const std::vector<std::string>& args) {
  return args.size() == 1 && (args[0] == "-h" || args[0] == "--help");
}

// The help of a command that reads its own command line, in the layout of the others'
// (CLI11's): "gangrun COMMAND: WHAT", "Usage: gangrun COMMAND SYNOPSIS", then DETAILS.
inline void PrintHelp(const std::string& command, const std::string& what,
                      const std::string& synopsis, const std::string& details) {
  std::printf("gangrun %s: %s\nUsage: gangrun %s %s\n\n%s\n", command.c_str(), what.c_str(),
              command.c_str(), synopsis.c_str(), details.c_str());
}

}  // namespace gangrun::cli
