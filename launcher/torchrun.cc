#include "launcher/torchrun.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/net.h"
#include "common/numbers.h"
#include "common/status.h"
#include "launcher/command_line.h"
#include "launcher/option_codecs.h"
#include "launcher/option_table.h"
#include "launcher/torchrun_options.h"

namespace gangrun::launcher {
namespace {

using namespace torch;  // torchrun's options and their values (launcher/torchrun_options.h)

absl::StatusOr<std::pair<int, int>> ParseNnodes(const Values& v) {
  const std::string text = v.Get("nnodes", "1:1");
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  int min = 0, max = 0;
  const bool ok = (parts.size() == 1 && absl::SimpleAtoi(parts[0], &min) && (max = min) > 0) ||
                  (parts.size() == 2 && absl::SimpleAtoi(parts[0], &min) &&
                   absl::SimpleAtoi(parts[1], &max) && min > 0 && min <= max);
  if (!ok || max > kMaxWorkers) {
    return v.Bad("nnodes", "N or MIN:MAX with 1 <= MIN <= MAX");
  }
  return std::make_pair(min, max);
}

absl::StatusOr<int> ParseNproc(const Values& v, const AcceleratorCounts& counts) {
  const std::string text = v.Get("nproc_per_node", "1");
  if (text == "cpu") return counts.cpus;
  if (text == "gpu") {
    if (counts.gpus == 0) {
      return absl::InvalidArgumentError(v.Source("nproc_per_node") +
                                        " gpu: no CUDA device on this host");
    }
    return counts.gpus;
  }
  if (text == "auto") return counts.gpus > 0 ? counts.gpus : counts.cpus;
  auto n = common::ParseInt(text, 1, kMaxLocalWorkers);
  if (!n) {
    return v.Bad("nproc_per_node",
                 "auto, cpu, gpu or an integer in [1, " + std::to_string(kMaxLocalWorkers) + "]");
  }
  return static_cast<int>(*n);
}

// Std.from_str: "0".."3", or "LOCAL_RANK:0-3,...". The local ranks whose stdout and stderr
// are both set; `all` when a single value covers every rank.
struct StdSpec {
  bool all = false;
  std::set<int> ranks;
  bool Covers(int local_rank) const { return all || ranks.count(local_rank) > 0; }
};

absl::StatusOr<StdSpec> ParseStd(const Values& v, const std::string& dest) {
  const std::string text = v.Get(dest, "0");
  const std::string expected = "0, 1, 2 or 3, or LOCAL_RANK:0-3[,LOCAL_RANK:0-3...]";
  StdSpec spec;
  if (auto single = common::ParseInt(text, 0, 3)) {
    spec.all = *single == 3;
    return spec;
  }
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(item, ':');
    if (parts.size() != 2) return v.Bad(dest, expected);
    auto rank = common::ParseInt(parts[0], 0, kMaxLocalWorkers - 1);
    auto streams = common::ParseInt(parts[1], 0, 3);
    if (!rank || !streams) return v.Bad(dest, expected);
    if (*streams == 3) spec.ranks.insert(static_cast<int>(*rank));
  }
  return spec;
}

// torchrun's RendezvousParameters.get_as_bool.
std::optional<bool> TorchBool(const std::string& text) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "1" || lower == "true" || lower == "t" || lower == "yes" || lower == "y") {
    return true;
  }
  if (lower == "0" || lower == "false" || lower == "f" || lower == "no" || lower == "n") {
    return false;
  }
  return std::nullopt;
}

