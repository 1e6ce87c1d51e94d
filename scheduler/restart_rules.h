#pragma once
// What a failed generation's root cause says about the next one, by signature (README
// "Failures and recovery"): a site's rules (--restart_rules FILE), then gangrun's own signatures
// of failing hardware. The first rule whose pattern matches a line of the failure's text
// (FailureText: how the rank ended, its recorded exception and the last lines of its log)
// decides:
//
//   restart   not a deterministic failure, whatever --max_same_failures says (a flaky
//             network, a preempted filesystem); the budget still counts it
//   stop      not worth a restart: the job ends now with the rank's exit (as
//             --no_restart_exit_codes)
//   exclude   the node's hardware: it leaves the job (exit 6) and a spare takes its place; the
//             restart does not count against --max_restarts
//
// The file: one rule per line, `ACTION PATTERN` (PATTERN is an RE2 regular expression, the rest
// of the line; RE2 runs in time linear in its input), '#' starts a comment line, blank lines
// are skipped. Built in, after the file's (exclude): uncorrectable ECC errors, a GPU that fell
// off the bus, NVIDIA's Xid reports. Pure: parsed once, asked once per failed generation.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gangrun/v1/session.pb.h"

namespace re2 {
class RE2;
}

namespace gangrun::scheduler {

class RestartRules {
 public:
  enum class Action { kRestart, kStop, kExclude };
  // Bounds: a rules file of at most kMaxFileBytes and kMaxRules rules; each line of a
  // failure's text is matched on its first kMaxLineBytes.
  static constexpr size_t kMaxFileBytes = 64 * 1024;
  static constexpr size_t kMaxRules = 256;
  static constexpr size_t kMaxLineBytes = 1024;

  // gangrun's own signatures only.
  RestartRules();
  ~RestartRules();
  RestartRules(RestartRules&&) noexcept;
  RestartRules& operator=(RestartRules&&) noexcept;
  // The rules of `text` (as read from `source`, named in errors) before the built-in ones; or
  // one line naming the first line that is not a rule.
  static absl::StatusOr<RestartRules> Parse(std::string_view text, const std::string& source);
  // The same, from the file at `path` ("" = the built-in rules only).
  static absl::StatusOr<RestartRules> Load(const std::string& path);

  struct Match {
    Action action;
    std::string rule;  // "rule 3 of rules.txt (exclude /ECC error/)" or "gangrun's signature ..."
    std::string line;  // the line it matched (cut at kMaxLineBytes)
  };
  // The first rule that a line of `text` matches.
  std::optional<Match> Find(const std::vector<std::string>& text) const;
  size_t size() const { return rules_.size(); }

  static const char* Name(Action action);

 private:
  struct Rule {
    Action action;
    std::string pattern;
    std::string where;  // "rule 3 of FILE" or "gangrun's signature"
    std::unique_ptr<re2::RE2> regex;
  };
  absl::Status Add(Action action, const std::string& pattern, std::string where);
  std::vector<Rule> rules_;
};

// The lines a rule is matched against: how the rank ended ("exited with code 3", "killed by
// signal 7 (SIGBUS)"), its recorded exception's message and traceback, its log's last lines, and
// what its host's kernel logged since the generation started (node/kernel_log.h), and the
// processes outside the job holding its host's devices (node/device_holders.h).
std::vector<std::string> FailureText(const v1::RootCause& cause);

}  // namespace gangrun::scheduler
