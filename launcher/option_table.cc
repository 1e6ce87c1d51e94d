#include "launcher/option_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/numbers.h"
#include "node/progress.h"

namespace gangrun::launcher {
namespace {

using Setter = std::function<absl::Status(Options&, const std::string&)>;
using Formatter = std::function<std::string(const Options&)>;

// How one option's value is read and written.
struct Codec {
  Setter set;
  Formatter format;
};

OptionRow Row(std::string name, std::string help, Codec codec, bool travels = true) {
  return {std::move(name), std::move(help), std::move(codec.set), std::move(codec.format), travels};
}

// The shortest text that reads back as exactly `value`.
std::string Number(double value) {
  char buffer[32];
  for (int digits : {6, 15, 17}) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
    double back;
    if (absl::SimpleAtod(buffer, &back) && back == value) break;
  }
  return buffer;
}

// An integer in [min, max]; with `negative_means_forever`, any negative value too
// (cluster_time_out's "wait forever").
Codec Int(int Options::*field, int min, int max, bool negative_means_forever = false) {
  return {[=](Options& o, const std::string& v) -> absl::Status {
            if (!common::ParseInt(v, INT_MIN, INT_MAX))
              return absl::InvalidArgumentError("integer");
            auto parsed = common::ParseInt(v, negative_means_forever ? INT_MIN : min, max);
            if (!parsed) {
              return absl::InvalidArgumentError("an integer in [" + std::to_string(min) + ", " +
                                                std::to_string(max) + "]");
            }
            o.*field = static_cast<int>(*parsed);
            return absl::OkStatus();
          },
          [=](const Options& o) { return std::to_string(o.*field); }};
}

Codec Seconds(double Options::*field, double min, double max,
              const char* what = "a number of seconds") {
  return {[=](Options& o, const std::string& v) -> absl::Status {
            double parsed;
            if (!absl::SimpleAtod(v, &parsed) || !std::isfinite(parsed) || parsed < min ||
                parsed > max) {
              return absl::InvalidArgumentError(std::string(what) + " in [" + Number(min) + ", " +
                                                Number(max) + "]");
            }
            o.*field = parsed;
            return absl::OkStatus();
          },
          [=](const Options& o) { return Number(o.*field); }};
}

Codec String(std::string Options::*field) {
  return {[field](Options& o, const std::string& v) {
            o.*field = v;
            return absl::OkStatus();
          },
          [field](const Options& o) { return o.*field; }};
}

Codec AccessString(std::string rpc::Access::*field) {
  return {[field](Options& o, const std::string& v) {
            o.access.*field = v;
            return absl::OkStatus();
          },
          [field](const Options& o) { return o.access.*field; }};
}

// msrun's literals True/False, and also true/false/1/0.
std::optional<bool> ParseBool(const std::string& v) {
  if (v == "True" || v == "true" || v == "1") return true;
  if (v == "False" || v == "false" || v == "0") return false;
  return std::nullopt;
}

Codec Bool(bool Options::*field) {
  return {[field](Options& o, const std::string& v) -> absl::Status {
            auto parsed = ParseBool(v);
            if (!parsed) return absl::InvalidArgumentError("True or False");
            o.*field = *parsed;
            return absl::OkStatus();
          },
          [field](const Options& o) { return std::string(o.*field ? "True" : "False"); }};
}

bool IsDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "device<N>" or "scheduler", as msrun's dict form allows.
bool IsBindCoreKey(const std::string& key) {
  return key == "scheduler" || (absl::StartsWith(key, "device") && IsDigits(key.substr(6)));
}

// "A" or "A-B" with A <= B.
bool IsCpuRange(const std::string& text) {
  std::vector<absl::string_view> ends = absl::StrSplit(text, '-');
  if (ends.size() == 1) return IsDigits(ends[0]);
  int first, last;
  return ends.size() == 2 && IsDigits(ends[0]) && IsDigits(ends[1]) &&
         absl::SimpleAtoi(ends[0], &first) && absl::SimpleAtoi(ends[1], &last) && first <= last;
}

absl::Status SetBindCore(Options& o, const std::string& v) {
  std::string lower = v;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "true" || lower == "1") {
    o.bind_core = {BindCore::Mode::kAuto, {}};
    return absl::OkStatus();
  }
  if (lower == "false" || lower == "0") {
    o.bind_core = {BindCore::Mode::kOff, {}};
    return absl::OkStatus();
  }
  auto json = nlohmann::ordered_json::parse(v, nullptr, /*allow_exceptions=*/false);
  const char* expected =
      "True, False or a JSON dict such as '{\"device0\":[\"0-9\"],\"device1\":[\"10-19\"]}'";
  if (!json.is_object()) return absl::InvalidArgumentError(expected);
  BindCore bind{BindCore::Mode::kDict, {}};
  for (const auto& [key, value] : json.items()) {
    if (!IsBindCoreKey(key)) {
      return absl::InvalidArgumentError(std::string(expected) + " (bad key '" + key + "')");
    }
    if (!value.is_array()) {
      return absl::InvalidArgumentError(std::string(expected) + " (the value of '" + key +
                                        "' is not a list)");
    }
    std::vector<std::string> ranges;
    for (const auto& item : value) {
      std::string text = item.is_string() ? item.get<std::string>() : std::string();
      if (!IsCpuRange(text)) {
        return absl::InvalidArgumentError(std::string(expected) + " (bad CPU range " + item.dump() +
                                          " for '" + key + "')");
      }
      ranges.push_back(text);
    }
    bind.dict.emplace_back(key, std::move(ranges));
  }
  o.bind_core = std::move(bind);
  return absl::OkStatus();
}

