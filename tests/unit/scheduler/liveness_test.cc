// How the scheduler hears its nodes (scheduler/liveness.cc): data on a node's connection
// counts as its heartbeat, a watched node is told to send messages rarely, and a node is still
// lost soon after the node timeout (and the heartbeat it owed) when its connection goes silent.

#include <gtest/gtest.h>

#include "scheduler/scheduler.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/scheduler_fakes.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using Link = testing::FakeNodeLink;

class LivenessTest : public ::testing::Test {
 protected:
  LivenessTest() {
    Scheduler::Options options;
    options.world_size = 2;
    options.node_timeout = seconds(4);  // a sweep every second
    scheduler = std::make_unique<Scheduler>(clock, options);
    a.peer = "10.0.0.1:40001";
    b.peer = "10.0.0.2:40002";
    scheduler->WatchConnections([this]() -> absl::StatusOr<rpc::ConnectionActivity> {
      ++reads;
      if (!kernel_error.ok()) return kernel_error;
      rpc::ConnectionActivity activity;
      for (const auto& [peer, at] : received_at) activity[peer] = clock.Now() - at;
      return activity;
    });
    scheduler->Start();
    a_id = Join(a, "a", "10.0.0.1");
    b_id = Join(b, "b", "10.0.0.2");
  }
  int Join(Link& link, const std::string& name, const std::string& address) {
    received_at[link.peer] = clock.Now();
    int id = scheduler->AddNode(&link);
    scheduler->OnNodeEvent(id, testing::JoinEvent(name, address, -1, 1));
    return id;
  }
  // `seconds_` seconds pass; the pings of the nodes in `pinging` arrive every 200 ms.
  void Pass(int seconds_, const std::set<const Link*>& pinging) {
    for (int i = 0; i < seconds_ * 5; ++i) {
      clock.Advance(milliseconds(200));
      for (const Link* link : pinging) received_at[link->peer] = clock.Now();
    }
  }
  static std::optional<uint32_t> Policy(const Link& link) {
    std::optional<uint32_t> last;
    for (const auto& command : link.commands) {
      if (command.has_heartbeat_policy()) last = command.heartbeat_policy().message_interval_ms();
    }
    return last;
  }
  static std::string AbortReason(const Link& link) {
    for (const auto& command : link.commands) {
      if (command.has_abort()) return command.abort().reason();
    }
    return "";
  }

  testing::FakeClock clock;
  std::unique_ptr<Scheduler> scheduler;
  std::map<std::string, common::TimePoint> received_at;  // per peer: when data last came
  absl::Status kernel_error;
  int reads = 0;
  Link a, b;
  int a_id = 0, b_id = 0;
};

TEST_F(LivenessTest, PingsKeepAWatchedNodeAliveWithoutMessages) {
  ASSERT_TRUE(a.started());
  Pass(1, {&a, &b});
  // Both are watched: a Heartbeat message every 2 node timeouts is enough.
  EXPECT_EQ(Policy(a), 8000u);
  EXPECT_EQ(Policy(b), 8000u);
  Pass(20, {&a, &b});  // 20 s without a single message, five node timeouts
  EXPECT_EQ(AbortReason(a), "");
  EXPECT_EQ(AbortReason(b), "");
  // A node's connection is read once the node could be lost (node timeout + interval, 5 s),
  // not at each sweep (1 s): at 1, 7, 13 and 19 s.
  EXPECT_GE(reads, 3);
  EXPECT_LE(reads, 5);
}

// A session's link reads its own connection (one getsockopt), only when its node could be lost.
TEST_F(LivenessTest, ALinkThatReadsItsConnectionIsReadOncePerNodeTimeoutAndLostOnTime) {
  a.since_last_data = [this] { return clock.Now() - received_at[a.peer]; };
  Pass(1, {&a, &b});
  EXPECT_EQ(Policy(a), 8000u);
  Pass(12, {&a, &b});  // no message: lost as stuck only after 24 s
  EXPECT_EQ(AbortReason(b), "");
  EXPECT_GE(a.data_reads, 2);  // at 1, 7 and 13 s, not at each of the 13 sweeps
  EXPECT_LE(a.data_reads, 4);
  const common::TimePoint silent_since = clock.Now();
  while (AbortReason(b).empty() && clock.Now() - silent_since < seconds(10)) Pass(1, {&b});
  const std::string reason = AbortReason(b);
  EXPECT_NE(reason.find("'a'"), std::string::npos) << reason;
  EXPECT_NE(reason.find("its connection was silent"), std::string::npos) << reason;
  EXPECT_GT(clock.Now() - silent_since, seconds(5));
  EXPECT_LE(clock.Now() - silent_since, seconds(6));
}

