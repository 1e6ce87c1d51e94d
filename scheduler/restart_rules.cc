#include "scheduler/restart_rules.h"

#include <fcntl.h>
#include <re2/re2.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "proto/conversions.h"

namespace gangrun::scheduler {

namespace {

// Failing hardware, as the ranks' own output says it (CUDA's and the NVIDIA driver's words).
// Deliberately few: a false match takes a healthy node out of the job; a site adds its own.
constexpr const char* kHardwareSignatures[] = {
    R"((?i)uncorrectable ECC error)",
    R"((?i)GPU has fallen off the bus)",
    R"(NVRM: Xid \(PCI:)",
};

}  // namespace

const char* RestartRules::Name(Action action) {
  switch (action) {
    case Action::kRestart:
      return "restart";
    case Action::kStop:
      return "stop";
    case Action::kExclude:
      return "exclude";
  }
  return "?";
}

RestartRules::RestartRules() {
  for (const char* pattern : kHardwareSignatures) {
    absl::Status added = Add(Action::kExclude, pattern, "gangrun's hardware signature");
    (void)added;  // constant patterns, tested to compile (RestartRulesTest)
  }
}

RestartRules::~RestartRules() = default;
RestartRules::RestartRules(RestartRules&&) noexcept = default;
RestartRules& RestartRules::operator=(RestartRules&&) noexcept = default;

absl::Status RestartRules::Add(Action action, const std::string& pattern, std::string where) {
  RE2::Options options;
  options.set_log_errors(false);
  auto regex = std::make_unique<RE2>(pattern, options);
  if (!regex->ok()) return absl::InvalidArgumentError(regex->error());
  rules_.push_back({action, pattern, std::move(where), std::move(regex)});
  return absl::OkStatus();
}

absl::StatusOr<RestartRules> RestartRules::Parse(std::string_view text, const std::string& source) {
  if (text.size() > kMaxFileBytes) {
    return absl::InvalidArgumentError("--restart_rules " + source + " is larger than " +
                                      std::to_string(kMaxFileBytes) + " bytes");
  }
  RestartRules parsed;
  std::vector<Rule> builtin = std::move(parsed.rules_);
  parsed.rules_.clear();
  int number = 0, line_number = 0;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    const auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError("--restart_rules " + source + " line " +
                                        std::to_string(line_number) + ": " + why +
                                        " (a rule is: restart|stop|exclude PATTERN)");
    };
    const size_t space = line.find_first_of(" \t");
    const std::string action(line.substr(0, space));
    const std::string pattern(space == absl::string_view::npos
                                  ? absl::string_view()
                                  : absl::StripAsciiWhitespace(line.substr(space)));
    std::optional<Action> chosen;
    for (Action candidate : {Action::kRestart, Action::kStop, Action::kExclude}) {
      if (action == Name(candidate)) chosen = candidate;
    }
    if (!chosen) return bad("'" + action.substr(0, 40) + "' is not an action");
    if (pattern.empty()) return bad("no pattern");
    if (++number > static_cast<int>(kMaxRules)) {
      return bad("more than " + std::to_string(kMaxRules) + " rules");
    }
    absl::Status added =
        parsed.Add(*chosen, pattern, "rule " + std::to_string(number) + " of " + source);
    if (!added.ok()) return bad("the pattern does not compile: " + std::string(added.message()));
  }
  for (Rule& rule : builtin) parsed.rules_.push_back(std::move(rule));
  return parsed;
}

absl::StatusOr<RestartRules> RestartRules::Load(const std::string& path) {
  if (path.empty()) return RestartRules();
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InvalidArgumentError("--restart_rules " + path + ": " + std::strerror(errno));
  }
  auto text = common::ReadDescriptor(fd, kMaxFileBytes, "--restart_rules " + path);
  if (!text.ok()) return text.status();
  return Parse(*text, path);
}

std::optional<RestartRules::Match> RestartRules::Find(const std::vector<std::string>& text) const {
  for (const Rule& rule : rules_) {
    for (const std::string& line : text) {
      const std::string_view cut = std::string_view(line).substr(0, kMaxLineBytes);
      if (RE2::PartialMatch(cut, *rule.regex)) {
        return Match{rule.action,
                     rule.where + " (" + Name(rule.action) + " /" + rule.pattern + "/)",
                     std::string(cut)};
      }
    }
  }
  return std::nullopt;
}

std::vector<std::string> FailureText(const v1::RootCause& cause) {
  std::vector<std::string> text = {proto::FromProto(cause.exit()).ToString()};
  if (!cause.error().message().empty()) text.push_back(cause.error().message());
  for (const auto& frame : cause.error().traceback()) text.push_back(frame);
  for (const auto& line : cause.log_tail()) text.push_back(line);
  for (const auto& line : cause.kernel_log()) text.push_back(line);
  for (const auto& line : cause.device_holders()) text.push_back(line);
  return text;
}

}  // namespace gangrun::scheduler
