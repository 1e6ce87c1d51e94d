#include "launcher/launch_spec.h"

#include <cstdio>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace gangrun::launcher {
namespace {

// --bind_core's value as the option takes it.
std::string BindCoreText(const BindCore& bind) {
  switch (bind.mode) {
    case BindCore::Mode::kOff:
      return "False";
    case BindCore::Mode::kAuto:
      return "True";
    case BindCore::Mode::kDict:
      break;
  }
  nlohmann::ordered_json dict = nlohmann::ordered_json::object();
  for (const auto& [key, ranges] : bind.dict) dict[key] = ranges;
  return dict.dump();
}

// Round-trips exactly through SimpleAtod.
std::string Number(double value) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", value);
  return buf;
}

std::string Bool(bool value) { return value ? "True" : "False"; }

}  // namespace

v1::LaunchSpec ToLaunchSpec(const Options& o) {
  v1::LaunchSpec spec;
  spec.set_worker_num(o.worker_num);
  spec.set_worker_num_min(o.worker_num_min);
  spec.set_local_worker_num(o.local_worker_num);
  spec.set_master_addr(o.master_addr);
  spec.set_master_port(o.master_port);
  spec.set_node_rank(o.node_rank);
  spec.set_log_dir(o.log_dir);
  spec.set_join(o.join);
  spec.set_cluster_time_out(o.cluster_time_out);
  spec.set_bind_core(BindCoreText(o.bind_core));
  spec.set_sim_level(o.sim_level);
  spec.set_sim_rank_id(o.sim_rank_id);
  spec.set_rank_table_file(o.rank_table_file);
  spec.set_worker_log_name(o.worker_log_name);
  for (int rank : o.tail_worker_log) spec.add_tail_worker_log(rank);
  spec.set_max_restarts(o.max_restarts);
  spec.set_restart_backoff_initial(o.restart_backoff_initial);
  spec.set_restart_backoff_cap(o.restart_backoff_cap);
  spec.set_heartbeat_interval(o.heartbeat_interval);
  spec.set_node_timeout(o.node_timeout);
  spec.set_grace_period(o.grace_period);
  spec.set_last_call(o.last_call);
  spec.set_kv_max_bytes(o.kv_max_bytes);
  spec.set_kv_max_waits(o.kv_max_waits);
  spec.set_run_id(o.run_id);
  spec.set_log_prefix(o.log_prefix);
  spec.set_metrics_port(o.metrics_port);
  spec.set_event_log(o.event_log);
  spec.set_health_port(o.health_port);
  spec.set_token_file(o.access.token_file);
  spec.set_tls_cert(o.access.tls_cert);
  spec.set_tls_key(o.access.tls_key);
  spec.set_tls_ca(o.access.tls_ca);
  spec.set_hang_timeout(o.hang_timeout);
  spec.set_hang_timeout_auto(o.hang_timeout_auto);
  spec.set_hang_timeout_initial(o.hang_timeout_initial);
  for (const auto& [name, seconds] : o.section_timeouts) {
    (*spec.mutable_section_timeouts())[name] = seconds;
  }
  spec.set_stack_timeout(o.stack_timeout);
  spec.set_straggler_factor(o.straggler_factor);
  spec.set_task_script(o.task_script);
  for (const auto& arg : o.task_args) spec.add_task_args(arg);
  return spec;
}

absl::StatusOr<Options> FromLaunchSpec(const v1::LaunchSpec& spec) {
  // Through the one parser, so that a spec is held to exactly a command line's rules.
  ASSIGN_OR_RETURN(ParseResult parsed,
                   ParseCommandLine(Personality::kGangrun, LaunchArgv(spec),
                                    [](const std::string&) { return std::nullopt; }));
  return std::move(parsed.options);
}