std::string FormatBindCore(const Options& o) {
  switch (o.bind_core.mode) {
    case BindCore::Mode::kOff:
      return "False";
    case BindCore::Mode::kAuto:
      return "True";
    case BindCore::Mode::kDict:
      break;
  }
  nlohmann::ordered_json dict = nlohmann::ordered_json::object();
  for (const auto& [key, ranges] : o.bind_core.dict) dict[key] = ranges;
  return dict.dump();
}

// N, or MIN:MAX for an elastic job.
absl::Status SetWorkerNum(Options& o, const std::string& v) {
  const std::string expected =
      "an integer in [1, " + std::to_string(kMaxWorkers) + "], or MIN:MAX with 1 <= MIN <= MAX";
  std::vector<std::string> parts = absl::StrSplit(v, ':');
  int first = 0, second = 0;
  if (parts.size() == 1 && absl::SimpleAtoi(parts[0], &first) && first >= 1 &&
      first <= kMaxWorkers) {
    o.worker_num = first;
    o.worker_num_min = 0;
    return absl::OkStatus();
  }
  if (parts.size() == 2 && absl::SimpleAtoi(parts[0], &first) &&
      absl::SimpleAtoi(parts[1], &second) && first >= 1 && first <= second &&
      second <= kMaxWorkers) {
    o.worker_num_min = first;
    o.worker_num = second;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(expected);
}

std::string FormatWorkerNum(const Options& o) {
  return o.worker_num_min > 0
             ? std::to_string(o.worker_num_min) + ":" + std::to_string(o.worker_num)
             : std::to_string(o.worker_num);
}

absl::Status SetTail(Options& o, const std::string& v) {
  std::vector<int> ranks;
  for (absl::string_view part : absl::StrSplit(v, ',')) {
    auto rank = common::ParseInt(part, -1, kMaxWorkers - 1);
    if (!rank) return absl::InvalidArgumentError("a comma-separated list of ranks, or -1 for all");
    ranks.push_back(static_cast<int>(*rank));
  }
  o.tail_worker_log = std::move(ranks);
  return absl::OkStatus();
}

constexpr double kMaxBackoff = 86400;
constexpr double kMaxHangSeconds = 7 * 86400;

absl::Status SetBackoff(Options& o, const std::string& v) {
  std::vector<std::string> parts = absl::StrSplit(v, ',');
  double initial, cap;
  const std::string expected =
      "INITIAL[,CAP] in seconds with 0 <= INITIAL <= CAP <= " + Number(kMaxBackoff);
  if (parts.size() > 2 || !absl::SimpleAtod(parts[0], &initial) || !std::isfinite(initial) ||
      initial < 0 || initial > kMaxBackoff) {
    return absl::InvalidArgumentError(expected);
  }
  cap = initial;
  if (parts.size() == 2 && (!absl::SimpleAtod(parts[1], &cap) || !std::isfinite(cap) ||
                            cap < initial || cap > kMaxBackoff)) {
    return absl::InvalidArgumentError(expected);
  }
  o.restart_backoff_initial = initial;
  o.restart_backoff_cap = cap;
  return absl::OkStatus();
}

// Bytes, with an optional binary suffix: 268435456, 256MiB, 256M, 1GiB.
absl::Status SetKvMaxBytes(Options& o, const std::string& v) {
  constexpr int64_t kMin = int64_t{1} << 20, kMax = int64_t{1} << 40;
  const std::string expected = "a size in [1MiB, 1TiB] (bytes, or with K, M, G, T or KiB..TiB)";
  std::string digits = v;
  int64_t unit = 1;
  for (const auto& [suffix, size] :
       std::vector<std::pair<std::string, int64_t>>{{"KiB", int64_t{1} << 10},
                                                    {"MiB", int64_t{1} << 20},
                                                    {"GiB", int64_t{1} << 30},
                                                    {"TiB", int64_t{1} << 40},
                                                    {"K", int64_t{1} << 10},
                                                    {"M", int64_t{1} << 20},
                                                    {"G", int64_t{1} << 30},
                                                    {"T", int64_t{1} << 40}}) {
    if (absl::EndsWith(v, suffix)) {
      digits = v.substr(0, v.size() - suffix.size());
      unit = size;
      break;
    }
  }
  int64_t count;
  if (!absl::SimpleAtoi(digits, &count) || count < 0 || count > kMax / unit ||
      count * unit < kMin) {
    return absl::InvalidArgumentError(expected);
  }
  o.kv_max_bytes = count * unit;
  return absl::OkStatus();
}

// --hang_timeout: seconds, or "auto" (learned per rank).
absl::Status SetHangTimeout(Options& o, const std::string& v) {
  if (v == "auto") {
    o.hang_timeout = 0;
    o.hang_timeout_auto = true;
    return absl::OkStatus();
  }
  double seconds;
  if (!absl::SimpleAtod(v, &seconds) || !std::isfinite(seconds) || seconds < 0 ||
      seconds > kMaxHangSeconds) {
    return absl::InvalidArgumentError("a number of seconds in [0, " + Number(kMaxHangSeconds) +
                                      "], or auto");
  }
  o.hang_timeout = seconds;
  o.hang_timeout_auto = false;
  return absl::OkStatus();
}

// --section_timeout NAME=S[,NAME=S...]; "" = none.
absl::Status SetSectionTimeouts(Options& o, const std::string& v) {
  const std::string expected =
      "NAME=SECONDS[,NAME=SECONDS...] with names of 1 to 64 letters, digits or _ - . : / and "
      "seconds in (0, " +
      Number(kMaxHangSeconds) + "]";
  std::map<std::string, double> sections;
  for (absl::string_view item : absl::StrSplit(v, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> parts = absl::StrSplit(item, absl::MaxSplits('=', 1));
    double seconds;
    if (parts.size() != 2 || !node::IsSectionName(parts[0]) ||
        !absl::SimpleAtod(parts[1], &seconds) || !std::isfinite(seconds) || seconds <= 0 ||
        seconds > kMaxHangSeconds) {
      return absl::InvalidArgumentError(expected);
    }
    sections[std::string(parts[0])] = seconds;
  }
  if (sections.empty() && !v.empty()) return absl::InvalidArgumentError(expected);
  o.section_timeouts = std::move(sections);
  return absl::OkStatus();
}

std::string FormatSectionTimeouts(const Options& o) {
  std::vector<std::string> items;
  for (const auto& [name, seconds] : o.section_timeouts)
    items.push_back(name + "=" + Number(seconds));
  return absl::StrJoin(items, ",");
}

std::string Range(int min, int max) {
  return " [" + std::to_string(min) + ".." + std::to_string(max) + "]";
}
std::string Range(double min, double max) {
  return " [" + Number(min) + ".." + Number(max) + " s]";
}

std::vector<OptionRow> MakeMsrunRows() {
  constexpr int kMaxRank = kMaxWorkers - 1;
  constexpr int kYear = 365 * 24 * 3600;
  return {
      Row("worker_num",
          "total number of workers in the job, or MIN:MAX for an elastic job (default 8)" +
              Range(1, kMaxWorkers),
          {SetWorkerNum, FormatWorkerNum}),
      Row("local_worker_num", "workers on this host (default 8)" + Range(1, kMaxLocalWorkers),
          Int(&Options::local_worker_num, 1, kMaxLocalWorkers)),
      Row("master_addr", "scheduler address: IPv4, IPv6 or host name (default 127.0.0.1)",
          String(&Options::master_addr)),
      Row("master_port", "scheduler port (default 8118)" + Range(1, 65535),
          Int(&Options::master_port, 1, 65535)),
      Row("node_rank",
          "rank of this node, -1 = assigned at rendezvous (default -1)" + Range(-1, kMaxRank),
          Int(&Options::node_rank, -1, kMaxRank)),
      Row("log_dir", "directory for worker logs (default: current directory)",
          String(&Options::log_dir)),
      Row("join", "wait for the job and return its outcome (gangrun: True, msrun: False)",
          Bool(&Options::join)),
      Row("cluster_time_out",
          "seconds to wait for the cluster to form, <0 = forever (default 600)" + Range(-1, kYear),
          Int(&Options::cluster_time_out, 0, kYear, /*negative_means_forever=*/true)),
      Row("bind_core", "pin workers to CPUs: False, True or a JSON dict (default False)",
          {SetBindCore, FormatBindCore}),
      Row("sim_level",
          "simulated compilation level, exported as MS_SIMULATION_LEVEL (default -1)" +
              Range(-1, 3),
          Int(&Options::sim_level, -1, 3)),
      Row("sim_rank_id", "rank of the single simulated process (default -1)" + Range(-1, kMaxRank),
          Int(&Options::sim_rank_id, -1, kMaxRank)),
      Row("rank_table_file", "rank table file, exported as RANK_TABLE_FILE",
          String(&Options::rank_table_file)),
      Row("worker_log_name", "worker log name prefix; {ip} and {hostname} are substituted",
          String(&Options::worker_log_name)),
      Row("tail_worker_log", "ranks whose logs are shown on the console, -1 = all (default -1)",
          {SetTail, [](const Options& o) { return absl::StrJoin(o.tail_worker_log, ","); }}),
  };
}

std::vector<OptionRow> MakeGangrunRows() {
  std::vector<OptionRow> rows = {
      Row("max_restarts", "restarts allowed after failures (default 0)" + Range(0, 1000000),
          Int(&Options::max_restarts, 0, 1000000)),
      Row("restart_backoff",
          "restart backoff INITIAL[,CAP] in seconds (default 1,30)" + Range(0.0, kMaxBackoff),
          {SetBackoff,
           [](const Options& o) {
             return Number(o.restart_backoff_initial) + "," + Number(o.restart_backoff_cap);
           }}),
      Row("heartbeat_interval", "seconds between node heartbeats (default 1)" + Range(0.01, 60.0),
          Seconds(&Options::heartbeat_interval, 0.01, 60)),
      Row("node_timeout",
          "how long a node or the scheduler may be silent (cut off, paused) at no cost, seconds "
          "(default 5)" +
              Range(0.1, 86400.0),
          Seconds(&Options::node_timeout, 0.1, 86400)),
      Row("grace_period",
          "seconds between SIGTERM and SIGKILL when stopping (default 30)" + Range(0.0, 86400.0),
          Seconds(&Options::grace_period, 0, 86400)),
      Row("last_call",
          "elastic jobs: seconds to wait for late joiners once MIN workers joined (default 1)" +
              Range(0.0, 3600.0),
          Seconds(&Options::last_call, 0, 3600)),
      Row("kv_max_bytes",
          "total size of the job's key-value store (default 256MiB) [1MiB..1TiB; K/M/G/T "
          "suffixes]",
          {SetKvMaxBytes, [](const Options& o) { return std::to_string(o.kv_max_bytes); }}),
      Row("kv_max_waits",
          "gets and barrier arrivals that may wait in the key-value store at once (default "
          "65536)" +
              Range(16, 1 << 20),
          Int(&Options::kv_max_waits, 16, 1 << 20)),
      Row("hang_timeout",
          "a rank that has reported progress (GANGRUN_PROGRESS) and then reports nothing for this "
          "many seconds is hung; 'auto' learns the bound per rank (default 0: off)" +
              Range(0.0, kMaxHangSeconds),
          {SetHangTimeout,
           [](const Options& o) {
             return o.hang_timeout_auto ? std::string("auto") : Number(o.hang_timeout);
           }}),
      Row("hang_timeout_initial",
          "seconds from a rank's start to its first progress report (default 0: off)" +
              Range(0.0, kMaxHangSeconds),
          Seconds(&Options::hang_timeout_initial, 0, kMaxHangSeconds)),
      Row("section_timeout",
          "NAME=S[,NAME=S...]: inside the named section only its bound applies ('' = none)",
          {SetSectionTimeouts, FormatSectionTimeouts}),
      Row("stack_timeout",
          "seconds to capture every rank's stack when the job hangs (default 10)" +
              Range(0.1, 600.0),
          Seconds(&Options::stack_timeout, 0.1, 600)),
      Row("straggler_factor",
          "a rank slower per step than this multiple of the job's median is a straggler "
          "(default 1.5) [1..1000]",
          Seconds(&Options::straggler_factor, 1.0, 1000, "a factor")),
      Row("run_id", "job id, exported as TORCHELASTIC_RUN_ID/GANGRUN_RUN_ID",
          String(&Options::run_id)),
      Row("dry_run", "print the rank/command/environment plan and exit", Bool(&Options::dry_run),
          /*travels=*/false),
      Row("log_prefix",
          "console prefix of worker lines; {host} {rank} {local_rank} (default "
          "'[{host}:{rank}] ')",
          String(&Options::log_prefix)),
      Row("metrics_port",
          "the scheduler serves Prometheus metrics on http://0.0.0.0:PORT/metrics (default -1: "
          "off, 0: any free port)" +
              Range(-1, 65535),
          Int(&Options::metrics_port, -1, 65535)),
      Row("event_log", "the scheduler appends a JSON line per job event to this file",
          String(&Options::event_log)),
      Row("health_port",
          "serve the gRPC health service on 0.0.0.0:PORT: '' while alive, 'gangrun.v1.Node' "
          "once this node's workers run (default -1: off)" +
              Range(-1, 65535),
          Int(&Options::health_port, -1, 65535)),
  };
  // The access options come from their one list (rpc::AccessOptions); the token itself never
  // travels in a spec (its file does).
  for (const rpc::AccessOption& option : rpc::AccessOptions()) {
    rows.push_back(Row(option.name, option.help, AccessString(option.field),
                       /*travels=*/std::string(option.name) != "token"));
  }
  return rows;
}

}  // namespace

const std::vector<OptionRow>& MsrunOptionRows() {
  static const std::vector<OptionRow> rows = MakeMsrunRows();
  return rows;
}

const std::vector<OptionRow>& GangrunOptionRows() {
  static const std::vector<OptionRow> rows = MakeGangrunRows();
  return rows;
}

const std::vector<OptionRow>& OptionRows() {
  static const std::vector<OptionRow> rows = [] {
    std::vector<OptionRow> all = MsrunOptionRows();
    for (const auto& row : GangrunOptionRows()) all.push_back(row);
    return all;
  }();
  return rows;
}

const OptionRow* FindOptionRow(const std::string& name) {
  for (const auto& row : OptionRows()) {
    if (row.name == name) return &row;
  }
  return nullptr;
}

}  // namespace gangrun::launcher
