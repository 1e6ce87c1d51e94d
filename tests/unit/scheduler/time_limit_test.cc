// The time limit (scheduler/time_limit.h) on the fake clock: the early signal, the limit, what
// is left, and a job that finished first. No Scheduler.

#include "scheduler/time_limit.h"

#include <gtest/gtest.h>

#include <csignal>

#include "tests/testing/fake_clock.h"
#include "tests/testing/fake_node_directory.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::seconds;

class TimeLimitTest : public ::testing::Test {
 protected:
  TimeLimit Limit(TimeLimit::Options options) {
    return TimeLimit(
        nodes_, clock_, options,
        [this](int signal, const std::string& why) { signals_.emplace_back(signal, why); },
        [this](const std::string& why) { reached_.push_back(why); });
  }

  testing::FakeClock clock_;
  testing::FakeNodeDirectory nodes_;
  std::vector<std::pair<int, std::string>> signals_;
  std::vector<std::string> reached_;
};

TEST_F(TimeLimitTest, TheWorkersAreWarnedThenTheJobIsStopped) {
  TimeLimit limit = Limit({seconds(3600), SIGUSR1, seconds(120)});
  EXPECT_FALSE(limit.Left().has_value()) << "not armed yet";
  limit.Arm();
  limit.Arm();  // once
  clock_.Advance(seconds(3479));
  EXPECT_TRUE(signals_.empty());
  EXPECT_EQ(limit.Left(), seconds(121));
  clock_.Advance(seconds(1));
  ASSERT_EQ(signals_.size(), 1u);
  EXPECT_EQ(signals_[0].first, SIGUSR1);
  EXPECT_EQ(signals_[0].second, "120 s before the job's time limit (--time_limit_signal)");
  EXPECT_TRUE(reached_.empty());
  clock_.Advance(seconds(120));
  ASSERT_EQ(reached_.size(), 1u);
  EXPECT_EQ(reached_[0], "the job reached its time limit of 3600 s");
  EXPECT_TRUE(limit.reached());
  EXPECT_FALSE(limit.Left().has_value());
  EXPECT_EQ(signals_.size(), 1u);
  ASSERT_EQ(nodes_.recorded.size(), 2u);
  EXPECT_EQ(nodes_.recorded[1].second["time_limit_seconds"], 3600.0);
}

TEST_F(TimeLimitTest, NoLimitNoSignalAndAFinishedJobIsLeftAlone) {
  TimeLimit none = Limit({});
  none.Arm();
  clock_.Advance(seconds(100000));
  EXPECT_FALSE(none.Left().has_value());
  // A signal as early as the limit itself is never sent; a job that finished is not stopped.
  TimeLimit limit = Limit({seconds(10), SIGUSR1, seconds(10)});
  limit.Arm();
  nodes_.job_state = JobState::kFinished;
  clock_.Advance(seconds(10));
  EXPECT_TRUE(signals_.empty());
  EXPECT_TRUE(reached_.empty());
  EXPECT_FALSE(limit.reached());
}

}  // namespace
}  // namespace gangrun::scheduler
