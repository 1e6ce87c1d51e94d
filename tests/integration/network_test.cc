// What crosses a network: TLS, two hosts in network namespaces, a real PyTorch job.

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "common/net.h"
#include "tests/integration/launcher_fixture.h"
#include "tests/testing/netns.h"

namespace gangrun::testing {
namespace {

using std::chrono::seconds;

class NetworkTest : public LauncherTest {
 protected:
  NetworkTest() : port_(FreePort()) {}
  std::vector<std::string> Job(int world, int local, const std::string& node_rank) {
    return {"--worker_num",       std::to_string(world),
            "--local_worker_num", std::to_string(local),
            "--master_port",      port_,
            "--node_rank",        node_rank};
  }
  std::string port_;
};

TEST_F(NetworkTest, MutualTlsJobFormsAndAPlainNodeCannotJoin) {
  const std::string d = dir_.path();
  // One CA; one certificate for 127.0.0.1, used by the scheduler and by the nodes.
  ASSERT_TRUE(MakeTestCertificates(d, "node")) << "openssl failed";
  std::vector<std::string> tls = {
      "--tls_cert",  d + "/node.pem",        "--tls_key", d + "/node.key", "--tls_ca",
      d + "/ca.pem", "--heartbeat_interval", "0.2"};
  auto with_tls = [&](const std::string& rank) {
    auto args = Job(2, 1, rank);
    args.insert(args.end(), tls.begin(), tls.end());
    return args;
  };
  auto a = Start(with_tls("0"), {"--env", dir_.File("env")});
  auto b = Start(with_tls("1"), {"--env", dir_.File("env")});
  EXPECT_EQ(RunToEnd(a).code, 0) << a.Stderr();
  EXPECT_EQ(RunToEnd(b).code, 0) << b.Stderr();
  EXPECT_NE(ReadFile(dir_.File("env.1")).find("GANGRUN_TLS_CA=" + d + "/ca.pem"),
            std::string::npos);

  // A scheduler with TLS keeps a node without it out; the cluster never forms.
  auto master_args = Job(2, 1, "0");
  master_args.insert(master_args.end(), tls.begin(), tls.end());
  master_args.insert(master_args.end(), {"--cluster_time_out", "2"});
  auto master = Start(master_args, {});
  ASSERT_TRUE(WaitForStderr(master, "waiting for 1 of 2", seconds(20))) << master.Stderr();
  auto plain_args = Job(2, 1, "1");
  plain_args.insert(plain_args.end(), {"--cluster_time_out", "1"});
  auto plain = Start(plain_args, {});
  EXPECT_EQ(RunToEnd(plain).code, 3) << plain.Stderr();
  EXPECT_EQ(RunToEnd(master).code, 3) << master.Stderr();
}

TEST_F(NetworkTest, TlsMismatchesAreNamedAsSuch) {
  const std::string d = dir_.path();
  ASSERT_TRUE(Shell("cd " + d +
                    " && openssl req -x509 -newkey rsa:2048 -nodes -keyout a.key -out a.pem "
                    "-days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1"
                    " && openssl req -x509 -newkey rsa:2048 -nodes -keyout b.key -out b.pem "
                    "-days 1 -subj /CN=other"))
      << "openssl failed";
  // A key that belongs to another certificate: one line naming both files, exit 2, before
  // anything listens (it used to be reported as a busy port).
  auto pair_args = Job(2, 1, "0");
  pair_args.insert(pair_args.end(), {"--tls_cert", d + "/a.pem", "--tls_key", d + "/b.key"});
  auto pair = Start(pair_args, {});
  EXPECT_EQ(RunToEnd(pair).code, 2) << pair.Stderr();
  EXPECT_NE(pair.Stderr().find("--tls_key '" + d +
                               "/b.key' does not belong to the certificate "
                               "in --tls_cert '" +
                               d + "/a.pem'"),
            std::string::npos)
      << pair.Stderr();
  // A node without TLS in front of a scheduler with it: named as a handshake failure within
  // seconds, not after the cluster timeout.
  auto master_args = Job(2, 1, "0");
  master_args.insert(master_args.end(), {"--tls_cert", d + "/a.pem", "--tls_key", d + "/a.key",
                                         "--cluster_time_out", "60"});
  auto master = Start(master_args, {});
  ASSERT_TRUE(WaitForStderr(master, "waiting for 1 of 2", seconds(20))) << master.Stderr();
  auto start = std::chrono::steady_clock::now();
  auto plain = Start(Job(2, 1, "1"), {});
  EXPECT_EQ(RunToEnd(plain).code, 3) << plain.Stderr();
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(20));
  EXPECT_NE(plain.Stderr().find("uses TLS, but this launcher does not (give it the job's "
                                "--tls_ca/--tls_cert/--tls_key)"),
            std::string::npos)
      << plain.Stderr();
  kill(master.pid, SIGTERM);
  RunToEnd(master);

