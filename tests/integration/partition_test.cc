// Partitions between two hosts (network namespaces, tests/testing/netns.h): a cut shorter than
// --node_timeout costs nothing, with and without TLS; a longer one loses the node on both
// sides; a launcher started during a cut joins soon after it heals.

#include <unistd.h>

#include <thread>

#include "tests/integration/launcher_fixture.h"
#include "tests/testing/netns.h"

namespace gangrun::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// --node_timeout 3 s with a heartbeat every 0.5 s: cuts of 2 s and 4 s are 1 s either side.
constexpr int kNodeTimeoutS = 3;

class PartitionTest : public LauncherTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(hosts_.ok()) << "cannot make network namespaces (needs root and iproute2, as "
                                "CI has)";
    port_ = FreePort();
    if (GetParam()) MakeCertificate();
  }
  bool tls() const { return GetParam(); }
  // One CA and one certificate for 10.231.0.1, used by the scheduler and the nodes.
  void MakeCertificate() {
    const std::string d = dir_.path();
    ASSERT_TRUE(Shell(
        "cd " + d +
        " && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 "
        "-subj /CN=gangrun-test-ca"
        " && openssl req -newkey rsa:2048 -nodes -keyout node.key -out node.csr -subj "
        "/CN=10.231.0.1"
        " && printf 'subjectAltName=IP:10.231.0.1\\nextendedKeyUsage=serverAuth,clientAuth\\n' "
        "> ext.cnf"
        " && openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out "
        "node.pem -days 1 -extfile ext.cnf"))
        << "openssl failed";
  }
  // A launcher of a 2-host job with one worker that runs `run_ms`, on host a (node rank 0,
  // the scheduler's) or b.
  Launched Host(bool on_a, int run_ms, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {GangrunBinary(),
                                     "--master_addr",
                                     hosts_.Address(0),
                                     "--worker_num",
                                     "2",
                                     "--local_worker_num",
                                     "1",
                                     "--master_port",
                                     port_,
                                     "--node_rank",
                                     on_a ? "0" : "1",
                                     "--node_timeout",
                                     std::to_string(kNodeTimeoutS),
                                     "--heartbeat_interval",
                                     "0.5",
                                     "--grace_period",
                                     "1"};
    if (tls()) {
      const std::string d = dir_.path();
      argv.insert(argv.end(), {"--tls_cert", d + "/node.pem", "--tls_key", d + "/node.key",
                               "--tls_ca", d + "/ca.pem"});
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), {TestWorkerBinary(), "--run-ms", std::to_string(run_ms)});
    return Launch(hosts_.In(on_a ? 0 : 1, argv), {"GANGRUN_TEST_READY=" + fifo_.path()},
                  dir_.path(), dir_.path());
  }

  Hosts hosts_{2};
  std::string port_;
};

TEST_P(PartitionTest, ACutShorterThanTheNodeTimeoutCostsNothing) {
  auto a = Host(true, 6000);
  auto b = Host(false, 6000);
  ASSERT_EQ(WaitReady(2).size(), 2u) << a.Stderr() << b.Stderr();
  ASSERT_TRUE(hosts_.Cut(0, 1));
  // The cut lasts node_timeout - 1 s; neither launcher may give up meanwhile.
  EXPECT_FALSE(WaitExit(b.pid, seconds(kNodeTimeoutS - 1)).has_value()) << b.Stderr();
  ASSERT_TRUE(hosts_.Heal(0, 1));
  EXPECT_EQ(RunToEnd(a).code, 0) << a.Stderr();
  EXPECT_EQ(RunToEnd(b).code, 0) << b.Stderr();
  EXPECT_NE(b.Stderr().find("resumed the session"), std::string::npos) << b.Stderr();
  EXPECT_EQ((a.Stderr() + b.Stderr()).find("was lost"), std::string::npos)
      << a.Stderr() << b.Stderr();
}

