// A scheduler whose own process did not run for a while (its host stalled, its launcher was
// stopped) blames neither its in-process node nor the others for the silence.

#include <gtest/gtest.h>

#include "scheduler/scheduler.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/scheduler_fakes.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::seconds;

using Link = testing::FakeNodeLink;

class StallTest : public ::testing::Test {
 protected:
  StallTest() {
    Scheduler::Options options;
    options.world_size = 2;
    options.node_timeout = seconds(5);
    scheduler = std::make_unique<Scheduler>(clock, options);
    scheduler->SetOnFinished([this](const v1::JobOutcome& o) { outcome = o; });
    scheduler->Start();
    self_id = Join(self, "self", "10.0.0.1");
    other_id = Join(other, "other", "10.0.0.2");
  }
  int Join(Link& link, const std::string& name, const std::string& address) {
    int id = scheduler->AddNode(&link);
    scheduler->OnNodeEvent(id, testing::JoinEvent(name, address, -1, 1));
    return id;
  }
  void Heartbeat(int id) { scheduler->OnNodeEvent(id, testing::HeartbeatEvent()); }
  static bool Aborted(const Link& link) { return link.aborted(); }

  testing::FakeClock clock;
  std::unique_ptr<Scheduler> scheduler;
  std::optional<v1::JobOutcome> outcome;
  Link self{true}, other;
  int self_id = 0, other_id = 0;
};

TEST_F(StallTest, AStallOfTheSchedulerBlamesNoNode) {
  ASSERT_TRUE(other.commands.back().has_start());
  clock.Stall(seconds(20));  // nobody, the scheduler included, ran for 20 s
  EXPECT_FALSE(Aborted(other));
  EXPECT_FALSE(Aborted(self));
  // Heard again after the stall: the job goes on.
  Heartbeat(other_id);
  clock.Advance(seconds(4));
  Heartbeat(other_id);
  clock.Advance(seconds(4));
  EXPECT_FALSE(Aborted(other));
  EXPECT_FALSE(outcome.has_value());
}

TEST_F(StallTest, ANodeSilentAfterTheStallIsStillLost) {
  clock.Stall(seconds(20));
  clock.Advance(seconds(7));  // the other node never speaks again
  // Lost: its connection is dropped (nothing more is sent to it) and the others stop.
  EXPECT_TRUE(other.dropped);
  EXPECT_FALSE(Aborted(other));
  ASSERT_TRUE(Aborted(self));
  EXPECT_NE(self.commands.back().abort().reason().find("node 'other'"), std::string::npos)
      << self.commands.back().abort().reason();
}

TEST_F(StallTest, TheInProcessNodeIsNeverLostToSilenceButARemoteOneIs) {
  clock.Advance(seconds(3));
  Heartbeat(other_id);  // only the remote node speaks; the in-process one never does
  clock.Advance(seconds(4));
  Heartbeat(other_id);
  clock.Advance(seconds(4));
  EXPECT_FALSE(Aborted(other));
  clock.Advance(seconds(7));  // now the remote one is silent
  ASSERT_TRUE(Aborted(self));
  EXPECT_NE(self.commands.back().abort().reason().find("'other'"), std::string::npos);
}

}  // namespace
}  // namespace gangrun::scheduler
