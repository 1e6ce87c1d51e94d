#include <gtest/gtest.h>

#include <vector>

#include "tests/testing/fake_clock.h"

namespace gangrun::common {
namespace {

using std::chrono::seconds;

TEST(FakeClockTest, RunsDueTimersInDeadlineOrder) {
  testing::FakeClock clock;
  std::vector<int> fired;
  auto t2 = clock.After(seconds(2), [&] { fired.push_back(2); });
  auto t1 = clock.After(seconds(1), [&] { fired.push_back(1); });
  auto t3 = clock.After(seconds(3), [&] { fired.push_back(3); });
  clock.Advance(seconds(2));
  EXPECT_EQ(fired, (std::vector<int>{1, 2}));
  clock.Advance(seconds(5));
  EXPECT_EQ(fired, (std::vector<int>{1, 2, 3}));
}

TEST(FakeClockTest, CancelledOrDestroyedTimersNeverRun) {
  testing::FakeClock clock;
  bool ran = false;
  auto t = clock.After(seconds(1), [&] { ran = true; });
  t->Cancel();
  {
    auto gone = clock.After(seconds(1), [&] { ran = true; });
  }
  clock.Advance(seconds(10));
  EXPECT_FALSE(ran);
  EXPECT_EQ(clock.pending_timers(), 0u);
}

TEST(FakeClockTest, NowMovesWithAdvance) {
  testing::FakeClock clock;
  TimePoint start = clock.Now();
  clock.Advance(seconds(3));
  EXPECT_EQ(clock.Now() - start, seconds(3));
}

}  // namespace
}  // namespace gangrun::common
