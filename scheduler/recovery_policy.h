#pragma once
// What a failed generation means for the next one, beyond the restart budget: a worker exit
// code that says "do not retry" (--no_restart_exit_codes, as NVRx's 93), a node that keeps
// being the root cause (--exclude_after), restarts that make no progress
// (--max_no_progress_restarts) and the same failure again and again (--max_same_failures: a
// deterministic failure, such as an exception at the same line, is not worth a restart), and,
// asked first, the signatures of --restart_rules and of failing hardware
// (scheduler/restart_rules.h: stop, restart, or exclude the node without using the budget). Pure:
// no clock, no nodes; the Scheduler asks it once per failed generation and tells it every step a
// rank reports.
//
// Worked example, --exclude_after 2 --max_no_progress_restarts 2: generation 1 fails on node 7
// after rank 0 reached step 10 (progress: nothing came before; node 7's streak 1); generation 2
// fails on node 7 at step 4 (no step beyond 10; streak 2: exclude node 7; no progress 1);
// generation 3 fails on node 3 at step 10 (not beyond 10: no progress 2 -> stop).

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gangrun/v1/progress.pb.h"
#include "gangrun/v1/session.pb.h"
#include "scheduler/restart_rules.h"

namespace gangrun::scheduler {

class RecoveryPolicy {
 public:
  struct Options {
    std::set<int> no_restart_exit_codes;
    int exclude_after = 0;             // 0 = never
    int max_no_progress_restarts = 0;  // 0 = never
    // Stop when this many failed generations in a row failed the same way (FailureFingerprint)
    // and made no progress; 0 = never. 3 by default: one repeat may be chance (a flaky read,
    // a preempted host twice), a third identical failure with no step gained is the code's.
    // A hang at the same place (HangFingerprint) stops at its second time (when this is not
    // 0): each costs a whole --hang_timeout, and the same frame twice is not chance.
    int max_same_failures = 3;
    // --restart_rules and gangrun's hardware signatures (scheduler/restart_rules.h), asked
    // first; null = none at all.
    std::shared_ptr<const RestartRules> rules = std::make_shared<RestartRules>();
  };
  explicit RecoveryPolicy(Options options) : options_(std::move(options)) {}

  // A worker ended so: true if its code is one the job must not restart after.
  bool NoRestart(const v1::ProcessExit& exit) const;

  // A rank of the running generation reported `step` (-1: none numbered yet).
  void OnStep(int64_t step);

  struct Verdict {
    bool exclude = false;     // the root-cause node goes (--exclude_after)
    std::string exclude_why;  // "was the root cause of 2 failed generations in a row"
    bool stop = false;        // no more restarts, whatever budget is left
    std::string stop_why;
    // A rule put the failure on the node's hardware: the restart after it does not count
    // against --max_restarts.
    bool forgiven = false;
    std::string rule;  // the rule that decided ("" = none): what it is and the line it matched
  };
  // The running generation failed; `root_node` is the node it failed on (0: none, e.g. a lost
  // node), `fingerprint` what its root cause looked like (FailureFingerprint; "" = nothing to
  // compare), `text` its lines for the rules (FailureText). Call once per failed generation,
  // before the next one starts.
  Verdict OnGenerationFailed(int root_node, const std::string& fingerprint = "",
                             const std::vector<std::string>& text = {});
  // The node is gone (excluded or lost): its streak with it.
  void Forget(int node);

  // The highest step of every generation so far (-1: none).
  int64_t best_step() const { return std::max(best_step_, generation_best_); }
  int no_progress_streak() const { return no_progress_; }

 private:
  Options options_;
  int streak_node_ = 0;           // the node the last failed generations failed on
  int streak_ = 0;                // how many in a row
  int64_t best_step_ = -1;        // the highest step of every earlier generation
  int64_t generation_best_ = -1;  // the running one's
  int no_progress_ = 0;           // failed generations in a row without progress
  std::string last_fingerprint_;  // the last failed generation's
  int same_ = 0;                  // failed generations in a row with it, without progress
};

// What a worker's failure looked like, the same for the same failure in another generation
// (whichever rank, pid or time): the recorded exception's type and innermost frame
// ("ValueError at train.py:88 in step"), else the exit (code or signal) and the last line of
// its log with its numbers masked ("exit code 3; last line: loss is nan at step #").
std::string FailureFingerprint(const v1::RootCause& cause);
// Where a hang was, the same for the same hang in another generation: "a hang at <the odd
// one out's frame>[ in <its collective>]", else the frame every rank was at; "" when the
// stacks say nothing.
std::string HangFingerprint(const std::vector<v1::StackGroup>& groups);

}  // namespace gangrun::scheduler
