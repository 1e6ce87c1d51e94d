// A node's session on gangrun's own framing (docs/WIRE.md): the scheduler's port and
// SessionPort against real node links and against hostile or broken peers driven by hand
// (tests/testing/session_client.h), on 127.0.0.1.

#include "scheduler/session_port.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <future>
#include <random>

#include "gangrun/v1/session.grpc.pb.h"
#include "node/session_link.h"
#include "node/tcp_link.h"
#include "rpc/channel.h"
#include "rpc/port.h"
#include "tests/testing/scheduler_server_fixture.h"
#include "tests/testing/session_client.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::SessionClient;
using testing::TestJoin;

class SessionPortTest : public testing::SchedulerServerFixture {
 protected:
  void SetUp() override {
    SchedulerServerFixture::SetUp();
    before_shutdown_ = [this] { links_.clear(); };
  }

  struct Outcome {
    std::promise<v1::NodeCommand> first_command;
    std::promise<std::pair<std::string, bool>> lost;  // reason, unauthenticated
  };
  // A node's link, made and connected on the io_context; it sends `join`.
  Outcome& Link(const std::string& token, const v1::NodeEvent& join) {
    auto outcome = std::make_unique<Outcome>();
    Outcome& result = *outcome;
    outcomes_.push_back(std::move(outcome));
    boost::asio::post(io_, [this, token, join, &result] {
      auto link = NodeLink(token);
      auto commands = std::make_shared<int>(0);
      link->Connect(
          [&result, commands](const v1::NodeCommand& command) {
            if ((*commands)++ == 0) result.first_command.set_value(command);
          },
          [&result](const std::string& reason, bool unauthenticated) {
            result.lost.set_value({reason, unauthenticated});
          });
      link->Send(join);
      links_.push_back(std::move(link));
    });
    return result;
  }
  std::pair<std::string, bool> WaitLost(Outcome& outcome) {
    auto lost = outcome.lost.get_future();
    EXPECT_EQ(lost.wait_for(seconds(20)), std::future_status::ready);
    return lost.get();
  }
  // Two nodes with the token join, and each gets its part of a 2-worker job.
  void ExpectTwoNodesForm() {
    Outcome& a = Link(Token(), TestJoin(0));
    Outcome& b = Link(Token(), TestJoin(1));
    for (Outcome* node : {&a, &b}) {
      auto first = node->first_command.get_future();
      ASSERT_EQ(first.wait_for(seconds(20)), std::future_status::ready);
      const v1::NodeCommand command = first.get();
      ASSERT_TRUE(command.has_start()) << command.DebugString();
      EXPECT_EQ(command.start().assignment().world_size(), 2);
    }
  }
  // Sends `bytes` on a connection of its own; true when the scheduler closes it.
  bool ClosedAfter(const std::string& bytes, bool end_of_input = false) {
    int fd = testing::DialLoopback(server_->port());
    if (fd < 0 || !testing::SendAll(fd, bytes)) return false;
    if (end_of_input) shutdown(fd, SHUT_WR);
    const bool closed = testing::ClosedByPeer(fd);
    close(fd);
    return closed;
  }
  v1::GetStatusResponse Status() {
    auto stub =
        v1::Scheduler::NewStub(rpc::MakeChannel(Target(), nullptr, Token(), "", seconds(30)));
    grpc::ClientContext context;
    v1::GetStatusResponse status;
    EXPECT_TRUE(stub->GetStatus(&context, {}, &status).ok());
    return status;
  }

  std::vector<std::unique_ptr<Outcome>> outcomes_;
  std::vector<std::unique_ptr<node::SessionLink>> links_;  // on the io_context
};

TEST_F(SessionPortTest, NodesJoinOverTheSessionFramingAndGrpcSharesThePort) {
  ExpectTwoNodesForm();
  // gRPC calls on the same port are handed to the gRPC server.
  const v1::GetStatusResponse status = Status();
  EXPECT_EQ(status.phase(), v1::JOB_PHASE_RUNNING) << status.DebugString();
}