namespace {

// Progress supervision's options (README "Progress, hangs and stragglers").
void AppendProgressOptions(const v1::LaunchSpec& spec, std::vector<std::string>& argv) {
  argv.insert(argv.end(),
              {"--hang_timeout", spec.hang_timeout_auto() ? "auto" : Number(spec.hang_timeout()),
               "--hang_timeout_initial", Number(spec.hang_timeout_initial())});
  if (!spec.section_timeouts().empty()) {
    // Sorted, so that the same spec always gives the same command line.
    std::map<std::string, double> sections(spec.section_timeouts().begin(),
                                           spec.section_timeouts().end());
    std::vector<std::string> items;
    for (const auto& [name, seconds] : sections) items.push_back(name + "=" + Number(seconds));
    argv.insert(argv.end(), {"--section_timeout", absl::StrJoin(items, ",")});
  }
  // 0: a spec from a submitter that did not know the option; the launcher's default holds.
  if (spec.stack_timeout() > 0)
    argv.insert(argv.end(), {"--stack_timeout", Number(spec.stack_timeout())});
  if (spec.straggler_factor() > 0) {
    argv.insert(argv.end(), {"--straggler_factor", Number(spec.straggler_factor())});
  }
}

}  // namespace

std::vector<std::string> LaunchArgv(const v1::LaunchSpec& spec) {
  const std::string worker_num =
      spec.worker_num_min() > 0
          ? std::to_string(spec.worker_num_min()) + ":" + std::to_string(spec.worker_num())
          : std::to_string(spec.worker_num());
  std::vector<std::string> argv = {
      "--worker_num",
      worker_num,
      "--local_worker_num",
      std::to_string(spec.local_worker_num()),
      "--master_addr",
      spec.master_addr(),
      "--master_port",
      std::to_string(spec.master_port()),
      "--node_rank",
      std::to_string(spec.node_rank()),
      "--log_dir",
      spec.log_dir(),
      "--join",
      Bool(spec.join()),
      "--cluster_time_out",
      std::to_string(spec.cluster_time_out()),
      "--bind_core",
      spec.bind_core(),
      "--sim_level",
      std::to_string(spec.sim_level()),
      "--sim_rank_id",
      std::to_string(spec.sim_rank_id()),
      "--rank_table_file",
      spec.rank_table_file(),
      "--worker_log_name",
      spec.worker_log_name(),
      "--tail_worker_log",
      absl::StrJoin(spec.tail_worker_log(), ","),
      "--max_restarts",
      std::to_string(spec.max_restarts()),
      "--restart_backoff",
      Number(spec.restart_backoff_initial()) + "," + Number(spec.restart_backoff_cap()),
      "--heartbeat_interval",
      Number(spec.heartbeat_interval()),
      "--node_timeout",
      Number(spec.node_timeout()),
      "--grace_period",
      Number(spec.grace_period()),
      "--last_call",
      Number(spec.last_call()),
      "--kv_max_bytes",
      std::to_string(spec.kv_max_bytes()),
      "--kv_max_waits",
      std::to_string(spec.kv_max_waits()),
      "--run_id",
      spec.run_id(),
      "--log_prefix",
      spec.log_prefix(),
      "--metrics_port",
      std::to_string(spec.metrics_port()),
      "--event_log",
      spec.event_log(),
      "--health_port",
      std::to_string(spec.health_port()),
      "--token_file",
      spec.token_file(),
      "--tls_cert",
      spec.tls_cert(),
      "--tls_key",
      spec.tls_key(),
      "--tls_ca",
      spec.tls_ca()};
  AppendProgressOptions(spec, argv);
  argv.insert(argv.end(), {"--", spec.task_script()});
  argv.insert(argv.end(), spec.task_args().begin(), spec.task_args().end());
  return argv;
}

namespace {

std::string KeyOf(const std::string& entry) { return entry.substr(0, entry.find('=')); }

// Variables that configure gangrun itself, or belong to the submitter's service manager or
// batch system: a job must not inherit them from another host's shell.
bool NeverExported(const std::string& key) {
  for (const char* prefix : {"GANGRUN_", "SLURM_", "WATCHDOG_", "LISTEN_"}) {
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
    const bool agents_own = absl::StartsWith(key, "GANGRUN_");
    if (agents_own || (!spec.env_all() && exported.count(key) == 0)) env.push_back(entry);
  }
  for (const auto& entry : spec.env()) {
    if (!NeverExported(KeyOf(entry))) env.push_back(entry);
  }
  if (!spec.cwd().empty()) env.push_back("PWD=" + spec.cwd());
  return env;
}

}  // namespace gangrun::launcher
