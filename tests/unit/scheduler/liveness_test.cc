// How the scheduler hears its nodes (scheduler/liveness.h), the component alone on a fake
// clock and a fake directory: data on a node's connection counts as its heartbeat, a watched
// node is told to send messages rarely, a node is still lost soon after the node timeout (and
// the heartbeat it owed) when its connection goes silent, a stall of this process blames
// nobody, and a session that never joins is closed. No Scheduler.

#include "scheduler/liveness.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/testing/fake_clock.h"
#include "tests/testing/fake_node_directory.h"
#include "tests/testing/scheduler_fakes.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using Link = testing::FakeNodeLink;

class LivenessTest : public ::testing::Test {
 protected:
  LivenessTest() {
    a.peer = "10.0.0.1:40001";
    b.peer = "10.0.0.2:40002";
    liveness.Watch([this]() -> absl::StatusOr<rpc::ConnectionActivity> {
      ++reads;
      if (!kernel_error.ok()) return kernel_error;
      rpc::ConnectionActivity activity;
      for (const auto& [peer, at] : received_at) activity[peer] = clock.Now() - at;
      return activity;
    });
    liveness.Start();
    Connect(a_id, a);
    Connect(b_id, b);
  }
  void Connect(int id, Link& link) {
    received_at[link.peer] = clock.Now();
    liveness.Add(id, &link);
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
  // Why the node was lost ("" while it is not).
  std::string LostWhy(int id) const {
    auto it = lost.find(id);
    return it == lost.end() ? "" : it->second;
  }

  testing::FakeClock clock;
  testing::FakeNodeDirectory nodes;
  std::map<int, Liveness::Standing> standing;  // kJudged unless set
  std::map<int, std::string> lost;
  std::vector<int> closed;
  Liveness liveness{nodes,
                    clock,
                    {seconds(4), seconds(1), seconds(30)},  // a sweep every second
                    {[this](int id) {
                       auto it = standing.find(id);
                       return it == standing.end() ? Liveness::Standing::kJudged : it->second;
                     },
                     [this](int id, const std::string& why) {
                       lost.emplace(id, why);
                       liveness.Unlink(id);
                     },
                     [this](int id) {
                       closed.push_back(id);
                       liveness.Forget(id);
                     }}};
  std::map<std::string, common::TimePoint> received_at;  // per peer: when data last came
  absl::Status kernel_error;
  int reads = 0;
  Link a, b;
  const int a_id = 1, b_id = 2;
};

TEST_F(LivenessTest, PingsKeepAWatchedNodeAliveWithoutMessages) {
  Pass(1, {&a, &b});
  // Both are watched: a Heartbeat message every 2 node timeouts is enough.
  EXPECT_EQ(Policy(a), 8000u);
  EXPECT_EQ(Policy(b), 8000u);
  Pass(20, {&a, &b});  // 20 s without a single message, five node timeouts
  EXPECT_TRUE(lost.empty());
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
  EXPECT_EQ(LostWhy(a_id), "");
  EXPECT_GE(a.data_reads, 2);  // at 1, 7 and 13 s, not at each of the 13 sweeps
  EXPECT_LE(a.data_reads, 4);
  const common::TimePoint silent_since = clock.Now();
  while (LostWhy(a_id).empty() && clock.Now() - silent_since < seconds(10)) Pass(1, {&b});
  const std::string reason = LostWhy(a_id);
  EXPECT_EQ(LostWhy(b_id), "");
  EXPECT_NE(reason.find("its connection was silent"), std::string::npos) << reason;
  EXPECT_GT(clock.Now() - silent_since, seconds(5));
  EXPECT_LE(clock.Now() - silent_since, seconds(6));
}

TEST_F(LivenessTest, ASilentConnectionIsLostSoonAfterTheNodeTimeoutAndOneInterval) {
  Pass(2, {&a, &b});
  const common::TimePoint silent_since = clock.Now();
  int waited_ms = 0;
  while (LostWhy(b_id).empty() && waited_ms < 10000) {
    clock.Advance(milliseconds(100));
    received_at[a.peer] = clock.Now();  // a keeps pinging; b went silent
    waited_ms += 100;
  }
  const std::string reason = LostWhy(b_id);
  EXPECT_EQ(LostWhy(a_id), "");
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
    if (t % 8 == 0) liveness.Heard(a_id);
    Pass(1, {&a, &b});
    ASSERT_EQ(LostWhy(b_id), "") << "lost after " << t << " s";
  }
  Pass(2, {&a, &b});  // 3 missed messages (24 s) after it
  const std::string reason = LostWhy(b_id);
  EXPECT_EQ(LostWhy(a_id), "");
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
    if (t % 8 == 0) liveness.Heard(b_id);
    Pass(1, {&a, &b});
    ASSERT_EQ(LostWhy(a_id), "") << "lost after " << t << " s";
  }
  EXPECT_EQ(Policy(a), 24u * 3600 * 1000);  // a message a day: none
  EXPECT_EQ(Policy(b), 8000u);
  // Every sweep (one a second) called the links, the quiet one's pongs being theirs to send.
  EXPECT_GE(a.sweeps - sweeps_before, 59);
  EXPECT_LE(a.sweeps - sweeps_before, 61);
  // a's loop stops: so do its ticks, and it is lost as a silent connection.
  const common::TimePoint silent_since = clock.Now();
  while (LostWhy(a_id).empty() && clock.Now() - silent_since < seconds(10)) Pass(1, {&b});
  const std::string reason = LostWhy(a_id);
  EXPECT_EQ(LostWhy(b_id), "");
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
  EXPECT_TRUE(lost.empty());
  for (int t = 0; t < 7; ++t) {  // a sends its messages, b does not
    liveness.Heard(a_id);
    Pass(1, {&a, &b});
  }
  const std::string reason = LostWhy(b_id);
  EXPECT_EQ(LostWhy(a_id), "");
  EXPECT_EQ(reason.find("its connection was silent"), std::string::npos) << reason;
}

