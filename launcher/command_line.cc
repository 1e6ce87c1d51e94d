#include "launcher/command_line.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/env_names.h"
#include "common/version.h"

namespace gangrun::launcher {

std::string GangrunVariable(const std::string& option) {
  return env::kPrefix + absl::AsciiStrToUpper(option);
}

absl::StatusOr<std::string> RunParser(CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them backwards
  app.set_version_flag("--version", common::VersionLine(app.get_name()),
                       "print the version and exit");
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return app.help();
  } catch (const CLI::CallForVersion&) {
    return common::VersionLine(app.get_name()) + "\n";
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  return std::string();
}

std::optional<std::vector<bool>> RowsNamedBeforeTheTask(const std::vector<OptionRow>& rows,
                                                        const std::vector<std::string>& args) {
  std::vector<bool> named(rows.size(), false);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.empty() || arg[0] != '-') return named;  // the task; what follows is its own
    if (arg.size() < 3 || arg[1] != '-') return std::nullopt;
    const size_t equals = arg.find('=');
    const absl::string_view name =
        absl::string_view(arg).substr(2, equals == std::string::npos ? equals : equals - 2);
    auto row = std::find_if(rows.begin(), rows.end(),
                            [name](const OptionRow& r) { return r.name == name; });
    if (row == rows.end()) return std::nullopt;
    named[row - rows.begin()] = true;
    if (equals != std::string::npos) continue;
    if (i + 1 == args.size() || args[i + 1].empty() || args[i + 1][0] == '-') return std::nullopt;
    ++i;  // its value
  }
  return named;
}

absl::Status ApplyOption(const OptionRow& def, const std::optional<std::string>& flag_value,
                         const std::string& variable, const EnvLookup& env, ParseResult& result) {
  std::string value, source = "--" + def.name;
  if (flag_value) {
    value = *flag_value;
    result.flags.insert(def.name);
  } else if (auto from_env = env(variable)) {
    value = *from_env;
    source = variable;
  } else {
    return absl::OkStatus();
  }
  result.given.insert(def.name);
  absl::Status status = def.set(result.options, value);
  if (status.ok()) return status;
  return absl::InvalidArgumentError("invalid value '" + QuoteValue(value) + "' for " + source +
                                    ": expected " + std::string(status.message()));
}

absl::StatusOr<std::vector<std::string>> ExpandAbbreviations(
    const std::vector<std::string>& args, const std::map<std::string, Spelling>& spellings) {
  std::vector<std::string> out;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--" || arg.empty() || arg[0] != '-') break;  // the task starts here
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    auto exact = spellings.find(name);
    std::string spelled = name;
    if (exact == spellings.end() && name.size() > 2 && name[1] == '-') {
      std::set<std::string> dests;
      std::vector<std::string> candidates;
      for (auto it = spellings.lower_bound(name);
           it != spellings.end() && it->first.compare(0, name.size(), name) == 0; ++it) {
        if (it->second.exact_only) continue;
        dests.insert(it->second.dest);
        candidates.push_back(it->first);
      }
      if (dests.size() > 1) {
        return absl::InvalidArgumentError("ambiguous option: " + name + " could match " +
                                          absl::StrJoin(candidates, ", "));
      }
      if (dests.size() == 1) {
        spelled = candidates.front();
        exact = spellings.find(spelled);
      }
    }
    out.push_back(eq == std::string::npos ? spelled : spelled + arg.substr(eq));
    if (exact != spellings.end() && exact->second.takes_value && eq == std::string::npos &&
        i + 1 < args.size()) {
      out.push_back(args[++i]);  // its value, whatever it looks like
    }
  }
  out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return out;
}

absl::Status TakeTask(std::vector<std::string> rest, const std::string& program, Options& options) {
  if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
  if (!rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-') {
    std::string name = rest.front().substr(0, rest.front().find('='));
    return absl::InvalidArgumentError("unknown option " + QuoteValue(name) + " (see " + program +
                                      " --help)");
  }
  if (!rest.empty()) {
    options.task_script = rest.front();
    options.task_args.assign(rest.begin() + 1, rest.end());
  }
  return absl::OkStatus();
}

}  // namespace gangrun::launcher
