#include "scheduler/wait_reminder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/testing/fake_clock.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::seconds;

TEST(WaitReminderTest, SaysTheLineEveryTenSecondsForAMinuteThenEveryMinuteWithTheTimeLeft) {
  testing::FakeClock clock;
  std::vector<std::string> said;
  WaitReminder reminder(clock, [&](const std::string& left) { said.push_back(left); });
  reminder.Start(clock.Now() + seconds(600));
  clock.Advance(seconds(9));
  EXPECT_TRUE(said.empty());
  clock.Advance(seconds(1));
  ASSERT_EQ(said, std::vector<std::string>{"9 m 50 s left"});
  clock.Advance(seconds(50));  // 20, 30, 40, 50, 60 s
  ASSERT_EQ(said.size(), 6u);
  EXPECT_EQ(said.back(), "9 m 0 s left");
  clock.Advance(seconds(59));
  EXPECT_EQ(said.size(), 6u);  // past the first minute: once a minute
  clock.Advance(seconds(1));
  EXPECT_EQ(said.back(), "8 m 0 s left");
  reminder.Stop();
  clock.Advance(seconds(600));
  EXPECT_EQ(said.size(), 7u);
  EXPECT_FALSE(reminder.active());
}

TEST(WaitReminderTest, AStartWhileRemindingKeepsTheWaitsOwnClockAndAStopFromTheLineEndsIt) {
  testing::FakeClock clock;
  int said = 0;
  WaitReminder* self = nullptr;
  WaitReminder reminder(clock, [&](const std::string&) {
    if (++said == 2) self->Stop();  // the owner learns, while saying it, that the wait is over
  });
  self = &reminder;
  reminder.Start(std::nullopt);
  clock.Advance(seconds(5));
  reminder.Start(clock.Now() + seconds(1));  // already reminding: no-op
  clock.Advance(seconds(5));
  EXPECT_EQ(said, 1);
  EXPECT_EQ(reminder.Left(), "no time limit");
  clock.Advance(seconds(100));
  EXPECT_EQ(said, 2);
  EXPECT_FALSE(reminder.active());
}

TEST(WaitReminderTest, FormatsWholeSecondsRoundedUp) {
  EXPECT_EQ(WaitReminder::Format(std::chrono::milliseconds(9200)), "10 s");
  EXPECT_EQ(WaitReminder::Format(seconds(580)), "9 m 40 s");
  EXPECT_EQ(WaitReminder::Format(seconds(7500)), "2 h 5 m");
  testing::FakeClock clock;
  WaitReminder reminder(clock, [](const std::string&) {});
  reminder.Start(clock.Now());
  EXPECT_EQ(reminder.Left(), "no time left");
}

}  // namespace
}  // namespace gangrun::scheduler
