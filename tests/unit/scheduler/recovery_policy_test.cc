// The recovery policy (scheduler/recovery_policy.h) alone: exit codes that must not be
// retried, the exclusion streak, restarts without progress, the same failure or hang again,
// and the failures' fingerprints. No Scheduler.

#include "scheduler/recovery_policy.h"

#include <gtest/gtest.h>

#include <csignal>

namespace gangrun::scheduler {
namespace {

v1::ProcessExit Code(int code) {
  v1::ProcessExit exit;
  exit.set_exit_code(code);
  return exit;
}

TEST(RecoveryPolicyTest, ExitCodesOfTheListAreNotRestarted) {
  RecoveryPolicy policy({{93, 2}, 0, 0});
  EXPECT_TRUE(policy.NoRestart(Code(93)));
  EXPECT_TRUE(policy.NoRestart(Code(2)));
  EXPECT_FALSE(policy.NoRestart(Code(1)));
  v1::ProcessExit killed;
  killed.set_signal(SIGKILL);
  EXPECT_FALSE(policy.NoRestart(killed));
}

TEST(RecoveryPolicyTest, TheHeadersWorkedExample) {
  RecoveryPolicy policy({{}, /*exclude_after=*/2, /*max_no_progress_restarts=*/2});
  policy.OnStep(10);
  auto first = policy.OnGenerationFailed(7);
  EXPECT_FALSE(first.exclude);
  EXPECT_FALSE(first.stop);
  EXPECT_EQ(policy.no_progress_streak(), 0);  // step 10 is progress: nothing came before
  policy.OnStep(4);
  auto second = policy.OnGenerationFailed(7);
  EXPECT_TRUE(second.exclude);
  EXPECT_NE(second.exclude_why.find("2 failed generations in a row"), std::string::npos)
      << second.exclude_why;
  EXPECT_FALSE(second.stop);
  EXPECT_EQ(policy.no_progress_streak(), 1);
  policy.OnStep(10);
  auto third = policy.OnGenerationFailed(3);
  EXPECT_FALSE(third.exclude);
  EXPECT_TRUE(third.stop);
  EXPECT_NE(third.stop_why.find("made no progress"), std::string::npos) << third.stop_why;
  EXPECT_EQ(policy.best_step(), 10);
}

TEST(RecoveryPolicyTest, TheSameFailureThreeTimesWithoutProgressStops) {
  RecoveryPolicy policy({});  // --max_same_failures 3, the default
  const std::string same = "ValueError at train.py:88 in step";
  EXPECT_FALSE(policy.OnGenerationFailed(1, same).stop);
  EXPECT_FALSE(policy.OnGenerationFailed(2, same).stop);  // whichever node
  const auto third = policy.OnGenerationFailed(1, same);
  EXPECT_TRUE(third.stop);
  EXPECT_NE(
      third.stop_why.find("the same failure in 3 generations in a row, with no progress: " + same),
      std::string::npos)
      << third.stop_why;
}

TEST(RecoveryPolicyTest, AnotherFailureOrProgressStartsTheCountAgain) {
  RecoveryPolicy policy({});
  EXPECT_FALSE(policy.OnGenerationFailed(1, "A").stop);
  EXPECT_FALSE(policy.OnGenerationFailed(1, "A").stop);
  EXPECT_FALSE(policy.OnGenerationFailed(1, "B").stop);  // B once
  EXPECT_FALSE(policy.OnGenerationFailed(1, "B").stop);  // twice
  policy.OnStep(50);
  EXPECT_FALSE(policy.OnGenerationFailed(1, "B").stop);  // a step gained: once again
  EXPECT_FALSE(policy.OnGenerationFailed(1, "B").stop);
  EXPECT_TRUE(policy.OnGenerationFailed(1, "B").stop);
  EXPECT_FALSE(policy.OnGenerationFailed(1, "").stop);  // nothing to compare: no count
  RecoveryPolicy off({{}, 0, 0, /*max_same_failures=*/0});
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(off.OnGenerationFailed(1, "A").stop);
}

TEST(RecoveryPolicyTest, AHangAtTheSamePlaceTwiceStops) {
  RecoveryPolicy policy({});
  v1::StackGroup waiting, odd;
  waiting.set_where("all_reduce_wait (train.py:20)");
  waiting.add_ranks(0);
  waiting.add_ranks(1);
  odd.set_where("load_batch (train.py:12)");
  odd.add_ranks(2);
  odd.set_odd_one_out(true);
  const std::string hang = HangFingerprint({waiting, odd});
  EXPECT_EQ(hang, "a hang at load_batch (train.py:12)");
  EXPECT_FALSE(policy.OnGenerationFailed(3, hang).stop);
  const auto second = policy.OnGenerationFailed(3, hang);
  EXPECT_TRUE(second.stop);
  EXPECT_NE(second.stop_why.find("2 generations in a row"), std::string::npos) << second.stop_why;
  EXPECT_EQ(HangFingerprint({}), "");
  RecoveryPolicy off({{}, 0, 0, /*max_same_failures=*/0});
  EXPECT_FALSE(off.OnGenerationFailed(3, hang).stop);
  EXPECT_FALSE(off.OnGenerationFailed(3, hang).stop);
}

TEST(FailureFingerprintTest, TheSameFailureInAnotherGenerationLooksTheSame) {
  v1::RootCause raised;
  raised.set_rank(2);
  raised.mutable_error()->set_message("ValueError: bad value 7");
  raised.mutable_error()->add_traceback("Traceback (most recent call last):");
  raised.mutable_error()->add_traceback("  File \"/w/lib.py\", line 3, in helper");
  raised.mutable_error()->add_traceback("  File \"/w/train.py\", line 88, in step");
  raised.mutable_error()->add_traceback("    raise ValueError(value)");
  EXPECT_EQ(FailureFingerprint(raised), "ValueError at train.py:88 in step");
  v1::RootCause exited;
  exited.set_rank(0);
  exited.mutable_exit()->set_exit_code(3);
  exited.add_log_tail("step 12 loss nan");
  exited.add_log_tail("==== gangrun: generation 2 (restart 1 of 5) ====");
  EXPECT_EQ(FailureFingerprint(exited), "exit code 3; last line: step ## loss nan");
  v1::RootCause again = exited;  // another rank, another step: the same failure
  again.set_rank(5);
  again.set_log_tail(0, "step 13 loss nan");
  EXPECT_EQ(FailureFingerprint(again), FailureFingerprint(exited));
  v1::RootCause killed;
  killed.mutable_exit()->set_signal(9);
  EXPECT_EQ(FailureFingerprint(killed), "killed by signal 9");
}

TEST(RecoveryPolicyTest, AnotherNodeOrAForgottenOneStartsTheStreakAgain) {
  RecoveryPolicy policy({{}, 2, 0});
  EXPECT_FALSE(policy.OnGenerationFailed(7).exclude);
  EXPECT_FALSE(policy.OnGenerationFailed(3).exclude);
  EXPECT_FALSE(policy.OnGenerationFailed(7).exclude);
  policy.Forget(7);
  EXPECT_FALSE(policy.OnGenerationFailed(7).exclude);
  EXPECT_TRUE(policy.OnGenerationFailed(7).exclude);
  EXPECT_FALSE(policy.OnGenerationFailed(0).exclude);  // no root node (a lost one)
}

}  // namespace
}  // namespace gangrun::scheduler