TEST_F(SessionPortTest, AWrongOrMissingTokenIsRefusedAsUnauthenticated) {
  const auto [reason, unauthenticated] = WaitLost(Link("guess", TestJoin(0)));
  EXPECT_TRUE(unauthenticated) << reason;
  EXPECT_NE(reason.find("token"), std::string::npos) << reason;
  const auto [missing, missing_unauthenticated] = WaitLost(Link("", TestJoin(0)));
  EXPECT_TRUE(missing_unauthenticated) << missing;
  EXPECT_NE(missing.find("requires the job's token"), std::string::npos) << missing;
  EXPECT_EQ(Status().nodes_size(), 0);
}

TEST_F(SessionPortTest, TheTokenNeverCrossesTheWire) {
  SessionClient client(server_->port());
  ASSERT_TRUE(client.Open(Token()).accepted);
  ASSERT_TRUE(client.SendEvent(TestJoin(0)));
  ASSERT_TRUE(client.SendPing(0));
  EXPECT_EQ(client.sent().find(Token()), std::string::npos);
  EXPECT_EQ(Status().nodes_size(), 1);
}

// A hello gets a challenge that carries nothing a token guess could be tested against
// offline (issue 47): the launcher proves first, and only a launcher whose proof holds gets the
// scheduler's proof, with the acceptance.
TEST_F(SessionPortTest, AHelloLearnsNothingToTestATokenGuessAgainst) {
  SessionClient raw(server_->port());
  v1::SessionHello hello;
  hello.set_nonce(std::string(rpc::kNonceBytes, 'n'));
  hello.set_has_token(true);
  std::string opening(rpc::kSessionMagic);
  rpc::AppendFrame(opening, rpc::FrameType::kHello, hello.SerializeAsString());
  ASSERT_TRUE(raw.Send(opening));
  auto [type, payload] = testing::ReadFrame(raw.fd());
  ASSERT_EQ(type, static_cast<int>(rpc::FrameType::kChallenge));
  v1::SessionChallenge challenge;
  ASSERT_TRUE(challenge.ParseFromString(payload));
  v1::SessionChallenge only_these;  // nonce, run id and "a token is required": nothing else
  only_these.set_nonce(challenge.nonce());
  only_these.set_run_id(challenge.run_id());
  only_these.set_token_required(challenge.token_required());
  EXPECT_EQ(payload, only_these.SerializeAsString());
  EXPECT_FALSE(SessionClient(server_->port()).Open("not the token").accepted);
  const SessionClient::Opened opened = SessionClient(server_->port()).Open(Token());
  ASSERT_TRUE(opened.accepted);
  EXPECT_TRUE(opened.scheduler_proven);
}

// The acknowledgement in the next pong the scheduler sends (commands before it are skipped).
std::optional<uint64_t> NextPong(SessionClient& client) {
  for (;;) {
    auto [type, body] = client.ReadSealed();
    if (type == 0) return std::nullopt;
    if (type != static_cast<int>(rpc::FrameType::kPong)) continue;
    v1::SessionAck ack;
    if (!ack.ParseFromString(body)) return std::nullopt;
    return ack.acked();
  }
}

TEST_F(SessionPortTest, ANodeThatReadsItsKernelsAcksGetsAPongOnlyWhenOneIsDue) {
  SessionClient client(server_->port());
  ASSERT_TRUE(client.Open(Token()).accepted);
  ASSERT_TRUE(client.SendPing(0, true));  // the first ping of a session: answered
  EXPECT_EQ(NextPong(client), 0u);
  ASSERT_TRUE(client.SendEvent(TestJoin(0)));  // event 1
  ASSERT_TRUE(client.SendPing(0, true));       // an event to acknowledge: answered
  EXPECT_EQ(NextPong(client), 1u);
  ASSERT_TRUE(client.SendPing(0, true));  // nothing new, the last pong is fresh: not answered
  v1::NodeEvent heartbeat;
  heartbeat.mutable_heartbeat();
  ASSERT_TRUE(client.SendEvent(heartbeat));  // event 2
  ASSERT_TRUE(client.SendPing(0, true));
  // Had the second ping been answered, its pong (acknowledging 1) would come first.
  EXPECT_EQ(NextPong(client), 2u);
  ASSERT_TRUE(client.SendPing(0, false));  // a node that needs a pong per ping gets one
  EXPECT_EQ(NextPong(client), 2u);
}