TEST_P(PartitionTest, ACutLongerThanTheNodeTimeoutLosesTheNodeOnBothSides) {
  auto a = Host(true, 20000);
  auto b = Host(false, 20000);
  ASSERT_EQ(WaitReady(2).size(), 2u) << a.Stderr() << b.Stderr();
  ASSERT_TRUE(hosts_.Cut(0, 1));
  const auto cut_at = std::chrono::steady_clock::now();
  const auto cut_end = cut_at + seconds(kNodeTimeoutS + 1);
  // The scheduler loses b after node_timeout + one interval of silence (and a sweep), stops a's
  // worker, and a exits at once: the lost node's session is dropped, nothing waits for it.
  auto a_exit = WaitExit(a.pid, seconds(kNodeTimeoutS + 3));
  const auto a_took = std::chrono::steady_clock::now() - cut_at;
  if (std::chrono::steady_clock::now() < cut_end) {
    std::this_thread::sleep_until(cut_end);  // allowed-sleep: the cut's length is the experiment
  }
  ASSERT_TRUE(hosts_.Heal(0, 1));
  ASSERT_TRUE(a_exit.has_value()) << a.Stderr();
  EXPECT_EQ(a_exit->code, 4) << a.Stderr();
  // 3 s + 0.5 s of silence and a 0.75 s sweep; waiting for the lost node's goodbye (the old
  // drain) would add the node timeout again. The margin is for the sanitizer builds.
  EXPECT_LT(a_took, milliseconds(5900)) << "a waited for the lost node";
  EXPECT_EQ(RunToEnd(b).code, 4) << b.Stderr();
  EXPECT_NE(a.Stderr().find("was lost: no heartbeat"), std::string::npos) << a.Stderr();
  EXPECT_NE(b.Stderr().find("lost the scheduler"), std::string::npos) << b.Stderr();
}

INSTANTIATE_TEST_SUITE_P(Transports, PartitionTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Tls" : "Plaintext"; });

class RejoinTest : public LauncherTest {};

TEST_F(RejoinTest, ALauncherStartedDuringACutJoinsSoonAfterItHeals) {
  Hosts hosts(2);
  ASSERT_TRUE(hosts.ok()) << "cannot make network namespaces (needs root and iproute2)";
  const std::string port = FreePort();
  auto launcher = [&](bool on_a) {
    std::vector<std::string> argv = {GangrunBinary(),
                                     "--master_addr",
                                     hosts.Address(0),
                                     "--worker_num",
                                     "2",
                                     "--local_worker_num",
                                     "1",
                                     "--master_port",
                                     port,
                                     "--node_rank",
                                     on_a ? "0" : "1",
                                     TestWorkerBinary()};
    return Launch(hosts.In(on_a ? 0 : 1, argv), {"GANGRUN_TEST_READY=" + fifo_.path()}, dir_.path(),
                  dir_.path());
  };
  auto a = launcher(true);
  ASSERT_TRUE(WaitForStderr(a, "waiting for 1 of 2", seconds(20))) << a.Stderr();
  ASSERT_TRUE(hosts.Cut(0, 1));
  auto b = launcher(false);
  // Its SYNs are lost for 4 s: the kernel alone would try again at 1, 3 and 7 s.
  EXPECT_FALSE(WaitExit(b.pid, seconds(4)).has_value()) << b.Stderr();
  ASSERT_TRUE(hosts.Heal(0, 1));
  const auto healed = std::chrono::steady_clock::now();
  EXPECT_EQ(WaitReady(2).size(), 2u) << a.Stderr() << b.Stderr();
  EXPECT_LT(std::chrono::steady_clock::now() - healed, milliseconds(2500))
      << "each connect attempt is bounded";
  EXPECT_EQ(RunToEnd(a).code, 0) << a.Stderr();
  EXPECT_EQ(RunToEnd(b).code, 0) << b.Stderr();
}

}  // namespace
}  // namespace gangrun::testing
