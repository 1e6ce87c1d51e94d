// A node's session connection (node/tcp_link.h) against an impostor: a server that speaks the
// session protocol but does not hold the job's token, and accepts whatever the node proves. The
// node proves itself first, so it must not take an acceptance the impostor cannot prove.

#include "node/tcp_link.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <future>
#include <thread>

#include "common/clock.h"
#include "node/session_link.h"
#include "tests/testing/session_client.h"

namespace gangrun::node {
namespace {

using std::chrono::seconds;

// A listening socket on 127.0.0.1 and its port.
std::pair<int, int> ListenLoopback() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(fd, 4) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    return {-1, 0};
  }
  return {fd, ntohs(address.sin_port)};
}

// The impostor's side of one connection, as a real scheduler's but with `its_token`: reads
// the magic and the hello, challenges, reads the node's proof without checking it, and accepts
// with its own proof, sealed with its own key. Whether it got that far.
bool Impersonate(int listener, const std::string& its_token) {
  const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return false;
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  char magic[4];
  v1::SessionHello hello;
  const bool greeted = recv(fd, magic, sizeof(magic), MSG_WAITALL) == sizeof(magic) && [&] {
    auto [type, payload] = testing::ReadFrame(fd);
    return type == static_cast<int>(rpc::FrameType::kHello) && hello.ParseFromString(payload);
  }();
  rpc::Handshake handshake;
  handshake.node_nonce = hello.nonce();
  handshake.scheduler_nonce = rpc::RandomBytes(rpc::kNonceBytes);
  handshake.run_id = "job-a";
  v1::SessionChallenge challenge;
  challenge.set_nonce(handshake.scheduler_nonce);
  challenge.set_run_id(handshake.run_id);
  challenge.set_token_required(true);
  const bool opened = greeted &&
                      testing::SendAll(fd, testing::Frame(rpc::FrameType::kChallenge, challenge)) &&
                      testing::ReadFrame(fd).first == static_cast<int>(rpc::FrameType::kOpen);
  if (opened) {
    const std::string key = rpc::TokenKey(its_token);
    v1::SessionAccepted accepted;
    accepted.set_proof(rpc::SchedulerProof(key, handshake));
    accepted.set_session(7);
    rpc::FrameSealer sealer(rpc::DeriveFrameKeys(key, handshake).scheduler_to_node);
    const std::string body = sealer.Seal(rpc::FrameType::kAccepted, accepted.SerializeAsString());
    std::string frame(4, '\0');
    for (int i = 3, length = static_cast<int>(body.size()); i >= 0; --i, length >>= 8) {
      frame[i] = static_cast<char>(length & 0xff);
    }
    frame += static_cast<char>(rpc::FrameType::kAccepted);
    testing::SendAll(fd, frame + body);
  }
  testing::ClosedByPeer(fd);  // until the node leaves
  close(fd);
  return opened;
}

TEST(TcpLinkTest, AnImpostorWithoutTheTokenIsNotBelievedWhenItAccepts) {
  auto [listener, port] = ListenLoopback();
  ASSERT_GE(listener, 0);
  auto impostor = std::async(std::launch::async, [listener = listener] {
    return Impersonate(listener, "not-the-jobs-token");
  });
  boost::asio::io_context io;
  common::AsioClock clock(io.get_executor());
  std::promise<std::pair<std::string, bool>> lost;
  bool commanded = false;
  std::unique_ptr<SessionLink> link;
  boost::asio::post(io, [&] {
    TcpSessionConnection::Options tcp;
    tcp.target = "127.0.0.1:" + std::to_string(port);
    tcp.token = "the-jobs-token";
    SessionLink::Options options;
    options.target = tcp.target;
    link = std::make_unique<SessionLink>(clock, options, TcpSessionConnection::Factory(io, tcp));
    link->Connect([&](const v1::NodeCommand&) { commanded = true; },
                  [&](const std::string& reason, bool unauthenticated) {
                    lost.set_value({reason, unauthenticated});
                    boost::asio::post(io, [&] {
                      link.reset();
                      io.stop();
                    });
                  });
    link->Send(testing::TestJoin(0));
  });
  auto outcome = lost.get_future();
  std::thread runner([&] { io.run_for(seconds(20)); });
  ASSERT_EQ(outcome.wait_for(seconds(20)), std::future_status::ready);
  runner.join();
  EXPECT_TRUE(impostor.get()) << "the impostor did not get as far as accepting";
  const auto [reason, unauthenticated] = outcome.get();
  EXPECT_TRUE(unauthenticated) << reason;
  EXPECT_NE(reason.find("does not know this launcher's token"), std::string::npos) << reason;
  EXPECT_FALSE(commanded);
  close(listener);
}

}  // namespace
}  // namespace gangrun::node
