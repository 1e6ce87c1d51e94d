// Connections that never speak: they are closed, and they lock nobody out.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>

#include "common/net.h"
#include "tests/integration/launcher_fixture.h"

namespace gangrun::testing {
namespace {

using std::chrono::seconds;

// A TCP connection to 127.0.0.1:port that sends nothing; -1 if it could not connect.
int IdleConnection(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{5, 0};  // a connect into a full backlog fails instead of hanging the test
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

class ConnectionsTest : public LauncherTest {
 protected:
  ~ConnectionsTest() override {
    for (int fd : idle_) close(fd);
  }
  void OpenIdle(int port, int count) {
    for (int i = 0; i < count; ++i) {
      int fd = IdleConnection(port);
      ASSERT_GE(fd, 0) << "connection " << i;
      idle_.push_back(fd);
    }
  }
  // Waits until the peer has closed every idle connection; returns how many it has not.
  size_t WaitAllClosedByPeer(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<int> open = idle_;
    while (!open.empty()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      std::vector<pollfd> fds;
      for (int fd : open) fds.push_back({fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), static_cast<int>(left.count())) <= 0) break;
      open.clear();
      for (const auto& p : fds) {
        char byte;
        if (p.revents == 0 || recv(p.fd, &byte, 1, MSG_DONTWAIT) > 0) open.push_back(p.fd);
      }
    }
    return open.size();
  }
  std::vector<int> idle_;
};

TEST_F(ConnectionsTest, IdleConnectionsAreClosedAndTheJobStillForms) {
  const int port = common::PickFreePort("127.0.0.1", {}).value_or(0);
  auto node = [&](const std::string& rank) {
    std::vector<std::string> argv = {GangrunBinary(),
                                     "--worker_num",
                                     "2",
                                     "--local_worker_num",
                                     "1",
                                     "--node_rank",
                                     rank,
                                     "--master_port",
                                     std::to_string(port),
                                     TestWorkerBinary()};
    return Launch(argv, {"GANGRUN_HANDSHAKE_TIMEOUT_MS=500"}, dir_.path(), dir_.path());
  };
  auto master = node("0");
  ASSERT_TRUE(WaitForStderr(master, "waiting for 1 of 2", seconds(20))) << master.Stderr();
  OpenIdle(port, 300);
  // Each one that never finishes its handshake is closed by the scheduler: our end reads EOF.
  EXPECT_EQ(WaitAllClosedByPeer(seconds(20)), 0u) << "connections still open";
  auto other = node("1");
  EXPECT_EQ(RunToEnd(other).code, 0) << other.Stderr();
  EXPECT_EQ(RunToEnd(master).code, 0) << master.Stderr();
}

TEST_F(ConnectionsTest, IdleConnectionsDoNotLockScrapersOutOfTheMetricsPort) {
  // With 128 descriptors, 200 idle connections would exhaust the launcher if it held them all.
  auto launched =
      Launch({"/usr/bin/prlimit", "--nofile=128:128", GangrunBinary(), "--worker_num", "1",
              "--local_worker_num", "1", "--metrics_port", "0", TestWorkerBinary(), "--hang"},
             {}, dir_.path(), dir_.path());
  ASSERT_TRUE(WaitForStderr(launched, "/metrics", seconds(20))) << launched.Stderr();
  std::smatch match;
  const std::string err = launched.Stderr();
  ASSERT_TRUE(std::regex_search(err, match, std::regex(":(\\d+)/metrics")));
  const int port = std::stoi(match[1]);
  OpenIdle(port, 200);  // more than the 64 the endpoint serves at once
  int scrape = IdleConnection(port);
  ASSERT_GE(scrape, 0);
  timeval timeout{10, 0};  // a launcher that never answers fails the test instead of hanging it
  setsockopt(scrape, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(write(scrape, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = read(scrape, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
  close(scrape);
  EXPECT_EQ(response.rfind("HTTP/1.1 200 OK", 0), 0u) << response.substr(0, 200);
  EXPECT_NE(response.find("gangrun_job_phase"), std::string::npos);
  kill(launched.pid, SIGTERM);
  EXPECT_EQ(RunToEnd(launched).code, 128 + SIGTERM);
}

}  // namespace
}  // namespace gangrun::testing
