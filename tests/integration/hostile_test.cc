// Hostile peers against a real master launcher: connections that prove nothing cost it a small
// bounded amount each, within a bounded number, and the job's real nodes still get in.

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <vector>

#include "tests/integration/launcher_fixture.h"
#include "tests/testing/session_client.h"

namespace gangrun::testing {
namespace {

using std::chrono::seconds;

constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr std::string_view kEmptySettings =
    std::string_view("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9);

class HostileTest : public LauncherTest {
 protected:
  void SetUp() override {
    rlimit limit;
    getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = limit.rlim_max;  // the attacker needs more descriptors than the master
    setrlimit(RLIMIT_NOFILE, &limit);
    port_ = FreePort();
  }
  void TearDown() override {
    for (int fd : fds_) close(fd);
    LauncherTest::TearDown();
  }
  std::vector<std::string> Job(const std::string& rank) {
    return {GangrunBinary(), "--worker_num", "2",  "--local_worker_num", "1",  "--master_port",
            port_,           "--node_rank",  rank, "--cluster_time_out", "60", TestWorkerBinary()};
  }
  // Opens `count` connections that each send `bytes` and then nothing.
  void Open(int count, std::string_view bytes) {
    for (int i = 0; i < count; ++i) {
      int fd = DialLoopback(std::stoi(port_));
      ASSERT_GE(fd, 0) << "connection " << i;
      ASSERT_TRUE(SendAll(fd, bytes));
      fds_.push_back(fd);
    }
  }
  // A real handshake after them: the master's accept loop has handled every earlier one. It
  // may wait that long: 1,100 connections handed to gRPC take ~10 s under ThreadSanitizer.
  void RoundTrip() {
    SessionClient client(std::stoi(port_), seconds(60));
    EXPECT_TRUE(client.connected());
    EXPECT_TRUE(client.Open("").accepted);
  }

  std::string port_;
  std::vector<int> fds_;
};

TEST_F(HostileTest, FiveHundredConnectionsThatProveNothingCostUnder64MiB) {
  auto master = Launch(Job("0"), {}, dir_.path(), dir_.path());
  ASSERT_TRUE(WaitForStderr(master, "waiting for 1 of 2", seconds(20))) << master.Stderr();
  RoundTrip();
  const long idle = ProcStatusKiB(master.pid, "VmRSS");
  // Session openings whose first frame announces its largest handshake size and stops, and
  // HTTP/2 prefaces with an empty SETTINGS frame: 250 of each.
  const std::string hello = std::string("GRS2") + std::string("\x00\x00\x04\x00\x01", 5) + "x";
  Open(250, hello);
  Open(250, std::string(kHttp2Preface) + std::string(kEmptySettings));
  RoundTrip();
  const long loaded = ProcStatusKiB(master.pid, "VmRSS");
  std::printf("master resident memory: %ld KiB idle, %ld KiB with 500 connections\n", idle, loaded);
  EXPECT_LT(loaded - idle, 64 * 1024)
      << "idle " << idle << " KiB, with 500 connections " << loaded << " KiB";
  // The job's real node still joins.
  auto node = Launch(Job("1"), {}, dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(node).code, 0) << node.Stderr();
  EXPECT_EQ(RunToEnd(master).code, 0) << master.Stderr();
}

// Sessions that open (a job without a token lets anyone) and then send the start of a large
// frame instead of a join: until the scheduler answers a join, a frame is bounded by
// kMaxJoinPayload (64 KiB), so 500 of them cost the master under 64 MiB (each could hold 8 MiB
// before), a frame announcing more ends its connection at the header, and the real node joins.
TEST_F(HostileTest, FiveHundredOpenedSessionsThatNeverJoinCostUnder64MiB) {
  auto master = Launch(Job("0"), {}, dir_.path(), dir_.path());
  ASSERT_TRUE(WaitForStderr(master, "waiting for 1 of 2", seconds(20))) << master.Stderr();
  RoundTrip();
  const long idle = ProcStatusKiB(master.pid, "VmRSS");
  auto header = [](uint32_t length) {
    std::string bytes(4, '\0');
    for (int i = 3; i >= 0; --i, length >>= 8) bytes[i] = static_cast<char>(length & 0xff);
    return bytes + static_cast<char>(rpc::FrameType::kEvent);
  };
  std::vector<std::unique_ptr<SessionClient>> sessions;
  const std::string partial =
      header(rpc::kMaxJoinPayload) + std::string(rpc::kMaxJoinPayload - 1, 'x');
  for (int i = 0; i < 500; ++i) {
    auto client = std::make_unique<SessionClient>(std::stoi(port_), seconds(60));
    ASSERT_TRUE(client->connected()) << "session " << i;
    ASSERT_TRUE(client->Open("").accepted) << "session " << i;
    ASSERT_TRUE(client->Send(partial)) << "session " << i;
    sessions.push_back(std::move(client));
  }
  RoundTrip();
  const long loaded = ProcStatusKiB(master.pid, "VmRSS");
  std::printf("master resident memory: %ld KiB idle, %ld KiB with 500 opened sessions\n", idle,
              loaded);
  if (kMemoryIsMeasurable) {
    EXPECT_LT(loaded - idle, 64 * 1024)
        << "idle " << idle << " KiB, with 500 opened sessions " << loaded << " KiB";
  }
  // A frame announcing 8 MiB before the join is answered ends its connection at once.
  SessionClient big(std::stoi(port_), seconds(10));
  ASSERT_TRUE(big.Open("").accepted);
  ASSERT_TRUE(big.Send(header(rpc::kMaxFramePayload)));
  EXPECT_TRUE(ClosedByPeer(big.fd()));
  auto node = Launch(Job("1"), {}, dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(node).code, 0) << node.Stderr();
  EXPECT_EQ(RunToEnd(master).code, 0) << master.Stderr();
}

TEST_F(HostileTest, DescriptorsCannotBeExhaustedBeforeAuthentication) {
  // A master with 1,024 descriptors, and 1,100 HTTP/2 connections that say nothing more.
  std::vector<std::string> argv = {"/usr/bin/prlimit", "--nofile=1024:1024"};
  for (const auto& arg : Job("0")) argv.push_back(arg);
  auto master = Launch(argv, {}, dir_.path(), dir_.path());
  ASSERT_TRUE(WaitForStderr(master, "waiting for 1 of 2", seconds(20))) << master.Stderr();
  Open(1100, std::string(kHttp2Preface) + std::string(kEmptySettings));
  RoundTrip();
  auto node = Launch(Job("1"), {}, dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(node).code, 0) << node.Stderr();
  EXPECT_EQ(RunToEnd(master).code, 0) << master.Stderr();
  EXPECT_NE(master.Stderr().find("gRPC connections, its bound"), std::string::npos)
      << master.Stderr();
}

}  // namespace
}  // namespace gangrun::testing