  // And the other way round: a node with TLS in front of a scheduler without it.
  auto plain_master = Start(Job(2, 1, "0"), {});
  ASSERT_TRUE(WaitForStderr(plain_master, "waiting for 1 of 2", seconds(20)))
      << plain_master.Stderr();
  auto tls_args = Job(2, 1, "1");
  tls_args.insert(tls_args.end(), {"--tls_cert", d + "/a.pem", "--tls_key", d + "/a.key",
                                   "--tls_ca", d + "/a.pem"});
  auto tls_node = Start(tls_args, {});
  EXPECT_EQ(RunToEnd(tls_node).code, 3) << tls_node.Stderr();
  EXPECT_NE(tls_node.Stderr().find("does not speak TLS, but this launcher does"), std::string::npos)
      << tls_node.Stderr();
  kill(plain_master.pid, SIGTERM);
  RunToEnd(plain_master);
}

TEST_F(NetworkTest, TwoNetworkNamespacesActAsTwoHosts) {
  Hosts hosts(2);
  ASSERT_TRUE(hosts.ok()) << "cannot make network namespaces (needs root and iproute2)";
  auto in_host = [&](int host, const std::string& rank) {
    // The master by its host name, as a cluster's users give it.
    std::vector<std::string> argv = {GangrunBinary(), "--master_addr", hosts.Name(0)};
    auto job = Job(2, 1, rank);
    argv.insert(argv.end(), job.begin(), job.end());
    argv.insert(argv.end(), {TestWorkerBinary(), "--env", dir_.File("env")});
    return Launch(hosts.In(host, argv), {"GANGRUN_TEST_READY=" + fifo_.path()}, dir_.path(),
                  dir_.path());
  };
  auto host_b = in_host(1, "1");
  auto host_a = in_host(0, "0");
  EXPECT_EQ(RunToEnd(host_a).code, 0) << host_a.Stderr();
  EXPECT_EQ(RunToEnd(host_b).code, 0) << host_b.Stderr();
  std::string env1 = ReadFile(dir_.File("env.1"));
  EXPECT_NE(env1.find("MASTER_ADDR=" + hosts.Address(0) + "\n"), std::string::npos) << env1;
  EXPECT_NE(env1.find("GANGRUN_SCHEDULER=" + hosts.Address(0) + ":" + port_ + "\n"),
            std::string::npos)
      << env1;
  EXPECT_NE(env1.find("RANK=1\n"), std::string::npos);
}

TEST_F(NetworkTest, PyTorchAllReduceAcrossTwoLaunchers) {
  // Debian's python3-torch installs into the system interpreter, which may not be the
  // python3 first on PATH.
  const std::string python = "/usr/bin/python3";
  if (!Shell(python + " -c 'import torch.distributed'")) {
    GTEST_SKIP() << "PyTorch is not installed for " << python << " (Debian's python3-torch)";
  }
  std::ofstream(dir_.File("allreduce.py"))
      << "import os, torch, torch.distributed as dist\n"
         "dist.init_process_group('gloo', init_method='env://')\n"
         "t = torch.tensor([float(dist.get_rank())])\n"
         "dist.all_reduce(t)\n"
         "print(f'rank {dist.get_rank()}/{dist.get_world_size()} sum {t.item():.0f}', flush=True)\n"
         "dist.destroy_process_group()\n";
  auto launch = [&](const std::string& rank) {
    std::vector<std::string> argv = {GangrunBinary()};
    auto job = Job(4, 2, rank);
    argv.insert(argv.end(), job.begin(), job.end());
    argv.insert(argv.end(), {python, "allreduce.py"});
    return Launch(argv, {}, dir_.path(), dir_.path());
  };
  auto a = launch("0");
  auto b = launch("1");
  EXPECT_EQ(RunToEnd(a).code, 0) << a.Stderr();
  EXPECT_EQ(RunToEnd(b).code, 0) << b.Stderr();
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(ReadFile(dir_.File("worker_" + std::to_string(rank) + ".log")),
              "rank " + std::to_string(rank) + "/4 sum 6\n");
  }
}

}  // namespace
}  // namespace gangrun::testing
