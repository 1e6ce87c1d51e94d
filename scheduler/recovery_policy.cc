#include "scheduler/recovery_policy.h"

#include <algorithm>
#include <string_view>

namespace gangrun::scheduler {

namespace {
constexpr std::string_view kHangPrefix = "a hang at ";
constexpr int kSameHangs = 2;  // a hang at the same place twice (Options::max_same_failures)
}  // namespace

bool RecoveryPolicy::NoRestart(const v1::ProcessExit& exit) const {
  return exit.signal() <= 0 && options_.no_restart_exit_codes.count(exit.exit_code()) > 0;
}

void RecoveryPolicy::OnStep(int64_t step) { generation_best_ = std::max(generation_best_, step); }

RecoveryPolicy::Verdict RecoveryPolicy::OnGenerationFailed(int root_node,
                                                           const std::string& fingerprint,
                                                           const std::vector<std::string>& text) {
  Verdict verdict;
  std::optional<RestartRules::Match> match;
  if (options_.rules && !text.empty()) match = options_.rules->Find(text);
  if (match) verdict.rule = match->rule + " matched \"" + match->line + "\"";
  if (match && match->action == RestartRules::Action::kStop) {
    verdict.stop = true;
    verdict.stop_why = "the failure matched " + verdict.rule;
  }
  // The hardware's failure (its node leaves) or one a rule says is not the code's: no streak
  // of the same failure.
  const bool compare = !match || match->action == RestartRules::Action::kStop;
  if (match && match->action == RestartRules::Action::kExclude && root_node != 0) {
    verdict.exclude = true;
    verdict.exclude_why = "its failure matched " + verdict.rule;
    verdict.forgiven = true;
    Forget(root_node);
  }
  if (root_node != 0 && root_node == streak_node_) {
    ++streak_;
  } else {
    streak_node_ = root_node;
    streak_ = root_node != 0 ? 1 : 0;
  }
  if (!verdict.exclude && options_.exclude_after > 0 && root_node != 0 &&
      streak_ >= options_.exclude_after) {
    verdict.exclude = true;
    verdict.exclude_why = "it was the root cause of " + std::to_string(streak_) +
                          " failed generations in a row (--exclude_after " +
                          std::to_string(options_.exclude_after) + ")";
    streak_node_ = 0;
    streak_ = 0;
  }
  const bool progressed = generation_best_ > best_step_;
  best_step_ = std::max(best_step_, generation_best_);
  generation_best_ = -1;
  no_progress_ = progressed ? 0 : no_progress_ + 1;
  if (!verdict.stop && options_.max_no_progress_restarts > 0 &&
      no_progress_ >= options_.max_no_progress_restarts) {
    verdict.stop = true;
    verdict.stop_why =
        std::to_string(no_progress_) + " failed generation(s) in a row made no progress (" +
        (best_step_ >= 0 ? "no rank reported a step beyond " + std::to_string(best_step_)
                         : std::string("no rank reported a step")) +
        "; --max_no_progress_restarts " + std::to_string(options_.max_no_progress_restarts) + ")";
  }
  const std::string compared = compare ? fingerprint : std::string();
  if (!compared.empty() && compared == last_fingerprint_ && !progressed) {
    ++same_;
  } else {
    same_ = compared.empty() ? 0 : 1;
  }
  last_fingerprint_ = compared;
  const int bound = fingerprint.rfind(kHangPrefix, 0) == 0
                        ? std::min(options_.max_same_failures, kSameHangs)
                        : options_.max_same_failures;
  if (!verdict.stop && bound > 0 && same_ >= bound) {
    verdict.stop = true;
    verdict.stop_why = "the same failure in " + std::to_string(same_) +
                       " generations in a row, with no progress: " + fingerprint +
                       " (deterministic; --max_same_failures " +
                       std::to_string(options_.max_same_failures) +
                       (bound < options_.max_same_failures ? ", a hang twice" : "") + ")";
    return verdict;
  }
  return verdict;
}

namespace {

// A log line with its digits masked ('#'), trimmed and cut at 120 characters: "step 12 loss
// nan" and "step 13 loss nan" are the same line.
std::string Masked(std::string line) {
  for (char& c : line) {
    if (c >= '0' && c <= '9') c = '#';
  }
  const size_t begin = line.find_first_not_of(" \t\r");
  const size_t end = line.find_last_not_of(" \t\r");
  line = begin == std::string::npos ? "" : line.substr(begin, end - begin + 1);
  return line.size() > 120 ? line.substr(0, 120) : line;
}

// "File \"/w/train.py\", line 88, in step" -> "train.py:88 in step"; "" when it is not a frame.
std::string Frame(const std::string& line) {
  const size_t file = line.find("File \"");
  if (file == std::string::npos) return "";
  const size_t name_end = line.find('"', file + 6);
  if (name_end == std::string::npos) return "";
  std::string path = line.substr(file + 6, name_end - file - 6);
  path = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  std::string out = path;
  const size_t at = line.find("line ", name_end);
  if (at != std::string::npos) {
    size_t digits = at + 5;
    while (digits < line.size() && line[digits] >= '0' && line[digits] <= '9') ++digits;
    out += ":" + line.substr(at + 5, digits - at - 5);
  }
  const size_t in = line.find(", in ", name_end);
  if (in != std::string::npos) out += " in " + line.substr(in + 5);
  return out;
}

}  // namespace

std::string HangFingerprint(const std::vector<v1::StackGroup>& groups) {
  const v1::StackGroup* chosen = nullptr;
  for (const auto& group : groups) {
    if (group.where().empty()) continue;
    if (group.odd_one_out() && (chosen == nullptr || !chosen->odd_one_out() ||
                                group.ranks_size() < chosen->ranks_size())) {
      chosen = &group;
    } else if (chosen == nullptr) {
      chosen = &group;
    }
  }
  if (chosen == nullptr) return "";
  return std::string(kHangPrefix) + chosen->where() +
         (chosen->in_collective().empty() ? "" : " in " + chosen->in_collective());
}

std::string FailureFingerprint(const v1::RootCause& cause) {
  if (!cause.error().message().empty()) {
    const std::string& message = cause.error().message();
    std::string out = message.substr(0, message.find(':'));
    for (auto it = cause.error().traceback().rbegin(); it != cause.error().traceback().rend();
         ++it) {
      const std::string frame = Frame(*it);
      if (!frame.empty()) return out + " at " + frame;
    }
    return out;
  }
  std::string out = cause.exit().signal() != 0
                        ? "killed by signal " + std::to_string(cause.exit().signal())
                        : "exit code " + std::to_string(cause.exit().exit_code());
  for (auto it = cause.log_tail().rbegin(); it != cause.log_tail().rend(); ++it) {
    const std::string line = Masked(*it);
    if (!line.empty() && line.rfind("====", 0) != 0) return out + "; last line: " + line;
  }
  return out;
}

void RecoveryPolicy::Forget(int node) {
  if (node == streak_node_) {
    streak_node_ = 0;
    streak_ = 0;
  }
}

}  // namespace gangrun::scheduler