absl::Status ApplyRdzvConf(const Values& v, Options& o, std::vector<std::string>& warnings) {
  const std::string text(absl::StripAsciiWhitespace(v.Get("rdzv_conf", "")));
  if (text.empty()) return absl::OkStatus();
  const std::string expected = "KEY=VALUE[,KEY=VALUE...]";
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    std::vector<std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.size() != 2) return v.Bad("rdzv_conf", expected);
    const std::string key(absl::StripAsciiWhitespace(kv[0]));
    const std::string value(absl::StripAsciiWhitespace(kv[1]));
    if (key.empty() || value.empty()) return v.Bad("rdzv_conf", expected);
    if (key == "join_timeout") {
      auto seconds = common::ParseInt(value, 1, 365 * 24 * 3600);
      if (!seconds) return v.Bad("rdzv_conf", "join_timeout=SECONDS (an integer >= 1)");
      o.cluster_time_out = static_cast<int>(*seconds);
    } else if (key == "last_call_timeout") {
      double seconds;
      if (!absl::SimpleAtod(value, &seconds) || !std::isfinite(seconds) || seconds < 0 ||
          seconds > 3600) {
        return v.Bad("rdzv_conf", "last_call_timeout=SECONDS in [0, 3600]");
      }
      o.last_call = seconds;
    } else if (key == "is_host") {
      auto host = TorchBool(value);
      if (!host) return v.Bad("rdzv_conf", "is_host=true or is_host=false");
      o.may_host_scheduler = *host;
    } else if (key == "cacert" || key == "cert" || key == "key") {
      // torch's etcd backend: TLS to etcd (gangrun's --store_cacert, --store_cert, --store_key).
      (key == "cacert" ? o.store_cacert : key == "cert" ? o.store_cert : o.store_key) = value;
    } else if (key == "etcd_prefix") {
      // Kept in `store` until ApplyRendezvous knows the endpoint (the URL's /PREFIX).
      o.store = "/" + std::string(absl::StripPrefix(absl::StripSuffix(value, "/"), "/"));
    } else if (key == "protocol") {
      if (value != "http" && value != "https") return v.Bad("rdzv_conf", "protocol=http or https");
    } else if (key == "close_timeout" || key == "read_timeout" || key == "timeout" ||
               key == "keep_alive_interval" || key == "keep_alive_max_attempt" ||
               key == "use_libuv") {
      // torch's own store and keep-alive tuning: gangrun's scheduler has its own
      // (--node_timeout, --heartbeat_interval).
    } else {
      warnings.push_back("--rdzv_conf " + key + " has no meaning for gangrun; ignored");
    }
  }
  return absl::OkStatus();
}

// HOST[:PORT]: a name or an IPv4 address with an optional port, an IPv6 address alone (::1) or
// in brackets with one ([::1]:29400). Anything else ("h:1:2") is refused, not looked up.
absl::Status ApplyEndpoint(const Values& v, int default_port, Options& o) {
  const std::string text = v.Get("rdzv_endpoint", "");
  const std::string expected = "HOST[:PORT] (an IPv6 address alone or in brackets)";
  std::string host = text;
  int port = default_port;
  const bool bracketed = !text.empty() && text[0] == '[';
  const size_t colons = static_cast<size_t>(std::count(text.begin(), text.end(), ':'));
  if (!bracketed && colons > 1) {
    if (!common::IsIpv6Literal(text)) return v.Bad("rdzv_endpoint", expected);
  } else if (const size_t colon = text.rfind(':');
             colon != std::string::npos && (!bracketed || text[colon - 1] == ']')) {
    auto parsed = common::ParseInt(text.substr(colon + 1), 1, 65535);
    if (!parsed) return v.Bad("rdzv_endpoint", expected);
    port = static_cast<int>(*parsed);
    host = text.substr(0, colon);
  }
  if (bracketed) {
    if (host.size() < 3 || host.back() != ']' ||
        !common::IsIpv6Literal(host.substr(1, host.size() - 2))) {
      return v.Bad("rdzv_endpoint", expected);
    }
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) return v.Bad("rdzv_endpoint", expected);
  if (port < 0) return v.Bad("rdzv_endpoint", "HOST:PORT (the static backend needs the port)");
  // The one HOST:PORT codec checks the host's spelling (nothing is looked up here).
  if (!common::ParseHostPort(common::JoinHostPort(host, port < 1 ? 1 : port), "").ok()) {
    return v.Bad("rdzv_endpoint", expected);
  }
  o.master_addr = host == "localhost" ? "127.0.0.1" : host;
  o.master_port = port;
  return absl::OkStatus();
}

absl::Status ApplyTask(const Values& v, const EnvLookup& env, Options& o) {
  const bool module = v.Has("module"), no_python = v.Has("no_python");
  if (v.Has("run_path")) {
    o.task_mode = TaskMode::kPython;  // torchrun runs it with runpy.run_path: python SCRIPT
  } else if (no_python && module) {
    return absl::InvalidArgumentError(
        "don't use both the '--no_python' flag and the '--module' flag at the same time");
  } else if (no_python) {
    o.task_mode = TaskMode::kExec;
  } else {
    o.task_mode = module ? TaskMode::kModule : TaskMode::kPython;
  }
  o.python_exec = env("PYTHON_EXEC").value_or("");
  return absl::OkStatus();
}

