#include "launcher/launch_spec.h"

#include <cstdio>
#include <map>

#include "absl/strings/str_join.h"
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
      spec.tls_ca(),
      "--hang_timeout",
      spec.hang_timeout_auto() ? "auto" : Number(spec.hang_timeout()),
      "--hang_timeout_initial",
      Number(spec.hang_timeout_initial())};
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
  argv.insert(argv.end(), {"--", spec.task_script()});
  argv.insert(argv.end(), spec.task_args().begin(), spec.task_args().end());
  return argv;
}

}  // namespace gangrun::launcher