TEST_F(LivenessTest, ASilentConnectionIsLostSoonAfterTheNodeTimeoutAndOneInterval) {
  Pass(2, {&a, &b});
  const common::TimePoint silent_since = clock.Now();
  int waited_ms = 0;
  while (AbortReason(a).empty() && waited_ms < 10000) {
    clock.Advance(milliseconds(100));
    received_at[a.peer] = clock.Now();  // a keeps pinging; b went silent
    waited_ms += 100;
  }
  const std::string reason = AbortReason(a);
  EXPECT_NE(reason.find("'b'"), std::string::npos) << reason;
  EXPECT_NE(reason.find("no heartbeat for"), std::string::npos) << reason;
  EXPECT_NE(reason.find("its connection was silent"), std::string::npos) << reason;
  // More than node_timeout plus the heartbeat it owed (1 s), within one more sweep period.
  EXPECT_GT(clock.Now() - silent_since, seconds(5));
  EXPECT_LE(clock.Now() - silent_since, seconds(6));
}

TEST_F(LivenessTest, ALauncherThatAnswersPingsButSendsNoMessageIsLostAsStuck) {
  Pass(1, {&a, &b});
  ASSERT_EQ(Policy(b), 8000u);
  // b's gRPC threads answer pings, its event loop sends nothing; a sends its messages.
  for (int t = 0; t < 22; ++t) {  // until 23 s after b's join, its last message
    if (t % 8 == 0) scheduler->OnNodeEvent(a_id, testing::HeartbeatEvent());
    Pass(1, {&a, &b});
    ASSERT_EQ(AbortReason(a), "") << "lost after " << t << " s";
  }
  Pass(2, {&a, &b});  // 3 missed messages (24 s) after it
  const std::string reason = AbortReason(a);
  EXPECT_NE(reason.find("'b'"), std::string::npos) << reason;
  EXPECT_NE(reason.find("its launcher is stuck"), std::string::npos) << reason;
}

// A quiet session's ticks come from its launcher's loop: it is told to send no messages, is
// never lost for their absence, and is lost as soon as any node once its connection is silent.
TEST_F(LivenessTest, ANodeWhoseDataProvesItsLoopSendsNoMessagesAndIsLostOnlyToSilence) {
  a.data_proves_loop = true;
  a.since_last_data = [this] { return clock.Now() - received_at[a.peer]; };
  const int sweeps_before = a.sweeps;
  // 60 s: data on both connections, a message from b every 8 s (its policy), none from a.
  for (int t = 0; t < 60; ++t) {
    if (t % 8 == 0) scheduler->OnNodeEvent(b_id, testing::HeartbeatEvent());
    Pass(1, {&a, &b});
    ASSERT_EQ(AbortReason(b), "") << "lost after " << t << " s";
  }
  EXPECT_EQ(Policy(a), 24u * 3600 * 1000);  // a message a day: none
  EXPECT_EQ(Policy(b), 8000u);
  // Every sweep (one a second) called the links, the quiet one's pongs being theirs to send.
  EXPECT_GE(a.sweeps - sweeps_before, 59);
  EXPECT_LE(a.sweeps - sweeps_before, 61);
  // a's loop stops: so do its ticks, and it is lost as a silent connection.
  const common::TimePoint silent_since = clock.Now();
  while (AbortReason(b).empty() && clock.Now() - silent_since < seconds(10)) Pass(1, {&b});
  const std::string reason = AbortReason(b);
  EXPECT_NE(reason.find("'a'"), std::string::npos) << reason;
  EXPECT_NE(reason.find("its connection was silent"), std::string::npos) << reason;
  EXPECT_GT(clock.Now() - silent_since, seconds(5));
  EXPECT_LE(clock.Now() - silent_since, seconds(6));
}

TEST_F(LivenessTest, WhenTheKernelCannotBeReadNodesGoBackToMessages) {
  Pass(1, {&a, &b});
  ASSERT_EQ(Policy(a), 8000u);
  Pass(3, {&a, &b});  // no message for 4 s: only the pings vouch for the nodes
  kernel_error = absl::UnavailableError("out of file descriptors");
  Pass(3, {&a, &b});  // the next read is due 5 s after the last (at 1 s)
  EXPECT_GE(reads, 2);
  // Told to send a message every heartbeat interval, with a fresh node timeout to do it.
  EXPECT_EQ(Policy(a), 0u);
  EXPECT_EQ(Policy(b), 0u);
  EXPECT_EQ(AbortReason(a), "");
  for (int t = 0; t < 7; ++t) {  // a sends its messages, b does not
    scheduler->OnNodeEvent(a_id, testing::HeartbeatEvent());
    Pass(1, {&a, &b});
  }
  const std::string reason = AbortReason(a);
  EXPECT_NE(reason.find("'b'"), std::string::npos) << reason;
  EXPECT_EQ(reason.find("its connection was silent"), std::string::npos) << reason;
}

TEST_F(LivenessTest, ANodeWhoseConnectionIsNotFoundIsJudgedByItsMessages) {
  received_at.erase(b.peer);  // e.g. behind a proxy: the scheduler sees another endpoint
  Pass(1, {&a});
  EXPECT_EQ(Policy(a), 8000u);
  EXPECT_FALSE(Policy(b).has_value());
  for (int t = 0; t < 3; ++t) {
    scheduler->OnNodeEvent(b_id, testing::HeartbeatEvent());
    Pass(1, {&a});
  }
  EXPECT_EQ(AbortReason(a), "");
  Pass(5, {&a});
  EXPECT_NE(AbortReason(a).find("'b'"), std::string::npos) << AbortReason(a);
}

}  // namespace
}  // namespace gangrun::scheduler