TEST_F(SessionPortTest, ARecordingOfASessionIsUselessAgain) {
  SessionClient client(server_->port());
  ASSERT_TRUE(client.Open(Token()).accepted);
  ASSERT_TRUE(client.SendEvent(TestJoin(0)));
  ASSERT_TRUE(client.SendPing(1));
  ASSERT_EQ(client.ReadSealed().first, static_cast<int>(rpc::FrameType::kPong));
  const std::string recording = client.sent();
  ASSERT_EQ(Status().nodes_size(), 1);
  // Played back, the recording's answer to the challenge proves nothing: the scheduler's
  // nonce is new. It is refused as unauthenticated and nobody else joins.
  int fd = testing::DialLoopback(server_->port());
  ASSERT_TRUE(testing::SendAll(fd, recording));
  auto [type, payload] = testing::ReadFrame(fd);
  EXPECT_EQ(type, static_cast<int>(rpc::FrameType::kChallenge));
  std::tie(type, payload) = testing::ReadFrame(fd);
  ASSERT_EQ(type, static_cast<int>(rpc::FrameType::kRefused));
  v1::SessionRefused refused;
  ASSERT_TRUE(refused.ParseFromString(payload));
  EXPECT_TRUE(refused.unauthenticated());
  EXPECT_TRUE(testing::ClosedByPeer(fd));
  close(fd);
  EXPECT_EQ(Status().nodes_size(), 1);
}

TEST_F(SessionPortTest, AFrameFromAnotherConnectionOrOutOfOrderEndsTheSession) {
  // A sealed frame recorded on one connection, played into another session: forged there.
  SessionClient first(server_->port());
  ASSERT_TRUE(first.Open(Token()).accepted);
  const size_t before = first.sent().size();
  ASSERT_TRUE(first.SendEvent(TestJoin(0)));
  const std::string sealed_join = first.sent().substr(before);
  SessionClient second(server_->port());
  ASSERT_TRUE(second.Open(Token()).accepted);
  ASSERT_TRUE(second.Send(sealed_join));
  EXPECT_TRUE(testing::ClosedByPeer(second.fd()));
  // An event whose sequence number skips one: the session ends.
  SessionClient third(server_->port());
  ASSERT_TRUE(third.Open(Token()).accepted);
  ASSERT_TRUE(third.SendEvent(TestJoin(1), 2));
  EXPECT_TRUE(testing::ClosedByPeer(third.fd()));
  const v1::GetStatusResponse status = Status();
  ASSERT_EQ(status.nodes_size(), 1) << status.DebugString();
  EXPECT_EQ(status.nodes(0).node_name(), "n0");
}