absl::Status ApplyConsole(const Values& v, Options& o) {
  ASSIGN_OR_RETURN(StdSpec redirects, ParseStd(v, "redirects"));
  ASSIGN_OR_RETURN(StdSpec tee, ParseStd(v, "tee"));
  std::set<int> filter;
  if (v.Has("local_ranks_filter")) {
    for (absl::string_view item : absl::StrSplit(v.Get("local_ranks_filter", ""), ',')) {
      auto rank = common::ParseInt(item, 0, kMaxLocalWorkers - 1);
      if (!rank) return v.Bad("local_ranks_filter", "a comma-separated list of local ranks");
      filter.insert(static_cast<int>(*rank));
    }
  }
  for (int local = 0; local < o.local_worker_num; ++local) {
    const bool shown = !redirects.Covers(local) || tee.Covers(local);
    if (shown && (filter.empty() || filter.count(local))) o.console_local_ranks.insert(local);
  }
  if (o.console_local_ranks.empty()) o.tail_worker_log.clear();  // nothing on the console
  // torchrun writes a worker's output to the console as is, and prefixes teed lines.
  o.log_prefix = tee.all || !tee.ranks.empty() ? "[" + o.role + "{local_rank}]:" : "";
  return absl::OkStatus();
}

// torchrun 2.9's --shutdown-timeout, --virtual-local-rank and its Python plugins' options.
absl::Status ApplyTorch29(const Values& v, const EnvLookup& env, Options& o) {
  std::optional<std::string> shutdown;
  std::string source = "--shutdown_timeout";
  if (v.Has("shutdown_timeout")) {
    shutdown = v.Get("shutdown_timeout", "");
    source = v.Source("shutdown_timeout");
  } else if ((shutdown = env("TORCH_ELASTIC_SHUTDOWN_TIMEOUT"))) {
    source = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT";
  }
  if (shutdown) {
    auto seconds = common::ParseInt(*shutdown, 0, 86400);
    if (!seconds) return Invalid(source, *shutdown, "an integer number of seconds in [0, 86400]");
    o.grace_period = static_cast<double>(*seconds);
  }
  if (v.Has("virtual_local_rank")) o.virtual_local_rank = true;
  const std::string specs = v.Get("logs_specs", "");
  if (!specs.empty() && specs != "default") {
    return v.Bad("logs_specs",
                 "the default: gangrun has no Python LogsSpecs plugins (every rank's output is "
                 "in its log file; --log_dir, --tee and --redirects choose where it shows)");
  }
  if (v.Get("event_log_handler", "null") != "null") {
    return v.Bad("event_log_handler",
                 "'null': gangrun has no Python event handlers (--event_log writes every event "
                 "as a JSON line)");
  }
  return absl::OkStatus();
}

// The options that have a meaning with either backend.
absl::Status ApplyCommon(const Values& v, const EnvLookup& env, Options& o,
                         std::vector<std::string>& warnings) {
  if (v.Has("max_restarts")) {
    auto n = common::ParseInt(v.Get("max_restarts", ""), 0, 1000000);
    if (!n) return v.Bad("max_restarts", "an integer in [0, 1000000]");
    o.max_restarts = static_cast<int>(*n);
  }
  double interval;
  if (v.Has("monitor_interval") && (!absl::SimpleAtod(v.Get("monitor_interval", ""), &interval) ||
                                    !std::isfinite(interval) || interval < 0)) {
    return v.Bad("monitor_interval", "a number of seconds >= 0");
  }
  const std::string method = v.Get("start_method", "spawn");
  if (method != "spawn" && method != "fork" && method != "forkserver") {
    return v.Bad("start_method", "spawn, fork or forkserver");
  }
  RETURN_IF_ERROR(ApplyTorch29(v, env, o));
  if (v.Has("signals_to_handle")) {
    absl::Status status = codec::SetSignalsToHandle(o, v.Get("signals_to_handle", ""));
    if (!status.ok()) return v.Bad("signals_to_handle", std::string(status.message()));
  }
  o.role = v.Get("role", "default");
  if (o.role.empty()) return v.Bad("role", "a non-empty name");
  o.log_dir = v.Get("log_dir", "");
  o.local_addr = v.Get("local_addr", "");
  o.last_call = 30;  // torchrun's last_call_timeout
  return ApplyRdzvConf(v, o, warnings);
}

