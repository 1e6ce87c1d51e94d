#pragma once
// The job's restarts, a component of the scheduler (docs/ARCHITECTURE.md): the budget
// (--max_restarts, less the restarts forgiven as a node's hardware's), the backoff before each
// restart, the recovery policy (scheduler/recovery_policy.h: --no_restart_exit_codes,
// --restart_rules, --exclude_after, ...) and each failed generation's verdict, kept for
// `gangrun status` and the job's record. Owns that state; reaches the core through
// NodeDirectory (the generation, the event record) alone. On the scheduler's strand.
//
// Worked example, --max_restarts 2 and a health check: generation 1 fails on node 7
// (Judge: restart; Next: 1 s; "restart 1 of 2"); node 7's health check fails before
// generation 2 (ForgiveIfHardware(7): true, "restart 0 of 2; 1 more not counted: the
// hardware's"); generation 2 fails on node 3 (restart, "restart 1 of 2; 1 more ..."), ...

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>

#include "common/clock.h"
#include "gangrun/v1/session.pb.h"
#include "scheduler/core_records.h"
#include "scheduler/node_directory.h"
#include "scheduler/recovery_policy.h"

namespace gangrun::scheduler {

class Restarts {
 public:
  struct Options {
    int max_restarts = 0;
    // Restarts wait initial, twice that, ... up to cap: 1 s and 30 s wait 1, 2, 4, 8, 16, 30,
    // 30, ... seconds.
    common::Duration backoff_initial = std::chrono::seconds(1);
    common::Duration backoff_cap = std::chrono::seconds(30);
    RecoveryPolicy::Options policy;
    int forgiven = 0;  // restarts already forgiven (a job taken over or adopted)
  };
  Restarts(NodeDirectory& core, Options options);

  // What a failed generation leads to.
  struct Decision {
    enum class Action {
      kStop,         // the job ends; `note` says why ("not restarted: ...")
      kWaitForNode,  // a lost node's place is open: wait for a node to take it
      kExclude,      // the root-cause node goes (`note`: why), then restart
      kRestart,
    } action;
    std::string note;
  };
  // The generation failed: `failed` is why when a worker failed or hung (its root node,
  // cause, stacks), nullptr otherwise (a lost node); `node_lost` whether a lost node's place
  // is open. Asks --no_restart_exit_codes, the policy, then the budget; keeps and records the
  // verdict with the failure's fingerprint. Once per failed generation.
  Decision Judge(const StopReason* failed, bool node_lost);
  // A restart is scheduled: counts it and returns how long to wait before it.
  common::Duration Next();
  // A generation formed after a lost node's: it counts as a restart (no backoff).
  void CountReplacement() { ++used_; }
  // The job was adopted or taken over having used `used` restarts (Options::forgiven of them
  // forgiven, at most all).
  void Resume(int used) {
    used_ = used;
    forgiven_ = std::min(forgiven_, std::max(0, used_));
  }
  // A generation started: the last failure's node is no longer suspect.
  void OnGenerationStarted() { failed_root_node_ = 0; }
  // `node_id` failed its health check. True if the last failed generation failed on it: that
  // failure was its hardware's, and its restart is not counted (once).
  bool ForgiveIfHardware(int node_id);

  // The policy's inputs (scheduler/recovery_policy.h).
  bool NoRestart(const v1::ProcessExit& exit) const { return policy_.NoRestart(exit); }
  void OnStep(int64_t step) { policy_.OnStep(step); }
  void Forget(int node_id) { policy_.Forget(node_id); }

  // Restarts scheduled so far, forgiven ones included (the workers' restart count).
  int used() const { return used_; }
  int max() const { return options_.max_restarts; }
  // Restarts forgiven as a node's hardware's, and those counted against --max_restarts.
  int forgiven() const { return forgiven_; }
  int BudgetUsed() const { return used_ - forgiven_; }
  bool BudgetLeft() const { return BudgetUsed() < options_.max_restarts; }
  // "restart 2 of 3[; 1 more not counted: the hardware's]"
  std::string Count() const;
  // Why a policy stopped the job ("not restarted: ..."; "" if none did), for the outcome.
  const std::string& note() const { return note_; }
  static constexpr size_t kVerdictsKept = 16;  // each at most about 3 KiB
  // The last kVerdictsKept verdicts, oldest first.
  const std::deque<v1::GenerationVerdict>& verdicts() const { return verdicts_; }

 private:
  void Keep(const std::string& fingerprint, const std::string& what, const std::string& rule);

  NodeDirectory& core_;
  Options options_;
  RecoveryPolicy policy_;
  int used_ = 0;
  // Restarts after a failure that was a node's hardware's (a signature of --restart_rules or
  // gangrun's, or its health check failing right after it): not counted against the budget.
  int forgiven_;
  // The node the last failed generation failed on, until the next starts (0: none).
  int failed_root_node_ = 0;
  std::string note_;
  std::deque<v1::GenerationVerdict> verdicts_;
};

}  // namespace gangrun::scheduler
