#include "scheduler/recovery_policy.h"

#include <algorithm>

namespace gangrun::scheduler {

bool RecoveryPolicy::NoRestart(const v1::ProcessExit& exit) const {
  return exit.signal() <= 0 && options_.no_restart_exit_codes.count(exit.exit_code()) > 0;
}

void RecoveryPolicy::OnStep(int64_t step) { generation_best_ = std::max(generation_best_, step); }

RecoveryPolicy::Verdict RecoveryPolicy::OnGenerationFailed(int root_node) {
  Verdict verdict;
  if (root_node != 0 && root_node == streak_node_) {
    ++streak_;
  } else {
    streak_node_ = root_node;
    streak_ = root_node != 0 ? 1 : 0;
  }
  if (options_.exclude_after > 0 && root_node != 0 && streak_ >= options_.exclude_after) {
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
  if (options_.max_no_progress_restarts > 0 && no_progress_ >= options_.max_no_progress_restarts) {
    verdict.stop = true;
    verdict.stop_why =
        std::to_string(no_progress_) + " failed generation(s) in a row made no progress (" +
        (best_step_ >= 0 ? "no rank reported a step beyond " + std::to_string(best_step_)
                         : std::string("no rank reported a step")) +
        "; --max_no_progress_restarts " + std::to_string(options_.max_no_progress_restarts) + ")";
  }
  return verdict;
}

void RecoveryPolicy::Forget(int node) {
  if (node == streak_node_) {
    streak_node_ = 0;
    streak_ = 0;
  }
}

}  // namespace gangrun::scheduler
