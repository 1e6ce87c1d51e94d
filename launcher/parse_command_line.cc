#include "launcher/parse_command_line.h"

#include <CLI/CLI.hpp>

#include "common/status.h"
#include "launcher/command_line.h"
#include "launcher/option_table.h"
#include "launcher/torchrun.h"

namespace gangrun::launcher {

absl::StatusOr<ParseResult> ParseCommandLine(Personality personality,
                                             const std::vector<std::string>& args,
                                             const EnvLookup& env) {
  if (personality == Personality::kTorchrun) return ParseTorchrunCommandLine(args, env);
  const char* program = personality == Personality::kMsrun ? "msrun" : "gangrun";
  CLI::App app{std::string(program) + ": launch ranked worker processes across hosts", program};
  app.prefix_command();  // everything from the task script on belongs to the task
  app.set_help_flag("-h,--help", "print this help and exit");
  const std::vector<OptionRow>& rows = OptionRows();
  std::vector<std::string> values(rows.size());
  // Each row's option kept, not looked up by name after the parse: CLI11's lookup walks every
  // option, so looking up each of the 56 rows cost 0.2 ms of a launch (bench/README.md).
  // Only the rows the command line names, when it names nothing else (command_line.h).
  const std::optional<std::vector<bool>> named = RowsNamedBeforeTheTask(rows, args);
  std::vector<CLI::Option*> added(rows.size(), nullptr);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (named && !(*named)[i]) continue;
    added[i] = app.add_option(std::string("--") + rows[i].name, values[i], rows[i].help)
                   ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                   ->type_name("VALUE");
  }
  // CLI11 2.1's first line is "Usage: gangrun [OPTIONS]": its label completes it with the task.
  app.get_formatter()->label("OPTIONS", "options] <task_script> [task_script_args...");
  app.footer(
      "Every option can also be set as GANGRUN_<OPTION> (e.g. GANGRUN_WORKER_NUM=4).\n"
      "Other commands (each with --help): gangrun status|stop|scale|stacks|logs|health|kv|"
      "progress (a running job), gangrun scheduler|agent|submit|drain|undrain (daemon mode), "
      "gangrun generate "
      "man|completion|token.");

  ASSIGN_OR_RETURN(std::string help, RunParser(app, args));
  ParseResult result;
  if (!help.empty()) {
    result.help = std::move(help);
    return result;
  }
  result.options.personality = personality;
  result.options.join = personality == Personality::kGangrun;
  for (size_t i = 0; i < rows.size(); ++i) {
    std::optional<std::string> given;
    if (added[i] != nullptr && added[i]->count() > 0) given = values[i];
    RETURN_IF_ERROR(ApplyOption(rows[i], given, GangrunVariable(rows[i].name), env, result));
  }
  RETURN_IF_ERROR(TakeTask(app.remaining(), program, result.options));
  return result;
}

}  // namespace gangrun::launcher