TEST_F(SessionPortTest, AResumeNeedsTheSessionsKeyAndSendsAgainWhatTheNodeMissed) {
  SessionClient client(server_->port());
  const SessionClient::Opened opened = client.Open(Token());
  ASSERT_TRUE(opened.accepted);
  ASSERT_TRUE(client.SendEvent(TestJoin(0)));
  // The job forms with a second node; the first is sent its start.
  SessionClient other(server_->port());
  ASSERT_TRUE(other.Open(Token()).accepted);
  ASSERT_TRUE(other.SendEvent(TestJoin(1)));
  auto start = client.ReadCommand();
  ASSERT_TRUE(start && start->has_start()) << (start ? start->DebugString() : "nothing");
  // A resume with the token instead of the session's key is refused.
  SessionClient thief(server_->port());
  const SessionClient::Opened stolen = thief.Open(Token(), opened.session, rpc::TokenKey(Token()));
  EXPECT_FALSE(stolen.accepted);
  EXPECT_TRUE(stolen.refused.unauthenticated());
  // A resume with the key on a new connection: the scheduler has the join (acked 1) and sends
  // the start again, since the node acknowledged nothing.
  SessionClient resumed(server_->port());
  const SessionClient::Opened again = resumed.Open(Token(), opened.session, opened.key, 0);
  ASSERT_TRUE(again.accepted) << again.refused.reason();
  EXPECT_EQ(again.session, opened.session);
  EXPECT_EQ(again.acked, 1u);
  auto repeated = resumed.ReadCommand();
  ASSERT_TRUE(repeated && repeated->has_start());
  EXPECT_EQ(repeated->seq(), start->seq());
  // The old connection is the session's no longer: the scheduler dropped it.
  EXPECT_TRUE(testing::ClosedByPeer(client.fd()));
  EXPECT_EQ(Status().nodes_size(), 2);
  // An unknown session is refused as such.
  SessionClient stranger(server_->port());
  const SessionClient::Opened unknown = stranger.Open(Token(), 12345, opened.key);
  EXPECT_FALSE(unknown.accepted);
  EXPECT_TRUE(unknown.refused.unknown_session());
}

TEST_F(SessionPortTest, StrangersAndMalformedFramesAreClosedAndHarmNobody) {
  v1::SessionHello hello;
  hello.set_nonce(std::string(rpc::kNonceBytes, 'n'));
  const std::string opening =
      std::string(rpc::kSessionMagic) + testing::Frame(rpc::FrameType::kHello, hello);
  std::vector<std::string> hostile = {
      "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
      // TLS on a plaintext port.
      "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
      // A hello announcing 8 MiB: more than a handshake frame may carry, closed at the header.
      std::string(rpc::kSessionMagic) + std::string("\x00\x80\x00\x00\x01", 5),
      // An unknown frame type.
      std::string(rpc::kSessionMagic) + std::string("\x00\x00\x00\x00\x63", 5),
      // A hello that is not one, and a nonce of the wrong size.
      std::string(rpc::kSessionMagic) + std::string("\x00\x00\x00\x03\x01\xff\xff\xff", 8),
      std::string(rpc::kSessionMagic) + std::string("\x00\x00\x00\x03\x01\x0a\x01x", 8),
      // An event before the handshake.
      std::string(rpc::kSessionMagic) + testing::Frame(rpc::FrameType::kEvent, TestJoin(0)),
      // A hello, then an open whose proof is garbage (refused, then closed).
      opening + testing::Frame(rpc::FrameType::kOpen, v1::SessionOpen()),
  };
  for (const std::string& bytes : hostile) {
    EXPECT_TRUE(ClosedAfter(bytes)) << ::testing::PrintToString(bytes);
  }
  // A session that forges a frame after its handshake.
  SessionClient forger(server_->port());
  ASSERT_TRUE(forger.Open(Token()).accepted);
  std::string forged;
  rpc::AppendFrame(forged, rpc::FrameType::kEvent,
                   TestJoin(0).SerializeAsString() + std::string(rpc::kTagBytes, 'x'));
  ASSERT_TRUE(forger.Send(forged));
  EXPECT_TRUE(testing::ClosedByPeer(forger.fd()));
  // The scheduler still serves real nodes, which join as the only ones.
  ExpectTwoNodesForm();
}

TEST_F(SessionPortTest, RandomBytesAfterTheMagicOrTheHandshakeHarmNobody) {
  std::mt19937 random(20261201);  // a fixed seed: the same bytes every run
  for (int i = 0; i < 200; ++i) {
    SessionClient client(server_->port());
    ASSERT_TRUE(client.connected());
    if (i % 2 == 0) {
      ASSERT_TRUE(client.Send(rpc::kSessionMagic));
    } else {
      ASSERT_TRUE(client.Open(Token()).accepted);
    }
    std::string bytes;
    const size_t size = random() % 64;
    for (size_t j = 0; j < size; ++j) bytes += static_cast<char>(random() & 0xff);
    ASSERT_TRUE(client.Send(bytes));
    // Whatever the scheduler made of them, it sees the end of the input and closes.
    shutdown(client.fd(), SHUT_WR);
    EXPECT_TRUE(testing::ClosedByPeer(client.fd())) << i;
  }
  ExpectTwoNodesForm();
}

