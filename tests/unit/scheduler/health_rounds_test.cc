// Health rounds (scheduler/health_rounds.h) against a fake directory: who is asked, which
// answers count, and when the round is done. No Scheduler.

#include "scheduler/health_rounds.h"

#include <gtest/gtest.h>

#include "tests/testing/fake_node_directory.h"

namespace gangrun::scheduler {
namespace {

v1::HealthChecked Answer(uint64_t round, bool healthy, const std::string& message = "") {
  v1::HealthChecked checked;
  checked.set_round(round);
  checked.set_healthy(healthy);
  checked.set_message(message);
  return checked;
}

class HealthRoundsTest : public ::testing::Test {
 protected:
  HealthRoundsTest() {
    nodes.AddNode(1, "a", {0});
    nodes.AddNode(2, "b", {1});
    nodes.AddNode(3, "s", {});  // a spare
  }
  testing::FakeNodeDirectory nodes;
  int done = 0;
  HealthRounds rounds{nodes, [this] { ++done; }};
};

TEST_F(HealthRoundsTest, EveryAskedNodeAnswersBeforeTheNextGeneration) {
  EXPECT_FALSE(rounds.Await(1, {1, 2, 3})) << "the first generation is never checked";
  EXPECT_TRUE(nodes.sent.empty());
  ASSERT_TRUE(rounds.Await(2, {1, 2, 3}));
  EXPECT_EQ(rounds.round(), 1u);
  for (int id : {1, 2, 3}) {
    ASSERT_EQ(nodes.SentTo(id).size(), 1u);
    EXPECT_EQ(nodes.SentTo(id)[0].check_health().round(), 1u);
  }
  EXPECT_TRUE(rounds.Await(2, {1, 2, 3})) << "the round under way is not started again";
  EXPECT_EQ(nodes.sent.size(), 3u);

  std::string message;
  EXPECT_EQ(rounds.OnChecked(1, Answer(1, true), &message), HealthRounds::Answer::kHealthy);
  EXPECT_EQ(rounds.OnChecked(1, Answer(1, true), &message), HealthRounds::Answer::kIgnored)
      << "answered once";
  EXPECT_EQ(rounds.OnChecked(2, Answer(7, true), &message), HealthRounds::Answer::kIgnored)
      << "another round's";
  EXPECT_EQ(rounds.OnChecked(2, Answer(1, false, std::string(5000, 'x')), &message),
            HealthRounds::Answer::kUnhealthy);
  EXPECT_LE(message.size(), kMaxReasonBytes + 16) << "bounded";
  EXPECT_EQ(done, 0);
  rounds.Answered(2);  // the core excluded it
  EXPECT_EQ(done, 0);
  rounds.Answered(3);  // the spare was lost: its answer will never come
  EXPECT_EQ(done, 1);
  rounds.Answered(3);
  EXPECT_EQ(done, 1) << "once";
  ASSERT_EQ(nodes.recorded.size(), 2u);
  EXPECT_EQ(nodes.recorded[1].second["node"], "b");
  EXPECT_EQ(nodes.recorded[1].second["healthy"], false);

  EXPECT_FALSE(rounds.Await(2, {1, 3})) << "generation 2's round is done";
  EXPECT_TRUE(rounds.Await(3, {1}));
  EXPECT_EQ(rounds.round(), 2u);
}

TEST_F(HealthRoundsTest, NobodyToAskOrNobodyReachableMeansNoRound) {
  EXPECT_FALSE(rounds.Await(2, {}));
  nodes.RemoveNode(1);
  EXPECT_FALSE(rounds.Await(3, {1}));
  EXPECT_TRUE(nodes.sent.empty());
  EXPECT_EQ(done, 0);
}

}  // namespace
}  // namespace gangrun::scheduler