// Whether --rdzv_conf holds a key of torch's etcd backend (TLS files, the key prefix).
bool HasEtcdConf(const Values& v) {
  for (absl::string_view item : absl::StrSplit(v.Get("rdzv_conf", ""), ',')) {
    const absl::string_view key = absl::StripAsciiWhitespace(item.substr(0, item.find('=')));
    if (key == "cacert" || key == "cert" || key == "key" || key == "etcd_prefix") return true;
  }
  return false;
}

absl::Status ApplyRendezvous(const Values& v, int nnodes_max, Options& o) {
  const std::string chosen = v.Get("rdzv_backend", "static");
  if ((v.Has("standalone") || (chosen != "etcd" && chosen != "etcd-v2")) && HasEtcdConf(v)) {
    return absl::InvalidArgumentError(
        "--rdzv_conf etcd_prefix, cacert, cert and key need --rdzv_backend etcd");
  }
  if (v.Has("standalone")) {
    // c10d on this host, whatever --rdzv_backend/--rdzv_endpoint/--rdzv_id say (as torchrun).
    o.master_addr = "127.0.0.1";
    o.master_port = kTorchC10dPort;
    o.run_id.clear();  // torchrun makes up a uuid; gangrun its own id
    o.node_rank = -1;
    return absl::OkStatus();
  }
  const std::string backend = v.Get("rdzv_backend", "static");
  if (backend == "static") {
    if (v.Has("master_addr")) o.master_addr = v.Get("master_addr", "");
    o.master_port = 29500;
    if (v.Has("master_port")) {
      auto port = common::ParseInt(v.Get("master_port", ""), 1, 65535);
      if (!port) return v.Bad("master_port", "an integer in [1, 65535]");
      o.master_port = static_cast<int>(*port);
    }
    if (v.Has("rdzv_endpoint")) RETURN_IF_ERROR(ApplyEndpoint(v, -1, o));
    auto rank = common::ParseInt(v.Get("node_rank", "0"), 0, nnodes_max - 1);
    if (!rank) {
      return v.Bad("node_rank", "an integer in [0, " + std::to_string(nnodes_max - 1) +
                                    "] (--nnodes is " + std::to_string(nnodes_max) + ")");
    }
    o.node_rank = static_cast<int>(*rank);
    return absl::OkStatus();
  }
  if (backend == "c10d") {
    if (!v.Has("rdzv_endpoint")) {
      return absl::InvalidArgumentError(v.Source("rdzv_backend") +
                                        " c10d needs --rdzv_endpoint HOST[:PORT]");
    }
    o.node_rank = -1;  // ranks come from the rendezvous, as torchrun's c10d gives them
    return ApplyEndpoint(v, kTorchC10dPort, o);
  }
  if (backend == "etcd" || backend == "etcd-v2") {
    // gangrun keeps its own state in etcd (the scheduler key and the job's record under
    // /gangrun/runs/<rdzv_id>/), not torchrun's etcd rendezvous keys: the store of record.
    const std::string endpoint = v.Get("rdzv_endpoint", "");
    if (endpoint.empty()) {
      return absl::InvalidArgumentError(v.Source("rdzv_backend") + " " + backend +
                                        " needs --rdzv_endpoint HOST:PORT (an etcd member)");
    }
    if (!v.Has("rdzv_id")) {
      return absl::InvalidArgumentError(v.Source("rdzv_backend") + " " + backend +
                                        " needs --rdzv_id: the job's keys in etcd are its id's");
    }
    o.store = "etcd://" + endpoint + o.store;  // + /PREFIX from --rdzv_conf etcd_prefix
    o.node_rank = -1;
    return absl::OkStatus();
  }

  return absl::InvalidArgumentError(
      v.Source("rdzv_backend") + " " + QuoteValue(backend) +
      " is not supported: gangrun's scheduler is the rendezvous; use static, c10d or etcd");
}

