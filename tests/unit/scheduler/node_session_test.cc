// The scheduler's side of a node's session (scheduler/node_session.h) on a fake transport and
// the scheduler's fake clock: a quiet session's pongs come from the heartbeat sweep, since its
// node sends no Heartbeat messages to answer (docs/WIRE.md).

#include "scheduler/node_session.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <vector>

#include "tests/testing/fake_clock.h"
#include "tests/testing/scheduler_fakes.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Records what the session sends; its node's connection always has fresh data (ticks).
class FakeWire : public NodeSession::Wire {
 public:
  struct Sent {
    common::TimePoint at;
    uint64_t acked;
  };
  FakeWire(const testing::FakeClock& clock, std::vector<Sent>& pongs, int& refuse)
      : clock_(clock), pongs_(pongs), refuse_(refuse) {}
  void SendCommand(const v1::NodeCommand&) override {}
  bool SendPong(uint64_t acked) override {
    if (refuse_ > 0) {
      --refuse_;
      return false;  // earlier writes still wait
    }
    pongs_.push_back({clock_.Now(), acked});
    return true;
  }
  void CloseAfterWrites() override {}
  void Drop() override {}
  std::string PeerEndpoint() const override { return "ipv4:10.0.0.1:40001"; }
  std::optional<common::Duration> SinceLastData() const override { return milliseconds(0); }

 private:
  const testing::FakeClock& clock_;
  std::vector<Sent>& pongs_;
  int& refuse_;
};

class NodeSessionTest : public ::testing::Test {
 protected:
  static Scheduler::Options Options() {
    Scheduler::Options options;
    options.world_size = 1;
    options.node_timeout = seconds(4);  // a sweep every second
    return options;
  }
  // A session whose node has joined; quiet with a pong timeout of `pong_timeout` (zero: loud).
  NodeSession* Join(milliseconds pong_timeout) {
    auto made = std::make_unique<FakeWire>(clock, pongs, refuse);
    wire = made.get();
    NodeSession* session = sessions.Create("key", std::move(made));
    session->KeepQuiet(pong_timeout);
    v1::NodeEvent join = testing::JoinEvent("a", "10.0.0.1", -1, 1);
    join.set_seq(1);
    EXPECT_TRUE(session->OnEvent(wire, join));
    return session;
  }
  // `seconds_` seconds pass, in steps of 100 ms.
  void Pass(int seconds_) {
    for (int i = 0; i < seconds_ * 10; ++i) clock.Advance(milliseconds(100));
  }

  boost::asio::io_context io;
  testing::FakeClock clock;
  Scheduler scheduler{clock, Options()};
  NodeSessions sessions{io, scheduler};
  std::vector<FakeWire::Sent> pongs;
  int refuse = 0;
  const FakeWire* wire = nullptr;  // the session's
};

TEST_F(NodeSessionTest, AQuietSessionIsPongedEveryTwoNodeTimeoutsWithoutAnyMessage) {
  scheduler.Start();
  Join(milliseconds(24000));  // 6 node timeouts, as the port says
  Pass(41);
  // The first sweep pongs (no pong yet), then one every 8 s (a third of the pong timeout),
  // each acknowledging the join.
  ASSERT_EQ(pongs.size(), 6u);
  for (size_t i = 1; i < pongs.size(); ++i) {
    EXPECT_EQ(pongs[i].at - pongs[i - 1].at, seconds(8)) << i;
    EXPECT_EQ(pongs[i].acked, 1u);
  }
  EXPECT_FALSE(scheduler.finished());
}

TEST_F(NodeSessionTest, APongTheNodeCouldNotTakeIsTriedAgainAtTheNextSweep) {
  scheduler.Start();
  Join(milliseconds(24000));
  Pass(2);
  ASSERT_EQ(pongs.size(), 1u);
  refuse = 2;  // the next two tries find earlier writes waiting
  Pass(10);
  ASSERT_EQ(pongs.size(), 2u);
  // Due 8 s after the first; skipped at that sweep and the next, sent at the third.
  EXPECT_EQ(pongs[1].at - pongs[0].at, seconds(10));
}

TEST_F(NodeSessionTest, ALoudSessionIsPongedOnlyWhenItPings) {
  scheduler.Start();
  NodeSession* session = Join(milliseconds(0));
  Pass(20);
  EXPECT_TRUE(pongs.empty());
  session->OnPing(wire, 0);
  ASSERT_EQ(pongs.size(), 1u);
  EXPECT_EQ(pongs[0].acked, 1u);
}

}  // namespace
}  // namespace gangrun::scheduler
