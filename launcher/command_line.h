#pragma once
// What the launcher's command-line parsers share (options.cc: gangrun's and msrun's;
// torchrun.cc: torchrun's): running CLI11 over argv[1..], reading one option from its flag or
// its environment variable, and taking the task from what is left.

#include <CLI/CLI.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launcher/option_table.h"
#include "launcher/options.h"

namespace gangrun::launcher {

// GANGRUN_<OPTION>: where every personality reads gangrun's own option `option` from.
std::string GangrunVariable(const std::string& option);

// Parses `args` (argv[1..]) with `app`: the help text when --help was given, else "". CLI11's
// own errors (a value missing, ...) are InvalidArgument with its line.
absl::StatusOr<std::string> RunParser(CLI::App& app, const std::vector<std::string>& args);

// Which of `rows` `args` (argv[1..]) names before the task, each as --name VALUE or
// --name=VALUE: a launch gives CLI11 only these, since CLI11 compares each option it is given
// with every one before it (the 61 rows cost 1.8 M instructions, half of what a launch
// executed before its first worker, bench/README.md). nullopt when anything else comes before
// the task (--help, --version, an option that no row names, a value that starts with '-' or
// is missing): the parser then gets every row, and with them CLI11's help and its errors.
std::optional<std::vector<bool>> RowsNamedBeforeTheTask(const std::vector<OptionRow>& rows,
                                                        const std::vector<std::string>& args);

// Applies `def` from its flag (`flag_value`, when it was given) or else from the environment
// variable `variable`, and records it in result.given (and result.flags for a flag). Nothing
// happens when neither is set. Errors name where the value came from, e.g. "invalid value 'x'
// for GANGRUN_GRACE_PERIOD: expected ...".
absl::Status ApplyOption(const OptionRow& def, const std::optional<std::string>& flag_value,
                         const std::string& variable, const EnvLookup& env, ParseResult& result);

// argparse's abbreviations (torchrun's parser is argparse): before the task, a long option
// that is no spelling in `spellings` but the prefix of some is the option those spell, when
// they are all one option (`dest`); when they are several, InvalidArgument names them, as
// argparse does. `spellings` maps each spelling ("--nproc-per-node") to its option and
// whether it takes a value (so that the value is not taken for the task).
struct Spelling {
  std::string dest;
  bool takes_value = true;
  // Only its full spelling names it (gangrun's own options under torchrun: torch's own win
  // every prefix, as `--node 0` is torch's --node_rank, not gangrun's --node_timeout).
  bool exact_only = false;
};
absl::StatusOr<std::vector<std::string>> ExpandAbbreviations(
    const std::vector<std::string>& args, const std::map<std::string, Spelling>& spellings);

// The task script and its arguments from what the parser left (a leading "--" dropped); an
// option there is unknown to `program`.
absl::Status TakeTask(std::vector<std::string> rest, const std::string& program, Options& options);

}  // namespace gangrun::launcher
