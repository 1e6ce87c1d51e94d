#include "launcher/launch_spec.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/check.h"
#include "common/env_names.h"
#include "common/files.h"
#include "common/status.h"
#include "launcher/option_table.h"
#include "launcher/parse_command_line.h"

namespace gangrun::launcher {

v1::LaunchSpec ToLaunchSpec(const Options& o) {
  v1::LaunchSpec spec;
  for (const OptionRow& row : OptionRows()) {
    if (row.travels) (*spec.mutable_options())[row.name] = row.format(o);
  }
  spec.set_task_script(o.task_script);
  for (const auto& arg : o.task_args) spec.add_task_args(arg);
  return spec;
}

absl::StatusOr<Options> FromLaunchSpec(const v1::LaunchSpec& spec) {
  for (const auto& [name, value] : spec.options()) {
    const OptionRow* row = FindOptionRow(name);
    if (row == nullptr || !row->travels) {
      return absl::InvalidArgumentError("the launch spec names an option gangrun does not take: " +
                                        QuoteValue(name));
    }
  }
  // Through the one parser, so that a spec is held to exactly a command line's rules.
  ASSIGN_OR_RETURN(ParseResult parsed,
                   ParseCommandLine(Personality::kGangrun, LaunchArgv(spec),
                                    [](const std::string&) { return std::nullopt; }));
  return std::move(parsed.options);
}

void SetLaunchOption(v1::LaunchSpec& spec, const std::string& name, const std::string& value) {
  const OptionRow* row = FindOptionRow(name);
  GANGRUN_CHECK(row != nullptr && row->travels, "a launch spec's options are travelling options");
  (*spec.mutable_options())[name] = value;
}

std::string LaunchOption(const v1::LaunchSpec& spec, const std::string& name) {
  GANGRUN_CHECK(FindOptionRow(name) != nullptr, "a launch option is an option of the table");
  auto it = spec.options().find(name);
  return it == spec.options().end() ? std::string() : it->second;
}

std::vector<std::string> LaunchArgv(const v1::LaunchSpec& spec) {
  std::vector<std::string> argv;
  for (const OptionRow& row : OptionRows()) {
    auto it = spec.options().find(row.name);
    if (it == spec.options().end() || !row.travels) continue;
    argv.insert(argv.end(), {"--" + row.name, it->second});
  }
  argv.insert(argv.end(), {"--", spec.task_script()});
  argv.insert(argv.end(), spec.task_args().begin(), spec.task_args().end());
  return argv;
}

std::vector<std::string> LaunchLabel(const v1::LaunchSpec& spec) {
  std::vector<std::string> argv;
  if (const std::string run_id = LaunchOption(spec, "run_id"); !run_id.empty()) {
    argv.insert(argv.end(), {"--run_id", run_id});
  }
  argv.insert(argv.end(), {"--", spec.task_script()});
  argv.insert(argv.end(), spec.task_args().begin(), spec.task_args().end());
  return argv;
}

absl::StatusOr<v1::LaunchSpec> ReadLaunchSpec(int fd) {
  ASSIGN_OR_RETURN(std::string bytes,
                   common::ReadDescriptor(fd, kMaxLaunchSpecBytes, "the launch spec"));
  v1::LaunchSpec spec;
  if (!spec.ParseFromString(bytes)) {
    return absl::InvalidArgumentError("the launch spec on descriptor " + std::to_string(fd) +
                                      " does not parse");
  }
  return spec;
}

namespace {

std::string KeyOf(const std::string& entry) { return entry.substr(0, entry.find('=')); }

// Variables that configure gangrun itself, or belong to the submitter's service manager or
// batch system: a job must not inherit them from another host's shell.
bool NeverExported(const std::string& key) {
  for (const char* prefix : {env::kPrefix, "SLURM_", "WATCHDOG_", "LISTEN_"}) {
    if (absl::StartsWith(key, prefix)) return true;
  }
  return key == "NOTIFY_SOCKET" || key == "INVOCATION_ID" || key == "JOURNAL_STREAM" ||
         key == "PWD" || key == "OLDPWD" || key == "SHLVL" || key == "_";
}

bool IsVariableName(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(name[0])) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

}  // namespace

absl::Status ExportEnvironment(const std::string& mode, const std::vector<std::string>& environ,
                               const std::string& cwd, v1::LaunchSpec& spec) {
  spec.clear_env();
  spec.set_cwd(cwd);
  spec.set_env_all(mode == "ALL");
  if (mode == "NONE") return absl::OkStatus();
  std::set<std::string> chosen;
  if (mode != "ALL") {
    for (absl::string_view name : absl::StrSplit(mode, ',')) {
      if (!IsVariableName(name)) {
        return absl::InvalidArgumentError("--export: expected ALL, NONE or VAR[,VAR...], got '" +
                                          QuoteValue(mode) + "'");
      }
      chosen.insert(std::string(name));
    }
  }
  for (const auto& entry : environ) {
    const std::string key = KeyOf(entry);
    if (NeverExported(key) || (!chosen.empty() && chosen.count(key) == 0)) continue;
    spec.add_env(entry);
  }
  return absl::OkStatus();
}

std::vector<std::string> LauncherEnvironment(const v1::LaunchSpec& spec,
                                             const std::vector<std::string>& agent_env) {
  std::set<std::string> exported;
  for (const auto& entry : spec.env()) exported.insert(KeyOf(entry));
  std::vector<std::string> env;
  for (const auto& entry : agent_env) {
    const std::string key = KeyOf(entry);
    if (key == "NOTIFY_SOCKET" || absl::StartsWith(key, "WATCHDOG_")) continue;
    if (key == "PWD" && !spec.cwd().empty()) continue;
    // The agent's token is the daemon's: the launcher gives its workers their job's own.
    if (key == env::kToken || key == std::string(env::kToken) + "_FILE") continue;
    const bool agents_own = absl::StartsWith(key, env::kPrefix);
    if (agents_own || (!spec.env_all() && exported.count(key) == 0)) env.push_back(entry);
  }
  for (const auto& entry : spec.env()) {
    if (!NeverExported(KeyOf(entry))) env.push_back(entry);
  }
  if (!spec.cwd().empty()) env.push_back("PWD=" + spec.cwd());
  return env;
}

}  // namespace gangrun::launcher
