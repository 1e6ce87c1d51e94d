// The wait for nodes (scheduler/formation.h) on a fake clock: its deadline, its last call, its
// reminders, the refused launchers and the wait's line. No Scheduler.

#include "scheduler/formation.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/testing/fake_clock.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::seconds;

class FormationTest : public ::testing::Test {
 protected:
  Formation Make(common::Duration timeout) {
    return Formation(
        clock, timeout,
        {[this] { ++timed_out; }, [this](const std::string& left) { reminded.push_back(left); }});
  }
  testing::FakeClock clock;
  int timed_out = 0;
  std::vector<std::string> reminded;
};

TEST_F(FormationTest, AWaitEndsAtItsDeadlineOnceAndIsRemindedOfMeanwhile) {
  Formation formation = Make(seconds(600));
  const common::TimePoint start = clock.Now();
  clock.Advance(seconds(100));  // the scheduler started 100 s ago, nothing armed yet
  formation.Begin(start);       // the deadline counts from `since`, not from now
  EXPECT_EQ(formation.Left(), "; 8 m 20 s left");
  clock.Advance(seconds(10));
  ASSERT_EQ(reminded, std::vector<std::string>{"8 m 10 s left"});
  clock.Advance(seconds(489));
  EXPECT_EQ(timed_out, 0);
  clock.Advance(seconds(1));
  EXPECT_EQ(timed_out, 1);
  clock.Advance(seconds(3600));
  EXPECT_EQ(timed_out, 1) << "a deadline passes once";

  // A second wait (a lost node's replacement) has its own deadline and reminders.
  formation.Begin(clock.Now());
  EXPECT_EQ(formation.Left(), "; 10 m 0 s left");
  clock.Advance(seconds(600));
  EXPECT_EQ(timed_out, 2);
}

TEST_F(FormationTest, TheEndOfTheWaitDisarmsItsDeadlineLastCallAndReminders) {
  Formation formation = Make(seconds(60));
  formation.Begin(clock.Now());
  int formed = 0;
  ASSERT_TRUE(formation.CallLast(seconds(5), [&] { ++formed; }));
  formation.End();
  EXPECT_EQ(formation.Left(), "");
  clock.Advance(seconds(3600));
  EXPECT_EQ(timed_out, 0);
  EXPECT_EQ(formed, 0);
  EXPECT_TRUE(reminded.empty());
  EXPECT_EQ(clock.pending_timers(), 0u);
}

TEST_F(FormationTest, ALastCallIsArmedOnceAndFormsOnce) {
  Formation formation = Make(seconds(-1));  // no limit
  formation.Begin(clock.Now());
  EXPECT_EQ(formation.Left(), "; no time limit");
  int formed = 0;
  ASSERT_TRUE(formation.CallLast(seconds(5), [&] { ++formed; }));
  EXPECT_FALSE(formation.CallLast(seconds(1), [&] { formed += 100; })) << "already on";
  clock.Advance(seconds(4));
  EXPECT_EQ(formed, 0);
  clock.Advance(seconds(1));
  EXPECT_EQ(formed, 1);
  EXPECT_TRUE(formation.CallLast(seconds(5), [&] { ++formed; })) << "the call is over";
  clock.Advance(seconds(5));
  EXPECT_EQ(formed, 2);
  EXPECT_EQ(timed_out, 0);
}

TEST_F(FormationTest, RefusedLaunchersAreCountedAndTheFirstEightKept) {
  Formation formation = Make(seconds(60));
  EXPECT_TRUE(formation.Refused("h1", "its token is not the job's"));
  EXPECT_FALSE(formation.Refused("h1", "its token is not the job's")) << "a repeat only counts";
  EXPECT_TRUE(formation.Refused("h1", "it does not use the job's TLS")) << "another reason";
  EXPECT_EQ(formation.RefusedText(),
            "h1 (it does not use the job's TLS), h1 (its token is not the job's, 2 times)");
  for (int i = 2; i <= 7; ++i) EXPECT_TRUE(formation.Refused("h" + std::to_string(i), "x"));
  EXPECT_FALSE(formation.Refused("h9", "x")) << "eight kept";
  EXPECT_EQ(formation.RefusedText().find("h9"), std::string::npos);
}

TEST_F(FormationTest, TheWaitsLineNamesWhoCameTheMissingNodeRanksAndWhoWasRefused) {
  EXPECT_EQ(Formation::WaitingLine({{"a", "10.0.0.1", 0, 2}}, 6, ""),
            "waiting for 4 of 6 workers (1 node(s) joined: a; node ranks 1, 2 have not joined)");
  EXPECT_EQ(Formation::WaitingLine({{"a", "10.0.0.1", -1, 2}}, 4, "h (x)"),
            "waiting for 2 of 4 workers (1 node(s) joined: a; refused: h (x))")
      << "automatic node ranks: no rank is known to be missing";
  EXPECT_EQ(Formation::WaitingLine({}, 2, ""), "waiting for 2 of 2 workers (0 node(s) joined)");
  EXPECT_EQ(Formation::WaitingLine({{"a", "10.0.0.1", 0, 2}, {"b", "10.0.0.2", 1, 2}}, 4, ""), "")
      << "nobody missing";
  std::vector<NodeJoin> many;
  for (int i = 0; i < 10; ++i) many.push_back({"n" + std::to_string(i), "", i, 1});
  const std::string line = Formation::WaitingLine(many, 100, "");
  EXPECT_NE(line.find("10 node(s) joined: n0, n1, n2, n3, n4, n5, n6, n7, ...;"), std::string::npos)
      << line;
  EXPECT_NE(line.find("node ranks 10, 11, 12, 13, 14, 15, 16, 17, ... have"), std::string::npos)
      << line;
}

}  // namespace
}  // namespace gangrun::scheduler