TEST_F(SessionPortTest, FramesArrivingByteByByteAreRead) {
  SessionClient client(server_->port());
  ASSERT_TRUE(client.Open(Token(), 0, "", 0, /*byte_by_byte=*/true).accepted);
  ASSERT_TRUE(client.SendEvent(TestJoin(0), std::nullopt, /*byte_by_byte=*/true));
  ASSERT_TRUE(client.SendPing(0));
  EXPECT_EQ(client.ReadSealed().first, static_cast<int>(rpc::FrameType::kPong));
  const v1::GetStatusResponse status = Status();
  ASSERT_EQ(status.nodes_size(), 1) << status.DebugString();
  EXPECT_EQ(status.nodes(0).node_name(), "n0");
}

TEST_F(SessionPortTest, APeerThatNeverReadsGetsNoQueueOfPongs) {
  SessionClient client(server_->port());
  ASSERT_TRUE(client.Open(Token()).accepted);
  ASSERT_TRUE(client.SendEvent(TestJoin(0)));
  // 200,000 pings (4.6 MB) without reading a byte: a pong is only queued when nothing waits,
  // so whatever the kernel's buffers take, the scheduler holds at most one.
  for (int i = 0; i < 200000; ++i) {
    ASSERT_TRUE(client.SendPing(0));
  }
  int pongs = 0;
  shutdown(client.fd(), SHUT_WR);
  while (true) {
    auto [type, body] = client.ReadSealed();
    if (type == 0) break;
    pongs += type == static_cast<int>(rpc::FrameType::kPong);
  }
  EXPECT_GT(pongs, 0);
  EXPECT_LE(pongs, 200000);
  ExpectTwoNodesForm();
}

TEST_F(SessionPortTest, ATickOutsideAQuietSessionEndsIt) {
  SessionClient client(server_->port());
  client.CanKeepQuiet();  // the port's first 64 sessions are loud all the same
  const SessionClient::Opened opened = client.Open(Token());
  ASSERT_TRUE(opened.accepted);
  EXPECT_EQ(opened.quiet_watermark, 0u);
  ASSERT_TRUE(client.SendTick());
  EXPECT_TRUE(testing::ClosedByPeer(client.fd()));
}

// Every session keeps quiet (docs/WIRE.md): the scheduler's socket wakes it only once
// rpc::kQuietWatermark bytes wait.
class QuietSessionPortTest : public SessionPortTest {
 protected:
  size_t LoudSessions() const override { return 0; }
  // Once the scheduler's loop has turned twice (so that it has seen whatever the kernel could
  // wake it for): the bytes unread on the scheduler's end of each connection to its port,
  // by the connection's remote port.
  std::map<int, int> UnreadAtScheduler() {
    for (int turn = 0; turn < 2; ++turn) {
      std::promise<void> turned;
      boost::asio::post(io_, [&turned] { turned.set_value(); });
      turned.get_future().wait();
    }
    std::map<int, int> unread;
    DIR* fds = opendir("/proc/self/fd");
    while (dirent* entry = fds != nullptr ? readdir(fds) : nullptr) {
      const int fd = atoi(entry->d_name);
      sockaddr_in local{}, remote{};
      socklen_t length = sizeof(local);
      if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0 ||
          local.sin_family != AF_INET || ntohs(local.sin_port) != server_->port()) {
        continue;
      }
      length = sizeof(remote);
      int bytes = 0;
      if (getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &length) == 0 &&
          ioctl(fd, FIONREAD, &bytes) == 0) {
        unread[ntohs(remote.sin_port)] = bytes;
      }
    }
    if (fds != nullptr) closedir(fds);
    return unread;
  }
  static int LocalPort(int fd) {
    sockaddr_in local{};
    socklen_t length = sizeof(local);
    getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length);
    return ntohs(local.sin_port);
  }
};

