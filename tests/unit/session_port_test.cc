// A node's session on gangrun's own framing (rpc/frames.h): the scheduler's SessionPort and
// the node's TcpSchedulerLink against each other and against hostile or broken peers, on
// 127.0.0.1.

#include "scheduler/session_port.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <cstdlib>
#include <future>
#include <random>
#include <thread>

#include "common/clock.h"
#include "common/net.h"
#include "gangrun/v1/session.grpc.pb.h"
#include "node/tcp_link.h"
#include "rpc/channel.h"
#include "rpc/frames.h"
#include "scheduler/grpc_server.h"
#include "tests/testing/scheduler_server_fixture.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(SessionOpeningTest, TheFirstBytesSayWhatAConnectionIs) {
  EXPECT_EQ(ClassifyOpening(""), Opening::kIncomplete);
  EXPECT_EQ(ClassifyOpening("G"), Opening::kIncomplete);
  EXPECT_EQ(ClassifyOpening("GRS1"), Opening::kSession);
  EXPECT_EQ(ClassifyOpening(std::string("GRS1\0\0\0\2\1", 9)), Opening::kSession);
  EXPECT_EQ(ClassifyOpening("PRI * HTTP/2.0\r\n"), Opening::kIncomplete);
  EXPECT_EQ(ClassifyOpening("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), Opening::kHttp2);
  EXPECT_EQ(ClassifyOpening("GET / HTTP/1.1\r\n"), Opening::kUnknown);
  EXPECT_EQ(ClassifyOpening("\x16\x03\x01\x02\x00"), Opening::kUnknown);  // a TLS ClientHello
  EXPECT_EQ(ClassifyOpening("GRX"), Opening::kUnknown);
}

// A blocking TCP client with a 10 s receive timeout (a broken server fails the test, it does
// not hang it).
int Dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// True when the peer closes the connection (reads EOF or a reset) within the receive timeout;
// anything it sends first is skipped.
bool ClosedByPeer(int fd) {
  char buffer[256];
  while (true) {
    ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

// Reads one frame: its type and payload; type 0 when the connection ended first.
std::pair<int, std::string> ReadFrame(int fd) {
  auto read_exactly = [fd](char* to, size_t size) {
    while (size > 0) {
      ssize_t n = recv(fd, to, size, 0);
      if (n <= 0) return false;
      to += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  };
  unsigned char header[rpc::kFrameHeaderBytes];
  if (!read_exactly(reinterpret_cast<char*>(header), sizeof(header))) return {0, ""};
  const size_t length = (size_t{header[0]} << 24) | (size_t{header[1]} << 16) |
                        (size_t{header[2]} << 8) | size_t{header[3]};
  std::string payload(length, '\0');
  if (!read_exactly(payload.data(), length)) return {0, ""};
  return {header[4], payload};
}

std::string Frame(rpc::FrameType type, const google::protobuf::MessageLite* message = nullptr) {
  std::string out;
  rpc::AppendFrame(out, type, message);
  return out;
}

std::string Opening(const std::string& token) {
  v1::SessionOpen open;
  open.set_token(token);
  return std::string(rpc::kSessionMagic) + Frame(rpc::FrameType::kOpen, &open);
}

v1::NodeEvent Join(int node_rank) {
  v1::NodeEvent join;
  join.mutable_join()->set_node_name("n" + std::to_string(node_rank));
  join.mutable_join()->set_host_address("127.0.0.1");
  join.mutable_join()->set_free_port(40000 + node_rank);
  join.mutable_join()->set_local_worker_num(1);
  join.mutable_join()->set_node_rank(node_rank);
  return join;
}

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
      node::TcpSchedulerLink::Options options;
      options.target = Target();
      options.token = token;
      auto link = std::make_unique<node::TcpSchedulerLink>(io_, options);
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
  // Two nodes with the token join, and each gets its part of a 2-worker job.
  void ExpectTwoNodesForm() {
    Outcome& a = Link(kToken, Join(0));
    Outcome& b = Link(kToken, Join(1));
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
    int fd = Dial(server_->port());
    if (fd < 0 || !SendAll(fd, bytes)) return false;
    if (end_of_input) shutdown(fd, SHUT_WR);
    const bool closed = ClosedByPeer(fd);
    close(fd);
    return closed;
  }
  v1::GetStatusResponse Status() {
    auto stub = v1::Scheduler::NewStub(
        rpc::MakeChannel(Target(), nullptr, "", std::chrono::seconds(30)));
    grpc::ClientContext context;
    rpc::AddToken(context, kToken);
    v1::GetStatusResponse status;
    EXPECT_TRUE(stub->GetStatus(&context, {}, &status).ok());
    return status;
  }

  std::vector<std::unique_ptr<Outcome>> outcomes_;
  std::vector<std::unique_ptr<node::TcpSchedulerLink>> links_;  // on the io_context
};

TEST_F(SessionPortTest, NodesJoinOverTheSessionFramingAndGrpcSharesThePort) {
  ExpectTwoNodesForm();
  // gRPC calls on the same port are handed to the gRPC server.
  const v1::GetStatusResponse status = Status();
  EXPECT_EQ(status.phase(), v1::JOB_PHASE_RUNNING) << status.DebugString();
}

TEST_F(SessionPortTest, AWrongTokenIsRefusedAsUnauthenticated) {
  auto& intruder = Link("guess", Join(0));
  auto lost = intruder.lost.get_future();
  ASSERT_EQ(lost.wait_for(seconds(20)), std::future_status::ready);
  const auto [reason, unauthenticated] = lost.get();
  EXPECT_TRUE(unauthenticated) << reason;
  EXPECT_NE(reason.find("token"), std::string::npos) << reason;
  EXPECT_EQ(Status().nodes_size(), 0);
}

TEST_F(SessionPortTest, StrangersAndMalformedFramesAreClosedAndHarmNobody) {
  std::vector<std::string> hostile = {
      "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
      "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
      // A frame larger than the limit, announced in the header.
      std::string(rpc::kSessionMagic) + std::string("\x01\x00\x00\x01\x01", 5),
      // An unknown frame type.
      std::string(rpc::kSessionMagic) + std::string("\x00\x00\x00\x00\x63", 5),
      // The session opens, then an event that is not a NodeEvent.
      Opening(kToken) + std::string("\x00\x00\x00\x03\x04\xff\xff\xff", 8),
  };
  // An event before the session is open.
  const v1::NodeEvent join = Join(0);
  hostile.push_back(std::string(rpc::kSessionMagic) + Frame(rpc::FrameType::kEvent, &join));
  for (const std::string& bytes : hostile) {
    EXPECT_TRUE(ClosedAfter(bytes)) << ::testing::PrintToString(bytes);
  }
  // The scheduler still serves real nodes, which join as the only ones.
  ExpectTwoNodesForm();
}

TEST_F(SessionPortTest, RandomBytesAfterTheMagicOrTheOpeningHarmNobody) {
  std::mt19937 random(20261201);  // a fixed seed: the same bytes every run
  for (int i = 0; i < 200; ++i) {
    std::string bytes = i % 2 == 0 ? std::string(rpc::kSessionMagic) : Opening(kToken);
    const size_t size = random() % 64;
    for (size_t j = 0; j < size; ++j) bytes += static_cast<char>(random() & 0xff);
    // Whatever the scheduler made of them, it sees the end of the input and closes.
    EXPECT_TRUE(ClosedAfter(bytes, true)) << i;
  }
  ExpectTwoNodesForm();
}

TEST_F(SessionPortTest, FramesArrivingByteByByteAreRead) {
  int fd = Dial(server_->port());
  ASSERT_GE(fd, 0);
  const v1::NodeEvent join = Join(0);
  const std::string bytes =
      Opening(kToken) + Frame(rpc::FrameType::kEvent, &join) + Frame(rpc::FrameType::kPing);
  for (char byte : bytes) ASSERT_TRUE(SendAll(fd, std::string_view(&byte, 1)));
  EXPECT_EQ(ReadFrame(fd).first, static_cast<int>(rpc::FrameType::kAccepted));
  EXPECT_EQ(ReadFrame(fd).first, static_cast<int>(rpc::FrameType::kPong));
  const v1::GetStatusResponse status = Status();
  ASSERT_EQ(status.nodes_size(), 1) << status.DebugString();
  EXPECT_EQ(status.nodes(0).node_name(), "n0");
  close(fd);
}

// A server socket on 127.0.0.1 that the test drives by hand.
class FakeScheduler {
 public:
  FakeScheduler() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;  // as every server's: its port is free again as soon as it closes
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    listen(fd_, 8);
    socklen_t size = sizeof(address);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size);
    port_ = ntohs(address.sin_port);
  }
  ~FakeScheduler() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  int port() const { return port_; }
  int Accept() {
    int fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    timeval timeout{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    return fd;
  }

 private:
  int fd_;
  int port_ = 0;
};

class TcpSchedulerLinkTest : public ::testing::Test {
 protected:
  ~TcpSchedulerLinkTest() override {
    boost::asio::post(io_, [this] {
      link_.reset();
      guard_.reset();
    });
    if (thread_.joinable()) thread_.join();
  }
  // Connects a link to `port` on the io_context; returns the future of its loss.
  std::future<std::pair<std::string, bool>> Connect(int port, milliseconds keepalive,
                                                    milliseconds keepalive_timeout) {
    auto lost = std::make_shared<std::promise<std::pair<std::string, bool>>>();
    auto future = lost->get_future();
    boost::asio::post(io_, [this, port, keepalive, keepalive_timeout, lost] {
      node::TcpSchedulerLink::Options options;
      options.target = "127.0.0.1:" + std::to_string(port);
      options.keepalive = keepalive;
      options.keepalive_timeout = keepalive_timeout;
      link_ = std::make_unique<node::TcpSchedulerLink>(io_, options);
      link_->Connect(
          [this](const v1::NodeCommand& command) {
            if (commands_seen_++ == 0) commands_.set_value(command);
          },
                     [lost](const std::string& reason, bool unauthenticated) {
                       lost->set_value({reason, unauthenticated});
                     });
      link_->Send(Join(0));
    });
    thread_ = std::thread([this] { io_.run(); });
    return future;
  }

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_ =
      boost::asio::make_work_guard(io_);
  std::unique_ptr<node::TcpSchedulerLink> link_;
  std::promise<v1::NodeCommand> commands_;  // the first command
  int commands_seen_ = 0;                     // on the io_context
  std::thread thread_;
};

TEST_F(TcpSchedulerLinkTest, ItTriesAgainUntilASchedulerAcceptsItsSession) {
  FakeScheduler fake;
  const int port = fake.port();
  auto lost = Connect(port, milliseconds(1000), milliseconds(4000));
  // A first try ends before any session (a scheduler still starting, say); then nothing
  // listens for a while.
  int fd = fake.Accept();
  ASSERT_GE(fd, 0);
  close(fd);
  fake.Close();
  // Then the scheduler starts, on its own io_context.
  boost::asio::io_context io;
  common::AsioClock clock(io.get_executor());
  Scheduler::Options options;
  options.world_size = 1;
  Scheduler scheduler(clock, options);
  KvStore store(clock);
  auto server = SchedulerServer::Start(io, scheduler, store,
                                       {"127.0.0.1:" + std::to_string(port), "", nullptr});
  ASSERT_TRUE(server.ok()) << server.status();
  boost::asio::post(io, [&] { scheduler.Start(); });
  auto guard = boost::asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  auto command = commands_.get_future();
  EXPECT_EQ(command.wait_for(seconds(20)), std::future_status::ready);
  if (command.valid() && command.wait_for(seconds(0)) == std::future_status::ready) {
    EXPECT_TRUE(command.get().has_start());
  }
  boost::asio::post(io, [&] {
    store.CancelAll();
    (*server)->ShutdownAsync(io, [&] { io.stop(); });  // the scheduler's timers still run
  });
  runner.join();
}

TEST_F(TcpSchedulerLinkTest, ASchedulerThatStopsAnsweringIsLostAfterTheKeepaliveTimeout) {
  FakeScheduler fake;
  auto lost = Connect(fake.port(), milliseconds(50), milliseconds(300));
  int fd = fake.Accept();
  ASSERT_GE(fd, 0);
  // It accepts the session, then never answers a ping.
  char opening[rpc::kSessionMagic.size()];
  ASSERT_EQ(recv(fd, opening, sizeof(opening), MSG_WAITALL), ssize_t(sizeof(opening)));
  EXPECT_EQ(ReadFrame(fd).first, static_cast<int>(rpc::FrameType::kOpen));
  ASSERT_TRUE(SendAll(fd, Frame(rpc::FrameType::kAccepted)));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(lost.wait_for(seconds(20)), std::future_status::ready);
  const auto after = std::chrono::steady_clock::now() - start;
  const auto [reason, unauthenticated] = lost.get();
  EXPECT_NE(reason.find("did not answer for 300 ms"), std::string::npos) << reason;
  EXPECT_FALSE(unauthenticated);
  EXPECT_GE(after, milliseconds(300));
  close(fd);
}

TEST_F(TcpSchedulerLinkTest, APeerThatClosesBeforeAcceptingIsNamedAfterTwoTries) {
  FakeScheduler fake;
  auto lost = Connect(fake.port(), milliseconds(1000), milliseconds(4000));
  for (int i = 0; i < node::TcpSchedulerLink::kMismatchesToGiveUp; ++i) {
    int fd = fake.Accept();
    ASSERT_GE(fd, 0);
    close(fd);  // what a TLS-only server does with a plaintext opening
  }
  ASSERT_EQ(lost.wait_for(seconds(20)), std::future_status::ready);
  const auto [reason, unauthenticated] = lost.get();
  EXPECT_NE(reason.find("expects TLS (or is not a gangrun scheduler)"), std::string::npos)
      << reason;
}

}  // namespace
}  // namespace gangrun::scheduler
