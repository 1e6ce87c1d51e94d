#include "launcher/torchrun_options.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "common/numbers.h"
#include "launcher/option_table.h"

namespace gangrun::launcher::torch {

const std::vector<TorchOption>& TorchOptions() {
  static const std::vector<TorchOption> options = {
      {"nnodes", "--nnodes", false, "number of nodes, or MIN:MAX for an elastic job (default 1:1)"},
      {"nproc_per_node", "--nproc_per_node,--nproc-per-node", false,
       "workers per node: N, auto, cpu or gpu (default 1)"},
      {"rdzv_backend", "--rdzv_backend,--rdzv-backend", false,
       "static (default), c10d, or etcd (etcd-v2): etcd becomes the store of record"},
      {"rdzv_endpoint", "--rdzv_endpoint,--rdzv-endpoint", false,
       "HOST[:PORT] of the rendezvous; its host hosts gangrun's scheduler (c10d port 29400)"},
      {"rdzv_id", "--rdzv_id,--rdzv-id", false, "job id, TORCHELASTIC_RUN_ID (default none)"},
      {"rdzv_conf", "--rdzv_conf,--rdzv-conf", false,
       "KEY=VALUE,...: join_timeout, last_call_timeout, is_host (others accepted)"},
      {"standalone", "--standalone", true, "a single-node job with a rendezvous of its own"},
      {"max_restarts", "--max_restarts,--max-restarts", false,
       "restarts of the whole job after failures (default 0)"},
      {"monitor_interval", "--monitor_interval,--monitor-interval", false,
       "accepted; gangrun sees exits as they happen"},
      {"start_method", "--start_method,--start-method", false,
       "spawn, fork or forkserver: accepted; workers are always exec'd"},
      {"role", "--role", false, "ROLE_NAME of the workers (default 'default')"},
      {"module", "-m,--module", true, "run the script as a module: python -u -m MODULE"},
      {"no_python", "--no_python,--no-python", true, "run the script itself, not under python"},
      {"run_path", "--run_path,--run-path", true, "run the script under python (as torchrun)"},
      {"log_dir", "--log_dir,--log-dir", false,
       "directory of the workers' logs (default: a new torchelastic_* temporary directory)"},
      {"redirects", "-r,--redirects", false,
       "0-3 or LOCAL_RANK:0-3,...: ranks whose stdout and stderr (3) are redirected are not "
       "shown on the console; every rank's output is always in its log"},
      {"tee", "-t,--tee", false, "0-3 or LOCAL_RANK:0-3,...: shown on the console, prefixed"},
      {"local_ranks_filter", "--local_ranks_filter,--local-ranks-filter", false,
       "comma-separated local ranks shown on the console (default all)"},
      {"node_rank", "--node_rank,--node-rank", false, "static rendezvous: this node's rank"},
      {"master_addr", "--master_addr,--master-addr", false,
       "static rendezvous: the scheduler's host (default 127.0.0.1)"},
      {"master_port", "--master_port,--master-port", false,
       "static rendezvous: the scheduler's port (default 29500)"},
      {"local_addr", "--local_addr,--local-addr", false, "the address this node gives its peers"},
      {"signals_to_handle", "--signals_to_handle,--signals-to-handle", false,
       "SIG,...: SIGTERM, SIGINT and SIGHUP stop the job (always); the others listed "
       "(SIGUSR1, SIGUSR2, SIGQUIT, ...) reach every worker of the job, which goes on"},
      {"shutdown_timeout", "--shutdown_timeout,--shutdown-timeout", false,
       "seconds between SIGTERM and SIGKILL when workers stop (gangrun's --grace_period; "
       "default TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30)"},
      {"virtual_local_rank", "--virtual_local_rank,--virtual-local-rank", true,
       "every worker sees LOCAL_RANK=0 and only its own GPU (CUDA_VISIBLE_DEVICES)"},
      {"logs_specs", "--logs_specs,--logs-specs", false,
       "torch's LogsSpecs plugin: only the default (unset or 'default') is accepted"},
      {"event_log_handler", "--event_log_handler,--event-log-handler", false,
       "torch's event handler plugin: only 'null' (the default) is accepted; gangrun's "
       "--event_log writes every event as JSON"},
  };
  return options;
}

absl::Status Invalid(const std::string& source, const std::string& value,
                     const std::string& expected) {
  return absl::InvalidArgumentError("invalid value '" + QuoteValue(value) + "' for " + source +
                                    ": expected " + expected);
}

std::string PetName(const std::string& dest) { return "PET_" + absl::AsciiStrToUpper(dest); }

// gangrun's option names in both spellings, as CLI11 wants them.
std::string Spellings(const std::string& name) {
  std::string dashed = name;
  for (char& c : dashed) c = c == '_' ? '-' : c;
  return dashed == name ? "--" + name : "--" + name + ",--" + dashed;
}

bool IsTorchOption(const std::string& dest) {
  for (const auto& option : TorchOptions()) {
    if (option.dest == dest) return true;
  }
  return false;
}

// torchrun's options from their flags, else from PET_<DEST> (a flag's variable, as torchrun's
// check_env reads it: an integer, set when non-zero).
absl::StatusOr<Values> ReadTorchValues(const std::map<std::string, CLI::Option*>& given,
                                       const std::map<std::string, std::string>& texts,
                                       const EnvLookup& env, ParseResult& result) {
  std::map<std::string, Value> values;
  for (const auto& option : TorchOptions()) {
    if (given.at(option.dest)->count() > 0) {
      values[option.dest] = {option.flag ? "1" : texts.at(option.dest), "--" + option.dest};
      result.flags.insert(option.dest);
    } else if (auto from_env = env(PetName(option.dest))) {
      if (option.flag) {
        auto number = common::ParseInt(*from_env, INT64_MIN, INT64_MAX);
        if (!number) return Invalid(PetName(option.dest), *from_env, "an integer (0 or 1)");
        if (*number == 0) continue;
      }
      values[option.dest] = {*from_env, PetName(option.dest)};
    } else {
      continue;
    }
    result.given.insert(option.dest);
  }
  return Values(std::move(values));
}

std::map<std::string, Spelling> AllSpellings() {
  std::map<std::string, Spelling> all;
  auto add = [&all](const std::string& names, const std::string& dest, bool takes_value,
                    bool exact_only) {
    for (absl::string_view name : absl::StrSplit(names, ',')) {
      all[std::string(name)] = {dest, takes_value, exact_only};
    }
  };
  for (const auto& option : TorchOptions()) add(option.names, option.dest, !option.flag, false);
  // gangrun's own options by their full names only: torch's own win every abbreviation.
  for (const auto& def : GangrunOptionRows()) {
    if (!IsTorchOption(def.name)) add(Spellings(def.name), def.name, true, true);
  }
  add("-h,--help", "help", false, false);
  add("--version", "version", false, false);
  return all;
}

}  // namespace gangrun::launcher::torch