TEST_F(QuietSessionPortTest, TicksAndEventsStayUnreadUntilThePaddedPingAfterThem) {
  SessionClient client(server_->port());
  client.CanKeepQuiet();
  const SessionClient::Opened opened = client.Open(Token());
  ASSERT_TRUE(opened.accepted);
  EXPECT_EQ(opened.quiet_watermark, rpc::kQuietWatermark);
  EXPECT_EQ(opened.quiet_pong_timeout_ms, 360000u);  // 3 Heartbeat messages, 2 node timeouts apart
  // Once the scheduler is done with the handshake: the read it starts after a frame takes
  // whatever is there, below the watermark or not.
  const int port = LocalPort(client.fd());
  EXPECT_EQ(UnreadAtScheduler()[port], 0);
  const size_t before = client.sent().size();
  ASSERT_TRUE(client.SendEvent(TestJoin(0)));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client.SendTick());
  const int waiting = static_cast<int>(client.sent().size() - before);
  ASSERT_LT(waiting, static_cast<int>(rpc::kQuietWatermark));
  EXPECT_EQ(UnreadAtScheduler()[port], waiting);
  ASSERT_TRUE(client.SendPing(0, true, rpc::kQuietWatermark));
  EXPECT_EQ(NextPong(client), 1u);  // the join was read, and the ticks before it
  EXPECT_EQ(UnreadAtScheduler()[port], 0);
  EXPECT_EQ(Status().nodes_size(), 1);
}

TEST_F(QuietSessionPortTest, ATickAddedOnTheWayFailsTheNextSealedFrame) {
  SessionClient client(server_->port());
  client.CanKeepQuiet();
  ASSERT_TRUE(client.Open(Token()).accepted);
  ASSERT_TRUE(client.SendTick());
  ASSERT_TRUE(client.SendTick(false));  // one the node did not send
  ASSERT_TRUE(client.SendPing(0, true, rpc::kQuietWatermark));
  EXPECT_TRUE(testing::ClosedByPeer(client.fd()));
}

TEST_F(QuietSessionPortTest, RealNodesPadTheirEventsAndLeaveTheirTicksUnread) {
  ExpectTwoNodesForm();  // their joins woke the scheduler: padded
  // A tick a second (the default heartbeat interval) on each node's connection; three of
  // them unread at once (a tick read as it came leaves at most one) say it keeps quiet.
  const auto deadline = std::chrono::steady_clock::now() + seconds(20);
  int quiet = 0;
  while (quiet < 2 && std::chrono::steady_clock::now() < deadline) {
    quiet = 0;
    for (const auto& [port, bytes] : UnreadAtScheduler()) quiet += bytes >= 15 ? 1 : 0;
  }
  EXPECT_EQ(quiet, 2);
}

class TokenlessSessionPortTest : public SessionPortTest {
 protected:
  std::string Token() const override { return ""; }
};

TEST_F(TokenlessSessionPortTest, ALauncherWithATokenIsRefusedByAJobWithout) {
  const auto [reason, unauthenticated] = WaitLost(Link("mine", TestJoin(0)));
  EXPECT_TRUE(unauthenticated) << reason;
  EXPECT_NE(reason.find("has no token, but this launcher has one"), std::string::npos) << reason;
  // The scheduler refuses it too when the launcher says it has one.
  SessionClient client(server_->port());
  const SessionClient::Opened opened = client.Open("mine");
  EXPECT_FALSE(opened.accepted);
  EXPECT_TRUE(opened.refused.unauthenticated()) << opened.refused.reason();
  EXPECT_EQ(Status().nodes_size(), 0);
  // Launchers without a token join.
  ExpectTwoNodesForm();
}

}  // namespace
}  // namespace gangrun::scheduler
