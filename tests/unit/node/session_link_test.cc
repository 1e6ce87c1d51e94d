// The node's session link (node/session_link.h): its rules on the fake clock with a fake
// transport, then against a real scheduler through a proxy that can stall.

#include "node/session_link.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "tests/testing/fake_clock.h"

namespace gangrun::node {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using End = SessionConnection::End;

// A transport whose connections the test drives: it sees what the link sends and answers
// for the scheduler.
struct FakeConnection : SessionConnection {
  explicit FakeConnection(Handlers h) : handlers(std::move(h)) {}
  void Open(uint64_t s, const std::string& k, uint64_t a) override {
    opened = true;
    session = s;
    key = k;
    acked = a;
  }
  void SendEvent(const v1::NodeEvent& event) override { events.push_back(event); }
  void SendPing(uint64_t a, bool sparse) override {
    pings.push_back(a);
    sparse_pings += sparse ? 1 : 0;
  }
  std::optional<common::Duration> SinceLastAck() const override { return since_ack; }
  common::Duration QuietPongTimeout() const override { return quiet_pong_timeout; }
  // What the scheduler's side does; each may destroy this connection (the handler is copied
  // first, as the real transports do).
  void Accepted(uint64_t s, uint64_t a) {
    auto handler = handlers.on_accepted;
    handler(s, "key", a);
  }
  void Ended(End end, const std::string& why) {
    auto handler = handlers.on_end;
    handler(end, why);
  }
  void Refused(const v1::SessionRefused& refused) {
    auto handler = handlers.on_refused;
    handler(refused);
  }
  Handlers handlers;
  bool opened = false;
  uint64_t session = 0, acked = 0;
  std::string key;
  std::vector<v1::NodeEvent> events;
  std::vector<uint64_t> pings;
  int sparse_pings = 0;
  std::optional<common::Duration> since_ack;  // set: the transport reads its kernel's ACKs
  common::Duration quiet_pong_timeout{0};     // set before Accepted: a quiet session
  bool* destroyed = nullptr;
  ~FakeConnection() override {
    if (destroyed != nullptr) *destroyed = true;
  }
};

class SessionLinkPolicyTest : public ::testing::Test {
 protected:
  SessionLinkPolicyTest() {
    SessionLink::Options options;
    options.target = "sched:1";
    options.heartbeat_interval = seconds(1);
    options.node_timeout = seconds(5);
    link_ = std::make_unique<SessionLink>(clock_, options, [this](SessionConnection::Handlers h) {
      auto connection = std::make_unique<FakeConnection>(std::move(h));
      connections_.push_back(connection.get());
      connection->destroyed = &destroyed_[connections_.size() - 1];
      return connection;
    });
    link_->Connect([this](const v1::NodeCommand& command) { commands_.push_back(command); },
                   [this](const std::string& reason, bool unauthenticated) {
                     lost_ = reason;
                     unauthenticated_ = unauthenticated;
                   });
  }
  // The scheduler accepts the latest connection.
  FakeConnection& Accept(uint64_t session = 7, uint64_t acked = 0) {
    FakeConnection& connection = *connections_.back();
    connection.Accepted(session, acked);
    return connection;
  }
  bool Gone(size_t index) const { return destroyed_[index]; }
  v1::NodeCommand Command(uint64_t seq) {
    v1::NodeCommand command;
    command.set_seq(seq);
    command.mutable_heartbeat_policy();
    return command;
  }
  v1::NodeEvent Event() {
    v1::NodeEvent event;
    event.mutable_heartbeat();
    return event;
  }