absl::Status ApplyTorchrunOptions(const Values& v, const EnvLookup& env,
                                  const AcceleratorCounts& counts, ParseResult& result) {
  Options& o = result.options;
  ASSIGN_OR_RETURN(auto nnodes, ParseNnodes(v));
  ASSIGN_OR_RETURN(int nproc, ParseNproc(v, counts));
  if (int64_t{nnodes.second} * nproc > kMaxWorkers) {
    return absl::InvalidArgumentError("--nnodes x --nproc_per_node is above " +
                                      std::to_string(kMaxWorkers) + " workers");
  }
  o.local_worker_num = nproc;
  o.worker_num = nnodes.second * nproc;
  o.worker_num_min = nnodes.first < nnodes.second ? nnodes.first * nproc : 0;
  o.cluster_time_out = 600;  // torchrun's join_timeout
  RETURN_IF_ERROR(ApplyCommon(v, env, o, result.warnings));
  o.run_id = v.Get("rdzv_id", "none");
  RETURN_IF_ERROR(ApplyRendezvous(v, nnodes.second, o));
  if (o.elastic()) o.node_rank = -1;  // an elastic job's node ranks follow who joined
  RETURN_IF_ERROR(ApplyTask(v, env, o));
  RETURN_IF_ERROR(ApplyConsole(v, o));
  // What torchrun exports for its workers.
  if (nproc > 1 && !env("OMP_NUM_THREADS")) {
    o.worker_env.emplace_back("OMP_NUM_THREADS", "1");
    result.warnings.push_back(
        "setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to "
        "avoid your system being overloaded, please further tune the variable for optimal "
        "performance in your application as needed");
  }
  for (const char* name : {"NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING"}) {
    if (!env(name)) o.worker_env.emplace_back(name, "1");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ParseResult> ParseTorchrunCommandLine(const std::vector<std::string>& args,
                                                     const EnvLookup& env) {
  return ParseTorchrunCommandLine(args, env, CountAccelerators(env));
}

absl::StatusOr<ParseResult> ParseTorchrunCommandLine(const std::vector<std::string>& args,
                                                     const EnvLookup& env,
                                                     const AcceleratorCounts& counts) {
  CLI::App app{"torchrun (gangrun): launch ranked PyTorch workers across hosts", "torchrun"};
  app.prefix_command();  // everything from the training script on belongs to the script
  app.set_help_flag("-h,--help", "print this help and exit");
  std::map<std::string, std::string> texts;
  std::map<std::string, CLI::Option*> given;
  for (const auto& option : TorchOptions()) {
    given[option.dest] = option.flag ? app.add_flag(option.names, option.help)
                                     : app.add_option(option.names, texts[option.dest], option.help)
                                           ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                                           ->type_name("VALUE");
  }
  for (const auto& def : GangrunOptionRows()) {
    if (given.count(def.name)) continue;  // torchrun's --max_restarts
    given[def.name] = app.add_option(Spellings(def.name), texts[def.name], def.help)
                          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                          ->type_name("VALUE");
  }
  // CLI11 2.1's first line is "Usage: torchrun [OPTIONS]": its label completes it.
  app.get_formatter()->label("OPTIONS", "options] <training_script> [training_script_args...");
  app.footer(
      "torchrun's options also come from PET_<OPTION> (e.g. PET_NPROC_PER_NODE=4), gangrun's "
      "own from GANGRUN_<OPTION>.");
  ASSIGN_OR_RETURN(const std::vector<std::string> expanded,
                   ExpandAbbreviations(args, AllSpellings()));
  ASSIGN_OR_RETURN(std::string help, RunParser(app, expanded));
  ParseResult result;
  if (!help.empty()) {
    result.help = std::move(help);
    return result;
  }
  result.options.personality = Personality::kTorchrun;
  ASSIGN_OR_RETURN(const Values torch, ReadTorchValues(given, texts, env, result));
  RETURN_IF_ERROR(ApplyTorchrunOptions(torch, env, counts, result));
  for (const auto& def : GangrunOptionRows()) {
    if (IsTorchOption(def.name)) continue;
    std::optional<std::string> flag_value;
    if (given.at(def.name)->count() > 0) flag_value = texts[def.name];
    RETURN_IF_ERROR(ApplyOption(def, flag_value, GangrunVariable(def.name), env, result));
  }
  // --rdzv_id wins over gangrun's --run_id (--standalone makes up its own id, as torchrun's).
  if (torch.Has("rdzv_id") && !torch.Has("standalone")) {
    result.options.run_id = torch.Get("rdzv_id", "");
  }
  RETURN_IF_ERROR(TakeTask(app.remaining(), "torchrun", result.options));
  return result;
}

}  // namespace gangrun::launcher