TEST_F(LivenessTest, ANodeWhoseConnectionIsNotFoundIsJudgedByItsMessages) {
  received_at.erase(b.peer);  // e.g. behind a proxy: the scheduler sees another endpoint
  Pass(1, {&a});
  EXPECT_EQ(Policy(a), 8000u);
  EXPECT_FALSE(Policy(b).has_value());
  for (int t = 0; t < 3; ++t) {
    liveness.Heard(b_id);
    Pass(1, {&a});
  }
  EXPECT_TRUE(lost.empty());
  Pass(5, {&a});
  EXPECT_NE(LostWhy(b_id).find("no heartbeat"), std::string::npos) << LostWhy(b_id);
  EXPECT_EQ(LostWhy(a_id), "");
}

// A sweep that runs 9 s late (this process was stopped) blames nobody; the note of the stall is
// there for the losses that follow within a node timeout, and gone after.
TEST_F(LivenessTest, AStallOfThisProcessBlamesNobody) {
  Pass(2, {&a, &b});
  clock.Stall(seconds(9));
  EXPECT_TRUE(lost.empty());
  ASSERT_EQ(nodes.recorded.size(), 1u);
  EXPECT_EQ(nodes.recorded[0].first, Event::kSchedulerStalled);
  EXPECT_NE(liveness.StallNote().find("did not run for"), std::string::npos);
  Pass(6, {&a});  // b stays silent after the stall: lost all the same
  EXPECT_NE(LostWhy(b_id).find("no heartbeat"), std::string::npos);
  EXPECT_EQ(liveness.StallNote(), "");
}

// A session that has not joined is closed at the join timeout; a node whose part ended (or an
// in-process one) is never lost to silence, whatever its connection says.
TEST_F(LivenessTest, UnjoinedSessionsAreClosedAndOnlyJudgedNodesAreLost) {
  Link c, self(true);
  c.peer = "10.0.0.3:40003";
  Connect(3, c);
  Connect(4, self);
  standing[3] = Liveness::Standing::kUnjoined;
  standing[b_id] = Liveness::Standing::kIgnored;
  for (int t = 0; t < 29; ++t) {  // a sends its messages (every 8 s is its policy)
    if (t % 5 == 0) liveness.Heard(a_id);
    Pass(1, {&a, &c});
  }
  EXPECT_TRUE(closed.empty());
  liveness.Heard(a_id);
  Pass(2, {&a, &c});
  EXPECT_EQ(closed, std::vector<int>{3});
  EXPECT_TRUE(lost.empty()) << "b is silent, but ignored; self is in-process";
  EXPECT_EQ(self.sweeps, 0);
  standing[b_id] = Liveness::Standing::kJudged;
  Pass(1, {&a});
  EXPECT_NE(LostWhy(b_id).find("no heartbeat"), std::string::npos);
  EXPECT_LE(liveness.HeardAt(a_id), clock.Now());
  EXPECT_GE(liveness.HeardAt(a_id), clock.Now() - seconds(3));
}

}  // namespace
}  // namespace gangrun::scheduler
