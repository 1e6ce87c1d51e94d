// The job's restarts (scheduler/restarts.h) against a fake directory: the backoff, the budget
// and the restarts it forgives, and each failed generation's verdict. No Scheduler.

#include "scheduler/restarts.h"

#include <gtest/gtest.h>

#include "tests/testing/fake_node_directory.h"

namespace gangrun::scheduler {
namespace {

using Decided = Restarts::Decision::Action;
using std::chrono::seconds;

// Rank 2 on node `node` exited with `code`, its log ending in `last_line`.
StopReason RankFailedOn(int node, int code, const std::string& last_line = "") {
  StopReason reason{StopReason::Kind::kWorkerFailed, "rank 2 failed", {}, {}};
  reason.root_node = node;
  reason.root_cause.set_rank(2);
  reason.root_cause.mutable_exit()->set_exit_code(code);
  if (!last_line.empty()) reason.root_cause.add_log_tail(last_line);
  return reason;
}

class RestartsTest : public ::testing::Test {
 protected:
  Restarts Make(int max_restarts, RecoveryPolicy::Options policy = {}) {
    return Restarts(nodes_, {max_restarts, seconds(1), seconds(30), std::move(policy)});
  }
  // The verdicts recorded as events, in order.
  std::vector<std::string> Recorded() const {
    std::vector<std::string> verdicts;
    for (const auto& [event, fields] : nodes_.recorded) {
      if (event == Event::kVerdict) verdicts.push_back(fields["verdict"]);
    }
    return verdicts;
  }

  testing::FakeNodeDirectory nodes_;
};

TEST_F(RestartsTest, TheBackoffDoublesUpToItsCap) {
  Restarts restarts = Make(10);
  std::vector<int64_t> waits;
  for (int i = 0; i < 7; ++i)
    waits.push_back(std::chrono::duration_cast<seconds>(restarts.Next()).count());
  EXPECT_EQ(waits, (std::vector<int64_t>{1, 2, 4, 8, 16, 30, 30}));
  EXPECT_EQ(restarts.used(), 7);
  EXPECT_EQ(restarts.BudgetUsed(), 7);
  EXPECT_TRUE(restarts.BudgetLeft());
}

TEST_F(RestartsTest, TheHeadersWorkedExample) {
  Restarts restarts = Make(2);
  const StopReason first = RankFailedOn(7, 1);
  EXPECT_EQ(restarts.Judge(&first, false).action, Decided::kRestart);
  restarts.Next();
  EXPECT_EQ(restarts.Count(), "restart 1 of 2");
  EXPECT_FALSE(restarts.ForgiveIfHardware(3)) << "not the node it failed on";
  EXPECT_TRUE(restarts.ForgiveIfHardware(7));
  EXPECT_FALSE(restarts.ForgiveIfHardware(7)) << "once";
  EXPECT_EQ(restarts.Count(), "restart 0 of 2; 1 more not counted: the hardware's");
  restarts.OnGenerationStarted();
  const StopReason second = RankFailedOn(3, 1);
  EXPECT_EQ(restarts.Judge(&second, false).action, Decided::kRestart);
  restarts.Next();
  EXPECT_EQ(restarts.Count(), "restart 1 of 2; 1 more not counted: the hardware's");
  EXPECT_EQ(restarts.used(), 2) << "the workers' restart count includes the forgiven one";
  restarts.OnGenerationStarted();
  EXPECT_FALSE(restarts.ForgiveIfHardware(3)) << "a generation started since";
}

TEST_F(RestartsTest, ABudgetUsedUpStopsTheJobAndSaysSo) {
  Restarts restarts = Make(1);
  const StopReason failed = RankFailedOn(1, 1);
  EXPECT_EQ(restarts.Judge(&failed, false).action, Decided::kRestart);
  restarts.Next();
  nodes_.generation_number = 2;
  const Restarts::Decision decision = restarts.Judge(&failed, false);
  EXPECT_EQ(decision.action, Decided::kStop);
  EXPECT_EQ(decision.note, "not restarted: all 1 restart(s) of --max_restarts are used");
  EXPECT_EQ(restarts.note(), "") << "the budget is no policy: the outcome says it otherwise";
  ASSERT_EQ(restarts.verdicts().size(), 2u);
  EXPECT_EQ(restarts.verdicts()[1].generation(), 2u);
  EXPECT_EQ(restarts.verdicts()[1].verdict(), "stop: all 1 restart(s) of --max_restarts are used");
  EXPECT_EQ(Recorded(), (std::vector<std::string>{
                            "restart", "stop: all 1 restart(s) of --max_restarts are used"}));
}

TEST_F(RestartsTest, ANoRestartCodeStopsWhateverTheBudget) {
  Restarts restarts = Make(5, {{93}, 0, 0});
  StopReason failed = RankFailedOn(1, 93);
  failed.no_restart = restarts.NoRestart(failed.root_cause.exit());
  ASSERT_TRUE(failed.no_restart);
  const Restarts::Decision decision = restarts.Judge(&failed, false);
  EXPECT_EQ(decision.action, Decided::kStop);
  EXPECT_EQ(decision.note, "not restarted: exit code 93 is one of --no_restart_exit_codes");
  EXPECT_EQ(restarts.note(), decision.note);
  EXPECT_EQ(restarts.verdicts().back().fingerprint(), FailureFingerprint(failed.root_cause));
}

TEST_F(RestartsTest, ALostNodeWaitsAndARepeatedRootCauseIsExcluded) {
  Restarts restarts = Make(5, {{}, /*exclude_after=*/2, 0});
  EXPECT_EQ(restarts.Judge(nullptr, /*node_lost=*/true).action, Decided::kWaitForNode);
  const StopReason failed = RankFailedOn(4, 1);
  EXPECT_EQ(restarts.Judge(&failed, false).action, Decided::kRestart);
  const Restarts::Decision second = restarts.Judge(&failed, false);
  EXPECT_EQ(second.action, Decided::kExclude);
  EXPECT_NE(second.note.find("2 failed generations in a row"), std::string::npos) << second.note;
  EXPECT_EQ(restarts.verdicts().back().verdict(), "exclude: " + second.note);
}

TEST_F(RestartsTest, AHardwareSignatureExcludesTheNodeForgivenAndOnlyTheLastVerdictsAreKept) {
  Restarts restarts = Make(2);
  const StopReason ecc = RankFailedOn(1, 1, "RuntimeError: CUDA error: uncorrectable ECC error");
  for (size_t i = 0; i < Restarts::kVerdictsKept + 4; ++i) {
    nodes_.generation_number = i + 1;
    const Restarts::Decision decision = restarts.Judge(&ecc, false);
    ASSERT_EQ(decision.action, Decided::kExclude) << "generation " << i + 1;
    restarts.Next();  // with a spare in its place
  }
  EXPECT_EQ(restarts.BudgetUsed(), 0);
  EXPECT_EQ(restarts.used(), static_cast<int>(Restarts::kVerdictsKept) + 4);
  ASSERT_EQ(restarts.verdicts().size(), Restarts::kVerdictsKept);
  EXPECT_EQ(restarts.verdicts().front().generation(), 5u);
  EXPECT_NE(restarts.verdicts().back().rule().find("ECC"), std::string::npos)
      << restarts.verdicts().back().rule();
}

}  // namespace
}  // namespace gangrun::scheduler
