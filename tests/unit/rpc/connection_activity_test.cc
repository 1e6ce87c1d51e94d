// Reading a server's TCP connections from the kernel (sock_diag), and naming gRPC peers the
// same way.

#include "rpc/connection_activity.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace gangrun::rpc {
namespace {

// A listening socket on loopback (any free port), and connections to it.
class Loopback {
 public:
  explicit Loopback(int family) : family_(family) {
    listener_ = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_storage address = Address(0);
    ok_ = listener_ >= 0 && bind(listener_, reinterpret_cast<sockaddr*>(&address), Size()) == 0 &&
          listen(listener_, 8) == 0;
    if (ok_) port_ = LocalPort(listener_);
  }
  ~Loopback() {
    for (int fd : fds_) close(fd);
    if (listener_ >= 0) close(listener_);
  }
  bool ok() const { return ok_; }
  int port() const { return port_; }

  // Connects, accepts and sends `bytes` from the client; the client's port.
  int Connect(const std::string& bytes) {
    const int client = socket(family_, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_storage address = Address(port_);
    EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&address), Size()), 0);
    const int server = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    EXPECT_GE(server, 0);
    EXPECT_EQ(write(client, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    char buffer[64];
    EXPECT_EQ(read(server, buffer, sizeof(buffer)), static_cast<ssize_t>(bytes.size()));
    fds_.push_back(client);
    fds_.push_back(server);
    return LocalPort(client);
  }

 private:
  sockaddr_storage Address(int port) const {
    sockaddr_storage storage = {};
    if (family_ == AF_INET) {
      auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
      v4->sin_family = AF_INET;
      v4->sin_port = htons(static_cast<uint16_t>(port));
      v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else {
      auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(static_cast<uint16_t>(port));
      v6->sin6_addr = in6addr_loopback;
    }
    return storage;
  }
  socklen_t Size() const { return family_ == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6); }
  static int LocalPort(int fd) {
    sockaddr_storage storage = {};
    socklen_t length = sizeof(storage);
    getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length);
    return storage.ss_family == AF_INET
               ? ntohs(reinterpret_cast<sockaddr_in*>(&storage)->sin_port)
               : ntohs(reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port);
  }

  int family_;
  int listener_ = -1;
  int port_ = 0;
  bool ok_ = false;
  std::vector<int> fds_;
};

TEST(ConnectionActivityTest, FindsEveryConnectionToItsPortAndNoOther) {
  Loopback ours(AF_INET), theirs(AF_INET);
  ASSERT_TRUE(ours.ok() && theirs.ok());
  const int first = ours.Connect("ping");
  const int second = ours.Connect("ping");
  theirs.Connect("other");
  ConnectionActivityReader reader(ours.port());
  auto activity = reader.Read();
  ASSERT_TRUE(activity.ok()) << activity.status();
  ASSERT_EQ(activity->size(), 2u);
  for (int port : {first, second}) {
    auto found = activity->find("127.0.0.1:" + std::to_string(port));
    ASSERT_NE(found, activity->end()) << port;
    // Data came a moment ago (the kernel counts in milliseconds since the last data).
    EXPECT_GE(found->second, common::Duration::zero());
    EXPECT_LT(found->second, std::chrono::seconds(60));
  }
  // The reader reads again (it keeps its socket), and a connection made since is found.
  const int third = ours.Connect("ping");
  auto again = reader.Read();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->size(), 3u);
  EXPECT_EQ(again->count("127.0.0.1:" + std::to_string(third)), 1u);
}

TEST(ConnectionActivityTest, IPv6ConnectionsAreNamedWithBrackets) {
  Loopback v6(AF_INET6);
  if (!v6.ok()) GTEST_SKIP() << "no IPv6 loopback here";
  const int client = v6.Connect("ping");
  auto activity = ConnectionActivityReader(v6.port()).Read();
  ASSERT_TRUE(activity.ok()) << activity.status();
  EXPECT_EQ(activity->count("[::1]:" + std::to_string(client)), 1u);
}

TEST(ConnectionActivityTest, NotAPortIsRefused) {
  EXPECT_FALSE(ConnectionActivityReader(0).Read().ok());
  EXPECT_FALSE(ConnectionActivityReader(70000).Read().ok());
}

TEST(ConnectionActivityTest, GrpcPeersAreNamedAsTheKernelNamesThem) {
  EXPECT_EQ(PeerEndpoint("ipv4:10.0.0.2:41234"), "10.0.0.2:41234");
  EXPECT_EQ(PeerEndpoint("ipv6:[::1]:41234"), "[::1]:41234");
  EXPECT_EQ(PeerEndpoint("ipv6:%5B::1%5D:41234"), "[::1]:41234");
  EXPECT_EQ(PeerEndpoint("ipv6:[0:0:0:0:0:0:0:1]:80"), "[::1]:80");
  EXPECT_EQ(PeerEndpoint("ipv6:[::ffff:127.0.0.1]:80"), "127.0.0.1:80");
  EXPECT_EQ(PeerEndpoint("ipv6:[fe80::1%25eth0]:7"), "[fe80::1]:7");
  for (const char* bad :
       {"", "unix:/tmp/s", "ipv4:10.0.0.2", "ipv4:10.0.0.2:0", "ipv4:10.0.0.2:65536",
        "ipv4:10.0.0.300:80", "ipv6:[::1:80", "ipv4::80", "in-process", "ipv4:10.0.0.2:8x"}) {
    EXPECT_EQ(PeerEndpoint(bad), "") << bad;
  }
}

}  // namespace
}  // namespace gangrun::rpc
