#include "launcher/option_codecs.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/exit_status.h"
#include "common/numbers.h"
#include "launcher/numa.h"
#include "node/progress.h"

namespace gangrun::launcher::codec {
namespace {

// msrun's literals True/False, and also true/false/1/0.
std::optional<bool> ParseBool(const std::string& v) {
  if (v == "True" || v == "true" || v == "1") return true;
  if (v == "False" || v == "false" || v == "0") return false;
  return std::nullopt;
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

}  // namespace

std::string Number(double value) {
  char buffer[32];
  for (int digits : {6, 15, 17}) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
    double back;
    if (absl::SimpleAtod(buffer, &back) && back == value) break;
  }
  return buffer;
}

Codec Int(int Options::*field, int min, int max, bool negative_means_forever) {
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

Codec SecondsOption(double Options::*field, double min, double max, const char* what) {
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

Codec NumaBindingMode() {
  return {[](Options& o, const std::string& v) {
            if (!v.empty() && !ParseNumaMode(v).ok()) {
              return absl::InvalidArgumentError("node, socket, exclusive or core-complex");
            }
            o.numa_binding = v;
            return absl::OkStatus();
          },
          [](const Options& o) { return o.numa_binding; }};
}

Codec BindNumaConfig() {
  return {[](Options& o, const std::string& v) {
            auto bind = ParseBindNuma(v);
            if (!bind.ok()) return bind.status();
            o.bind_numa = std::move(*bind);
            return absl::OkStatus();
          },
          [](const Options& o) { return o.bind_numa.text.empty() ? "False" : o.bind_numa.text; }};
}

Codec AccessString(std::string rpc::Access::*field) {
  return {[field](Options& o, const std::string& v) {
            o.access.*field = v;
            return absl::OkStatus();
          },
          [field](const Options& o) { return o.access.*field; }};
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

std::string Range(int min, int max) {
  return " [" + std::to_string(min) + ".." + std::to_string(max) + "]";
}
std::string Range(double min, double max) {
  return " [" + Number(min) + ".." + Number(max) + " s]";
}

Codec WorkerNum() { return {SetWorkerNum, FormatWorkerNum}; }
Codec BindCoreDict() { return {SetBindCore, FormatBindCore}; }
Codec TailRanks() {
  return {SetTail, [](const Options& o) { return absl::StrJoin(o.tail_worker_log, ","); }};
}
Codec Backoff() {
  return {SetBackoff, [](const Options& o) {
            return Number(o.restart_backoff_initial) + "," + Number(o.restart_backoff_cap);
          }};
}
Codec KvMaxBytes() {
  return {SetKvMaxBytes, [](const Options& o) { return std::to_string(o.kv_max_bytes); }};
}
Codec HangTimeout() {
  return {SetHangTimeout, [](const Options& o) {
            return o.hang_timeout_auto ? std::string("auto") : Number(o.hang_timeout);
          }};
}
Codec SectionTimeouts() { return {SetSectionTimeouts, FormatSectionTimeouts}; }

bool Forwardable(int sig) {
  switch (sig) {
    case SIGUSR1:
    case SIGUSR2:
    case SIGQUIT:
    case SIGALRM:
    case SIGWINCH:
    case SIGURG:
    case SIGCONT:
      return true;
    default:
      return false;
  }
}

Codec ExitCodes(std::set<int> Options::*field) {
  return {[field](Options& o, const std::string& v) -> absl::Status {
            std::set<int> codes;
            for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipEmpty())) {
              auto code = common::ParseInt(absl::StripAsciiWhitespace(part), 1, 255);
              if (!code) {
                return absl::InvalidArgumentError(
                    "a comma-separated list of exit codes in [1, 255], or '' for none");
              }
              codes.insert(static_cast<int>(*code));
            }
            o.*field = std::move(codes);
            return absl::OkStatus();
          },
          [field](const Options& o) { return absl::StrJoin(o.*field, ","); }};
}

namespace {

std::optional<int> ParseForwardable(absl::string_view text) {
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  auto sig = common::ParseSignal(std::string_view(trimmed.data(), trimmed.size()));
  return sig && Forwardable(*sig) ? sig : std::nullopt;
}

constexpr char kForwardableNames[] =
    "SIGUSR1, SIGUSR2, SIGQUIT, SIGALRM, SIGWINCH, SIGURG, SIGCONT";

}  // namespace

absl::Status SetSignalsToHandle(Options& o, const std::string& value) {
  o.signals_to_forward.clear();
  for (absl::string_view item : absl::StrSplit(value, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item.empty()) continue;
    auto sig = common::ParseSignal(std::string_view(item.data(), item.size()));
    if (sig && (*sig == SIGTERM || *sig == SIGINT || *sig == SIGHUP)) continue;
    if (!sig || !Forwardable(*sig)) {
      return absl::InvalidArgumentError(std::string("signal names from SIGTERM, SIGINT, SIGHUP, ") +
                                        kForwardableNames);
    }
    o.signals_to_forward.push_back(*sig);
  }
  return absl::OkStatus();
}

Codec Signals(std::vector<int> Options::*field) {
  return {[field](Options& o, const std::string& v) -> absl::Status {
            std::vector<int> signals;
            for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipEmpty())) {
              auto sig = ParseForwardable(part);
              if (!sig) {
                return absl::InvalidArgumentError(
                    std::string("a comma-separated list of signals, each one of ") +
                    kForwardableNames + ", or '' for none");
              }
              if (std::find(signals.begin(), signals.end(), *sig) == signals.end()) {
                signals.push_back(*sig);
              }
            }
            o.*field = std::move(signals);
            return absl::OkStatus();
          },
          [field](const Options& o) {
            std::vector<std::string> names;
            for (int sig : o.*field) names.push_back(common::SignalName(sig));
            return absl::StrJoin(names, ",");
          }};
}

Codec TimeLimitSignal() {
  return {[](Options& o, const std::string& v) -> absl::Status {
            if (v.empty()) {
              o.time_limit_signal = 0;
              o.time_limit_signal_before = 0;
              return absl::OkStatus();
            }
            std::vector<absl::string_view> parts = absl::StrSplit(v, absl::MaxSplits('@', 1));
            double before;
            std::optional<int> sig;
            if (parts.size() == 2) sig = ParseForwardable(parts[0]);
            if (!sig || !absl::SimpleAtod(parts[1], &before) || !std::isfinite(before) ||
                before <= 0 || before > kMaxTimeLimit) {
              return absl::InvalidArgumentError(std::string("SIG@SECONDS with SIG one of ") +
                                                kForwardableNames + " and SECONDS in (0, " +
                                                Number(kMaxTimeLimit) + "], or '' for none");
            }
            o.time_limit_signal = *sig;
            o.time_limit_signal_before = before;
            return absl::OkStatus();
          },
          [](const Options& o) {
            return o.time_limit_signal == 0 ? std::string()
                                            : common::SignalName(o.time_limit_signal) + "@" +
                                                  Number(o.time_limit_signal_before);
          }};
}

}  // namespace gangrun::launcher::codec