  testing::FakeClock clock_;
  std::vector<FakeConnection*> connections_;  // owned by the link
  bool destroyed_[64] = {};                   // set when connection i is destroyed
  std::unique_ptr<SessionLink> link_;
  std::vector<v1::NodeCommand> commands_;
  std::optional<std::string> lost_;
  bool unauthenticated_ = false;
};

TEST_F(SessionLinkPolicyTest, EventsWaitForTheAcceptanceAndGoInOrder) {
  link_->Send(Event());
  link_->Send(Event());
  ASSERT_EQ(connections_.size(), 1u);
  EXPECT_TRUE(connections_[0]->events.empty());
  FakeConnection& first = Accept();
  ASSERT_EQ(first.events.size(), 2u);
  EXPECT_EQ(first.events[0].seq(), 1u);
  EXPECT_EQ(first.events[1].seq(), 2u);
  // A ping at once, then every heartbeat interval, with the last command received.
  ASSERT_EQ(first.pings.size(), 1u);
  first.handlers.on_command(Command(1));
  clock_.Advance(seconds(1));
  ASSERT_EQ(first.pings.size(), 2u);
  EXPECT_EQ(first.pings[1], 1u);
}

TEST_F(SessionLinkPolicyTest, SilenceOpensANewConnectionThatResumesAndSendsWhatWasNotAcked) {
  FakeConnection& first = Accept();
  link_->Send(Event());
  link_->Send(Event());
  link_->Send(Event());
  first.handlers.on_pong(1);  // the scheduler has event 1
  // Nothing more from the scheduler: after 2 intervals a second connection resumes.
  clock_.Advance(milliseconds(1999));
  EXPECT_EQ(connections_.size(), 1u);
  clock_.Advance(seconds(1));
  ASSERT_EQ(connections_.size(), 2u);
  FakeConnection& second = *connections_[1];
  EXPECT_TRUE(second.opened);
  EXPECT_EQ(second.session, 7u);
  EXPECT_EQ(second.key, "key");
  EXPECT_FALSE(Gone(0)) << "the old connection stays until the new one is accepted";
  second.Accepted(7, 2);  // the scheduler had event 2 as well
  EXPECT_TRUE(Gone(0));
  ASSERT_EQ(second.events.size(), 1u);
  EXPECT_EQ(second.events[0].seq(), 3u);
  EXPECT_FALSE(lost_);
}

TEST_F(SessionLinkPolicyTest, WhileTheKernelSeesAcksSparsePongsOpenNoNewConnection) {
  FakeConnection& first = Accept();
  first.since_ack = milliseconds(40);  // the scheduler's kernel acknowledges every ping
  clock_.Advance(seconds(4));          // and its scheduler pongs only every T / 2
  EXPECT_EQ(connections_.size(), 1u);
  EXPECT_EQ(first.sparse_pings, 4) << "each ping says a pong per ping is not needed";
  first.handlers.on_pong(0);
  clock_.Advance(seconds(4));
  EXPECT_EQ(connections_.size(), 1u);
  EXPECT_FALSE(lost_);
}

TEST_F(SessionLinkPolicyTest, NoAckForTwoIntervalsOpensANewConnectionAsSilenceDoes) {
  FakeConnection& first = Accept();
  first.since_ack = milliseconds(40);
  clock_.Advance(seconds(1));
  EXPECT_EQ(connections_.size(), 1u);
  first.since_ack = seconds(2);  // the path broke: nothing acknowledged for 2 intervals
  clock_.Advance(seconds(1));
  EXPECT_EQ(connections_.size(), 2u);
}

TEST_F(SessionLinkPolicyTest, AStuckSchedulerWhoseKernelStillAcksIsLostAfterTheNodeTimeout) {
  FakeConnection& first = Accept();
  first.since_ack = milliseconds(40);  // its host answers, its event loop does not
  clock_.Advance(milliseconds(6999));
  EXPECT_FALSE(lost_);
  EXPECT_EQ(connections_.size(), 1u);
  clock_.Advance(milliseconds(1001));
  ASSERT_TRUE(lost_);
  EXPECT_NE(lost_->find("did not answer for 7000 ms"), std::string::npos) << *lost_;
}

// A quiet session (docs/WIRE.md): pongs come with the node's Heartbeat messages, every 2 T.
TEST_F(SessionLinkPolicyTest, AQuietSessionIsKeptByItsKernelsAcksBetweenRarePongs) {
  connections_.back()->quiet_pong_timeout = seconds(30);
  FakeConnection& first = Accept();
  first.since_ack = milliseconds(40);
  for (int t = 0; t < 3; ++t) {  // a pong every 10 s, none for far longer than T + 2 I
    clock_.Advance(seconds(10));
    first.handlers.on_pong(0);
  }
  clock_.Advance(milliseconds(29999));
  EXPECT_FALSE(lost_);
  EXPECT_EQ(connections_.size(), 1u);
  clock_.Advance(milliseconds(1));
  ASSERT_TRUE(lost_);
  EXPECT_NE(lost_->find("sent no pong for 30000 ms while its host still acknowledged"),
            std::string::npos)
      << *lost_;
}

TEST_F(SessionLinkPolicyTest, AQuietSessionWhosePathIsSilentIsLostAfterTheNodeTimeout) {
  connections_.back()->quiet_pong_timeout = seconds(30);
  FakeConnection& first = Accept();
  first.since_ack = milliseconds(0);
  clock_.Advance(seconds(2));  // acknowledged until t = 2, then nothing
  for (int t = 3; t <= 8; ++t) {
    first.since_ack = seconds(t - 2);
    clock_.Advance(seconds(1));
    ASSERT_FALSE(lost_) << "at " << t << " s";
  }
  EXPECT_GE(connections_.size(), 2u);  // resuming since t = 4
  first.since_ack = seconds(7);
  clock_.Advance(seconds(1));  // T + 2 I after the last ACK, though pongs are rare
  ASSERT_TRUE(lost_);
  EXPECT_NE(lost_->find("did not answer for 7000 ms"), std::string::npos) << *lost_;
}

TEST_F(SessionLinkPolicyTest, CommandsSentAgainAreDeliveredOnce) {
  FakeConnection& first = Accept();
  first.handlers.on_command(Command(1));
  first.handlers.on_command(Command(2));
  first.handlers.on_command(Command(2));
  first.handlers.on_command(Command(1));
  first.handlers.on_command(Command(3));
  ASSERT_EQ(commands_.size(), 3u);
  EXPECT_EQ(commands_[2].seq(), 3u);
}

TEST_F(SessionLinkPolicyTest, SilenceLongerThanTheNodeTimeoutAndTwoIntervalsLosesTheScheduler) {
  Accept();
  // Every resume attempt goes unanswered.
  clock_.Advance(milliseconds(6999));
  EXPECT_FALSE(lost_);
  EXPECT_GT(connections_.size(), 2u) << "resume attempts are bounded and follow each other";
  clock_.Advance(milliseconds(1001));
  ASSERT_TRUE(lost_);
  EXPECT_NE(lost_->find("did not answer for 7000 ms"), std::string::npos) << *lost_;
  EXPECT_FALSE(unauthenticated_);
}

TEST_F(SessionLinkPolicyTest, AClosedSessionWhoseHostThenRefusesConnectionsIsLostAtOnce) {
  FakeConnection& first = Accept();
  first.Ended(End::kClosed, "the peer closed the connection");
  ASSERT_EQ(connections_.size(), 2u);
  EXPECT_FALSE(lost_);
  connections_[1]->Ended(End::kConnectionRefused, "Connection refused");
  ASSERT_TRUE(lost_);
  EXPECT_NE(lost_->find("is gone: it closed the session and its port refuses connections"),
            std::string::npos)
      << *lost_;
}

TEST_F(SessionLinkPolicyTest, ASilentSessionWhoseResumeIsRefusedKeepsTrying) {
  Accept();
  clock_.Advance(seconds(2));
  ASSERT_EQ(connections_.size(), 2u);
  // A firewall that rejects, not the scheduler's verdict: try again.
  connections_[1]->Ended(End::kConnectionRefused, "Connection refused");
  EXPECT_FALSE(lost_);
  clock_.Advance(milliseconds(200));
  EXPECT_EQ(connections_.size(), 3u);
}

TEST_F(SessionLinkPolicyTest, AResumeTheSchedulerDoesNotKnowLosesIt) {
  Accept();
  clock_.Advance(seconds(2));
  ASSERT_EQ(connections_.size(), 2u);
  v1::SessionRefused refused;
  refused.set_reason("no such session");
  refused.set_unknown_session(true);
  connections_[1]->Refused(refused);
  ASSERT_TRUE(lost_);
  EXPECT_NE(lost_->find("no longer holds this node's session"), std::string::npos) << *lost_;
}

TEST_F(SessionLinkPolicyTest, APeerThatIsNotASchedulerTwiceIsNamed) {
  connections_[0]->Ended(End::kNotAScheduler, "closed");
  EXPECT_FALSE(lost_);
  clock_.Advance(milliseconds(100));
  ASSERT_EQ(connections_.size(), 2u);
  connections_[1]->Ended(End::kNotAScheduler, "closed");
  ASSERT_TRUE(lost_);
  EXPECT_NE(lost_->find("expects TLS (or is not a gangrun scheduler)"), std::string::npos);
}

TEST_F(SessionLinkPolicyTest, TheJobsEndClosesTheSessionWithoutAResume) {
  FakeConnection& first = Accept();
  v1::NodeCommand finished;
  finished.set_seq(1);
  finished.mutable_finished();
  first.handlers.on_command(finished);
  first.Ended(End::kClosed, "the peer closed the connection");
  clock_.Advance(seconds(60));
  EXPECT_EQ(connections_.size(), 1u);
  EXPECT_FALSE(lost_);
}

}  // namespace
}  // namespace gangrun::node
