// An agent's standing across jobs (daemon/agent_standing.h): failures within the window
// quarantine it, older ones do not count, a drain and a release, the store's form of a record
// and its bounds. A plain value: no daemon, no clock but the times the test gives.

#include "daemon/agent_standing.h"

#include <gtest/gtest.h>

#include <string>

namespace gangrun::daemon {
namespace {

using State = AgentStandings::State;

TEST(AgentStandingTest, FailuresWithinTheWindowQuarantineAnAgent) {
  AgentStandings standings({/*quarantine_after=*/3, /*window_seconds=*/100});
  EXPECT_FALSE(standings.Blame("a", "job-1", "lost: its connection broke", 1000));
  EXPECT_FALSE(standings.Blame("a", "job-2", "excluded: root cause twice", 1050));
  EXPECT_TRUE(standings.Placeable("a"));
  // The first failure is past the window by the third: two within it, still ok.
  EXPECT_FALSE(standings.Blame("a", "job-3", "lost: silent", 1101));
  EXPECT_TRUE(standings.Placeable("a"));
  auto change = standings.Blame("a", "job-4", "lost: silent again", 1102);
  ASSERT_TRUE(change);
  EXPECT_EQ(change->from, State::kOk);
  EXPECT_EQ(change->to, State::kQuarantined);
  EXPECT_NE(change->reason.find("3 failures attributed to it within 100 s"), std::string::npos)
      << change->reason;
  EXPECT_NE(change->reason.find("the last in job job-4: lost: silent again"), std::string::npos)
      << change->reason;
  EXPECT_FALSE(standings.Placeable("a"));
  EXPECT_TRUE(standings.Placeable("b"));  // never blamed
  EXPECT_EQ(standings.In(State::kQuarantined), std::vector<std::string>{"a"});
  // Another failure while quarantined changes nothing more.
  EXPECT_FALSE(standings.Blame("a", "job-5", "lost", 1103));
  // Status: its state, why, since when, and its failures within the window at that time.
  v1::AgentStatus status;
  standings.Describe("a", 1151, status);
  EXPECT_EQ(status.state(), "quarantined");
  EXPECT_EQ(status.since_unix(), 1102);
  ASSERT_EQ(status.failures_size(), 3);  // 1101, 1102 and 1103: job-2's (1050) is past it
  EXPECT_EQ(status.failures(0).job_id(), "job-3");
  EXPECT_EQ(status.failures(2).job_id(), "job-5");
}

TEST(AgentStandingTest, ZeroNeverQuarantines) {
  AgentStandings standings({/*quarantine_after=*/0, /*window_seconds=*/100});
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(standings.Blame("a", "job", "lost", 1000 + i));
  EXPECT_TRUE(standings.Placeable("a"));
}

TEST(AgentStandingTest, ADrainHoldsUntilReleasedAndAReleaseForgetsTheFailures) {
  AgentStandings standings({/*quarantine_after=*/2, /*window_seconds=*/1000});
  EXPECT_FALSE(standings.Blame("a", "job-1", "lost", 10));
  auto drained = standings.Drain("a", "disk swap", 20);
  ASSERT_TRUE(drained);
  EXPECT_EQ(drained->to, State::kDrained);
  EXPECT_EQ(drained->reason, "disk swap");
  EXPECT_FALSE(standings.Drain("a", "again", 21));  // drained already
  // A failure while drained does not make it quarantined: the operator's word stands.
  EXPECT_FALSE(standings.Blame("a", "job-2", "lost", 22));
  EXPECT_EQ(standings.Find("a")->state, State::kDrained);
  auto released = standings.Release("a", "undrained by an operator", 30);
  ASSERT_TRUE(released);
  EXPECT_EQ(released->from, State::kDrained);
  EXPECT_EQ(released->to, State::kOk);
  EXPECT_TRUE(standings.Placeable("a"));
  EXPECT_TRUE(standings.Find("a")->failures.empty());
  // Its old failures are forgotten: one more does not quarantine it.
  EXPECT_FALSE(standings.Blame("a", "job-3", "lost", 31));
  EXPECT_TRUE(standings.Placeable("a"));
  EXPECT_FALSE(standings.Release("a", "ok already", 32));
  EXPECT_FALSE(standings.Release("nobody", "never seen", 32));
  // An operator's drain without a reason says whose it is.
  EXPECT_EQ(standings.Drain("b", "", 40)->reason, "drained by an operator");
}

TEST(AgentStandingTest, ARecordGoesToTheStoreAndBack) {
  AgentStandings one({/*quarantine_after=*/1, /*window_seconds=*/1000});
  ASSERT_TRUE(one.Blame("a", "job-1", "excluded: its health check failed", 100));
  const nlohmann::json json = one.ToJson("a");
  EXPECT_EQ(json["name"], "a");
  EXPECT_EQ(json["state"], "quarantined");
  AgentStandings other({/*quarantine_after=*/1, /*window_seconds=*/1000});
  other.Restore("a", nlohmann::json::parse(json.dump()));
  const auto* record = other.Find("a");
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(record->state, State::kQuarantined);
  EXPECT_EQ(record->reason, one.Find("a")->reason);
  EXPECT_EQ(record->since_unix, 100);
  ASSERT_EQ(record->failures.size(), 1u);
  EXPECT_EQ(record->failures[0].job_id, "job-1");
  EXPECT_EQ(record->failures[0].why, "excluded: its health check failed");
  // What does not parse as a record is an ok agent with nothing against it.
  other.Restore("b", nlohmann::json::parse(R"({"state": 7, "failures": [1, {"unix": "x"}]})"));
  EXPECT_TRUE(other.Placeable("b"));
  ASSERT_NE(other.Find("b"), nullptr);
  EXPECT_EQ(other.Find("b")->failures.size(), 1u);
  EXPECT_EQ(other.Find("b")->failures[0].unix, 0);
}

TEST(AgentStandingTest, TheBoundsHold) {
  AgentStandings standings({/*quarantine_after=*/0, /*window_seconds=*/1e9});
  const std::string long_why(10000, 'x');
  for (size_t i = 0; i < AgentStandings::kMaxFailures + 5; ++i) {
    standings.Blame("a", "job", long_why, 1000 + static_cast<double>(i));
  }
  const auto* record = standings.Find("a");
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(record->failures.size(), AgentStandings::kMaxFailures);
  EXPECT_EQ(record->failures.front().unix, 1005);  // the oldest went first
  EXPECT_EQ(record->failures.back().why, long_why.substr(0, AgentStandings::kMaxWhyBytes) + "...");
}

}  // namespace
}  // namespace gangrun::daemon
