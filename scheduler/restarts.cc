#include "scheduler/restarts.h"

#include <algorithm>
#include <vector>

#include "common/logging.h"
#include "scheduler/peer_checks.h"

namespace gangrun::scheduler {

Restarts::Restarts(NodeDirectory& core, Options options)
    : core_(core),
      options_(std::move(options)),
      policy_(options_.policy),
      forgiven_(std::max(0, options_.forgiven)) {}

Restarts::Decision Restarts::Judge(const StopReason* failed, bool node_lost) {
  using Action = Decision::Action;
  failed_root_node_ = failed != nullptr ? failed->root_node : 0;
  std::string fingerprint;
  std::vector<std::string> text;
  if (failed != nullptr && failed->kind == StopReason::Kind::kWorkerFailed) {
    fingerprint = FailureFingerprint(failed->root_cause);
    text = FailureText(failed->root_cause);
  } else if (failed != nullptr && failed->kind == StopReason::Kind::kHung) {
    fingerprint = HangFingerprint(failed->groups);
  }
  const auto stop = [&](const std::string& why, const std::string& rule) {
    note_ = "not restarted: " + why;
    common::Logger("scheduler")->error("{}", note_);
    Keep(fingerprint, "stop: " + why, rule);
    return Decision{Action::kStop, note_};
  };
  if (failed != nullptr && failed->no_restart) {
    return stop("exit code " + std::to_string(failed->root_cause.exit().exit_code()) +
                    " is one of --no_restart_exit_codes",
                "");
  }
  const RecoveryPolicy::Verdict verdict =
      policy_.OnGenerationFailed(failed != nullptr ? failed->root_node : 0, fingerprint, text);
  if (verdict.stop) return stop(verdict.stop_why, verdict.rule);
  // The node's hardware failed, not the job: the restart is not the job's to pay for.
  if (verdict.forgiven) ++forgiven_;
  if (node_lost) {
    Keep(fingerprint, "wait for a node", verdict.rule);
    return {Action::kWaitForNode, "waiting for a node to take its place"};
  }
  if (!BudgetLeft()) {
    const std::string used =
        "all " + std::to_string(options_.max_restarts) + " restart(s) of --max_restarts are used";
    Keep(fingerprint, "stop: " + used, verdict.rule);
    return {Action::kStop, "not restarted: " + used};
  }
  if (verdict.exclude) {
    Keep(fingerprint, "exclude: " + verdict.exclude_why, verdict.rule);
    return {Action::kExclude, verdict.exclude_why};
  }
  Keep(fingerprint, "restart", verdict.rule);
  return {Action::kRestart, ""};
}

common::Duration Restarts::Next() {
  ++used_;
  common::Duration delay = options_.backoff_initial;
  for (int i = 1; i < used_ && delay < options_.backoff_cap; ++i) delay *= 2;
  return std::min(delay, options_.backoff_cap);
}

bool Restarts::ForgiveIfHardware(int node_id) {
  if (node_id == 0 || node_id != failed_root_node_) return false;
  ++forgiven_;
  failed_root_node_ = 0;
  return true;
}

std::string Restarts::Count() const {
  return "restart " + std::to_string(BudgetUsed()) + " of " +
         std::to_string(options_.max_restarts) +
         (forgiven_ > 0 ? "; " + std::to_string(forgiven_) + " more not counted: the hardware's"
                        : std::string());
}

void Restarts::Keep(const std::string& fingerprint, const std::string& what,
                    const std::string& rule) {
  v1::GenerationVerdict verdict;
  verdict.set_generation(core_.generation());
  verdict.set_fingerprint(fingerprint);
  verdict.set_verdict(Sanitize(what, kMaxReasonBytes));
  verdict.set_rule(Sanitize(rule, kMaxReasonBytes));
  core_.Record(Event::kVerdict, {{"generation", core_.generation()},
                                 {"fingerprint", fingerprint},
                                 {"verdict", verdict.verdict()},
                                 {"rule", verdict.rule()}});
  verdicts_.push_back(std::move(verdict));
  if (verdicts_.size() > kVerdictsKept) verdicts_.pop_front();
}

}  // namespace gangrun::scheduler
