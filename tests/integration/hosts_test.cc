// Multi-host paths between test hosts in network namespaces (tests/testing/netns.h): each
// launcher, etcd member, daemon and agent on a host of its own, with its own loopback, host
// name and /etc/hosts, so that what passes here would pass on separate machines.

#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <set>

#include "nlohmann/json.hpp"
#include "tests/integration/launcher_fixture.h"
#include "tests/testing/etcd_cluster.h"
#include "tests/testing/netns.h"

namespace gangrun::testing {
namespace {

using std::chrono::duration;
using std::chrono::seconds;
using std::chrono::steady_clock;

class HostsTest : public LauncherTest {
 protected:
  // A launcher on test host `host`; its worker waits for the go file.
  Launched On(const Hosts& hosts, int host, std::vector<std::string> args,
              std::vector<std::string> worker = {}) {
    std::vector<std::string> argv = {GangrunBinary()};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(TestWorkerBinary());
    if (worker.empty()) worker = {"--wait-file", go_};
    argv.insert(argv.end(), worker.begin(), worker.end());
    return Launch(hosts.In(host, argv), {"GANGRUN_TEST_READY=" + fifo_.path()}, dir_.path(),
                  dir_.path());
  }
  // `gangrun ARGS` on test host `host`, run to its end.
  Launched Command(const Hosts& hosts, int host, std::vector<std::string> args) {
    args.insert(args.begin(), GangrunBinary());
    auto command = Launch(hosts.In(host, args), {}, dir_.path(), dir_.path());
    RunToEnd(command);
    return command;
  }
  void Go() { std::ofstream(go_) << "go\n"; }

  const std::string go_ = dir_.File("go");
  const std::string port_ = FreePort();
};

// The README's two-host example, with host names as a cluster's users give them.
TEST_F(HostsTest, TwoHostsByNameFormOneJob) {
  Hosts hosts(2);
  ASSERT_TRUE(hosts.ok()) << "cannot make network namespaces (needs root and iproute2)";
  std::vector<Launched> launchers;
  for (int host : {1, 0}) {
    launchers.push_back(On(hosts, host,
                           {"--worker_num=4", "--local_worker_num=2", "--master_addr=h0",
                            "--master_port=" + port_, "--node_rank=" + std::to_string(host)},
                           {"--env", dir_.File("env")}));
  }
  for (auto& launcher : launchers) EXPECT_EQ(RunToEnd(launcher).code, 0) << launcher.Stderr();
  const std::string env3 = ReadFile(dir_.File("env.3"));
  EXPECT_NE(env3.find("\nMASTER_ADDR=" + hosts.Address(0) + "\n"), std::string::npos) << env3;
  EXPECT_NE(env3.find("\nGROUP_RANK=1\n"), std::string::npos) << env3;
}

// Debian's installer maps the host's own name to 127.0.1.1: the master's launcher resolves
// --master_addr to loopback while the other hosts resolve it to the master's address. The job
// still forms, and rank 0's MASTER_ADDR is one the other host reaches.
TEST_F(HostsTest, AMasterWhoseNameResolvesToLoopbackOnItselfStillFormsTheJob) {
  Hosts hosts(2, Hosts::Name::kLoopback);
  ASSERT_TRUE(hosts.ok()) << "cannot make network namespaces (needs root and iproute2)";
  std::vector<Launched> launchers;
  for (int host : {1, 0}) {
    launchers.push_back(On(hosts, host,
                           {"--worker_num=2", "--local_worker_num=1", "--master_addr=h0",
                            "--master_port=" + port_, "--cluster_time_out=30"},
                           {"--env", dir_.File("env")}));
  }
  for (auto& launcher : launchers) EXPECT_EQ(RunToEnd(launcher).code, 0) << launcher.Stderr();
  const std::string env1 = ReadFile(dir_.File("env.1"));
  EXPECT_NE(env1.find("\nMASTER_ADDR=" + hosts.Address(0) + "\n"), std::string::npos) << env1;
}

// Host names that resolve nowhere: addresses given, the job forms.
TEST_F(HostsTest, HostsWhoseNamesResolveNowhereStillJoin) {
  Hosts hosts(2, Hosts::Name::kResolvesNowhere);
  ASSERT_TRUE(hosts.ok()) << "cannot make network namespaces (needs root and iproute2)";
  std::vector<Launched> launchers;
  for (int host : {1, 0}) {
    launchers.push_back(On(hosts, host,
                           {"--worker_num=2", "--local_worker_num=1",
                            "--master_addr=" + hosts.Address(0), "--master_port=" + port_},
                           {"--env", dir_.File("env")}));
  }
  for (auto& launcher : launchers) EXPECT_EQ(RunToEnd(launcher).code, 0) << launcher.Stderr();
  const std::string env1 = ReadFile(dir_.File("env.1"));
  EXPECT_NE(env1.find("\nMASTER_ADDR=" + hosts.Address(0) + "\n"), std::string::npos) << env1;
}

// torchrun's static and c10d multi-node forms and its etcd backend, each with one launcher on
// each of two hosts named by host name (the README's "Coming from torchrun").
TEST_F(HostsTest, TorchrunsMultiNodeFormsAcrossHosts) {
  Hosts hosts(3);
  ASSERT_TRUE(hosts.ok()) << "cannot make network namespaces (needs root and iproute2)";
  EtcdCluster etcd(dir_.File("etcd"), hosts, 2);
  ASSERT_TRUE(etcd.started()) << etcd.error();
  const std::string c10d_port = FreePort();
  const std::vector<std::pair<std::string, std::vector<std::string>>> forms = {
      {"static", {"--nnodes", "2", "--master_addr", "h0", "--master_port", port_}},
      {"c10d",
       {"--nnodes", "2:4", "--rdzv-backend=c10d", "--rdzv-endpoint=h0:" + c10d_port,
        "--rdzv-id=job7", "--rdzv-conf=last_call_timeout=1"}},
      {"etcd",
       {"--nnodes", "2", "--rdzv_backend", "etcd", "--rdzv_endpoint", etcd.Endpoint(0), "--rdzv_id",
        "d1job-" + port_}},
  };
  for (const auto& [form, options] : forms) {
    std::vector<Launched> launchers;
    for (int host : {1, 0}) {
      std::vector<std::string> argv = {TorchrunBinary(), "--nproc_per_node", "2"};
      argv.insert(argv.end(), options.begin(), options.end());
      if (form == "static") argv.insert(argv.end(), {"--node_rank", std::to_string(host)});
      argv.insert(argv.end(),
                  {"--no_python", TestWorkerBinary(), "--env", dir_.File("env-" + form)});
      launchers.push_back(Launch(hosts.In(host, argv), {}, dir_.path(), dir_.path()));
    }
    for (auto& launcher : launchers) {
      EXPECT_EQ(RunToEnd(launcher).code, 0) << form << ": " << launcher.Stderr();
    }
    std::set<std::string> masters;
    for (int rank = 0; rank < 4; ++rank) {
      const std::string env = ReadFile(dir_.File("env-" + form + "." + std::to_string(rank)));
      EXPECT_NE(env.find("\nWORLD_SIZE=4\n"), std::string::npos) << form << ": " << env;
      const size_t at = env.find("\nMASTER_ADDR=");
      if (at != std::string::npos) {
        masters.insert(env.substr(at + 13, env.find('\n', at + 1) - at - 13));
      }
    }
    // One rendezvous for torch's store, on a host's own address.
    ASSERT_EQ(masters.size(), 1u) << form;
    EXPECT_EQ(masters.begin()->rfind("10.231.0.", 0), 0u) << form << ": " << *masters.begin();
  }
}

// The README's store example: launchers on three hosts, etcd on a fourth, no --master_addr.
// The coordinator advertises an address the others reach; killing its launcher, then making
// the next coordinator's host vanish, each leaves the job to the others.
class StoreAcrossHostsTest : public HostsTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(hosts_.ok()) << "cannot make network namespaces (needs root and iproute2)";
    etcd_ = std::make_unique<EtcdCluster>(dir_.File("etcd"), hosts_, kStoreHost);
    ASSERT_TRUE(etcd_->started()) << etcd_->error();
  }
  void TearDown() override {
    etcd_.reset();
    LauncherTest::TearDown();
  }
  Launched Launcher(int host, const std::string& workers) {
    return On(hosts_, host,
              {"--store", etcd_->Url(), "--run_id", run_, "--worker_num", workers,
               "--local_worker_num", "2", "--master_port", port_, "--node_timeout", "2"});
  }
  // The store's view of the run, asked from the store's host.
  nlohmann::json Status() {
    auto status = Command(hosts_, kStoreHost,
                          {"status", "--store", etcd_->Url(), "--run_id", run_, "--json"});
    auto parsed = nlohmann::json::parse(status.Stdout(), nullptr, false);
    return parsed.is_discarded() ? nlohmann::json() : parsed;
  }
  // The coordinating launcher's pid, once it is not `old_pid`.
  int WaitCoordinator(int old_pid = 0) {
    const auto deadline = steady_clock::now() + seconds(30);
    while (steady_clock::now() < deadline) {
      auto status = Status();
      if (status.contains("scheduler") && status["scheduler"].contains("pid")) {
        const int pid = status["scheduler"]["pid"];
        if (pid != old_pid) return pid;
      }
    }
    ADD_FAILURE() << "the store names no (new) coordinator";
    return 0;
  }

  static constexpr int kStoreHost = 3;
  Hosts hosts_{4};
  std::unique_ptr<EtcdCluster> etcd_;
  const std::string run_ = "across-hosts-" + port_;
};

TEST_F(StoreAcrossHostsTest, TheCoordinatorIsReachedAcrossHostsAndItsLossIsSurvived) {
  std::vector<Launched> launchers;
  for (int host = 0; host < 3; ++host) launchers.push_back(Launcher(host, "2:6"));
  ASSERT_EQ(WaitReady(6).size(), 6u) << launchers[0].Stderr() << launchers[1].Stderr();
  auto status = Status();
  const std::string address = status["scheduler"].value("address", "");
  EXPECT_EQ(address.rfind("10.231.0.", 0), 0u) << "advertised " << status.dump();
  const int first = WaitCoordinator();

  // Killed: the store's lease runs out and another host coordinates.
  auto killed_at = steady_clock::now();
  ASSERT_EQ(kill(first, SIGKILL), 0);
  ASSERT_EQ(WaitReady(4).size(), 4u);
  std::printf(
      "across hosts, a killed coordinator's launcher to the next generation running: "
      "%.2f s\n",
      duration<double>(steady_clock::now() - killed_at).count());
  const int second = WaitCoordinator(first);
  ASSERT_NE(second, 0);

  // Vanished: the second coordinator's host drops off the network.
  int vanished = -1;
  for (int host = 0; host < 3; ++host) {
    if (launchers[host].pid == second) vanished = host;
  }
  ASSERT_GE(vanished, 0);
  killed_at = steady_clock::now();
  ASSERT_TRUE(hosts_.Vanish(vanished));
  ASSERT_EQ(WaitReady(2).size(), 2u);
  std::printf(
      "across hosts, a vanished coordinator's host to the next generation running: "
      "%.2f s\n",
      duration<double>(steady_clock::now() - killed_at).count());
  EXPECT_NE(WaitCoordinator(second), 0);
  Go();
  for (int host = 0; host < 3; ++host) {
    if (host == vanished) continue;
    const auto end = RunToEnd(launchers[host]);
    if (launchers[host].pid == first) {
      EXPECT_EQ(end.signal, SIGKILL);
    } else {
      EXPECT_EQ(end.code, 0) << launchers[host].Stderr();
    }
  }
  // The vanished host's launcher, cut off from the store and every node, gives up by itself.
  EXPECT_EQ(RunToEnd(launchers[vanished]).code, 4) << launchers[vanished].Stderr();
  ASSERT_TRUE(hosts_.Return(vanished));
}

// A cluster on two networks, as the README's "Addresses" describes: h0 and the store's host
// h2 on both, h1 on the second only. h0 coordinates and advertises its address toward the
// store (on the first network) and its other one; h1, which has no route to the first, keeps
// the address that answers, and its workers get the rank-0 host's address it can reach.
TEST_F(HostsTest, AHostOnAnotherNetworkReachesTheCoordinatorAtItsOtherAddress) {
  Hosts hosts(3);
  ASSERT_TRUE(hosts.ok()) << "cannot make network namespaces (needs root and iproute2)";
  ASSERT_EQ(hosts.AddNetwork(), 1);
  ASSERT_TRUE(hosts.Leave(1, 0));
  EtcdCluster etcd(dir_.File("etcd"), hosts, 2);
  ASSERT_TRUE(etcd.started()) << etcd.error();
  const std::string run = "two-networks-" + port_;
  auto launcher = [&](int host) {
    return On(hosts, host,
              {"--store", etcd.Url(), "--run_id", run, "--worker_num", "4", "--local_worker_num",
               "2", "--master_port", port_},
              {"--env", dir_.File("env"), "--wait-file", go_});
  };
  auto first = launcher(0);
  // h0 coordinates before h1 starts: the store names it, with both of its addresses.
  nlohmann::json scheduler;
  const auto deadline = steady_clock::now() + seconds(30);
  while (steady_clock::now() < deadline && !scheduler.contains("addresses")) {
    auto status = Command(hosts, 2, {"status", "--store", etcd.Url(), "--run_id", run, "--json"});
    auto parsed = nlohmann::json::parse(status.Stdout(), nullptr, false);
    if (!parsed.is_discarded() && parsed.contains("scheduler")) scheduler = parsed["scheduler"];
  }
  ASSERT_TRUE(scheduler.contains("addresses")) << scheduler.dump() << first.Stderr();
  EXPECT_EQ(scheduler.value("address", ""), hosts.Address(0) + ":" + port_) << scheduler.dump();
  EXPECT_EQ(scheduler["addresses"],
            nlohmann::json({hosts.Address(0) + ":" + port_, hosts.Address(0, 1) + ":" + port_}));
  auto second = launcher(1);
  ASSERT_EQ(WaitReady(4).size(), 4u) << first.Stderr() << second.Stderr();
  Go();
  EXPECT_EQ(RunToEnd(first).code, 0) << first.Stderr();
  EXPECT_EQ(RunToEnd(second).code, 0) << second.Stderr();
  EXPECT_NE(second.Stderr().find("this host reaches it at " + hosts.Address(0, 1) + ":" + port_),
            std::string::npos)
      << second.Stderr();
  // Each rank's MASTER_ADDR is an address of the rank-0 host that the rank's own host reaches:
  // ranks 0-1 on the rank-0 host, 2-3 on the other.
  std::vector<std::string> master(4);
  for (int rank = 0; rank < 4; ++rank) {
    const std::string env = ReadFile(dir_.File("env." + std::to_string(rank)));
    const size_t at = env.find("\nMASTER_ADDR=");
    ASSERT_NE(at, std::string::npos) << env;
    master[rank] = env.substr(at + 13, env.find('\n', at + 1) - at - 13);
  }
  EXPECT_EQ(master[0], master[1]);
  EXPECT_EQ(master[2], master[3]);
  // Nodes are ordered by host address: h0 (10.231.0.1) hosts rank 0; h1 reaches it on the
  // second network only.
  EXPECT_EQ(master[0], hosts.Address(0));
  EXPECT_EQ(master[2], hosts.Address(0, 1));
}

// A spare on a third host: `gangrun stacks` from the spare's host reaches every rank on the
// other two, and when the second host vanishes the spare takes its place across hosts.
TEST_F(HostsTest, ASpareOnAThirdHostTakesAVanishedHostsPlaceAndStacksComeFromEveryHost) {
  Hosts hosts(3);
  ASSERT_TRUE(hosts.ok()) << "cannot make network namespaces (needs root and iproute2)";
  auto launcher = [&](int host) {
    return On(
        hosts, host,
        {"--worker_num=2", "--local_worker_num=1", "--master_addr=h0", "--master_port=" + port_,
         "--spare_nodes=1", "--max_restarts=1", "--node_timeout=2", "--heartbeat_interval=0.2"});
  };
  auto master = launcher(0);
  ASSERT_TRUE(WaitForStderr(master, "waiting for", seconds(20))) << master.Stderr();
  auto node = launcher(1);
  ASSERT_EQ(WaitReady(2).size(), 2u) << master.Stderr() << node.Stderr();
  auto spare = launcher(2);
  ASSERT_TRUE(WaitForStderr(spare, "waiting as a spare", seconds(20))) << spare.Stderr();

  auto stacks = Launch(hosts.In(2, {GangrunBinary(), "stacks", "--master", "h0:" + port_}), {},
                       dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(stacks).code, 0) << stacks.Stderr();
  EXPECT_NE(stacks.Stdout().find("--- rank 0 (pid "), std::string::npos) << stacks.Stdout();
  EXPECT_NE(stacks.Stdout().find("--- rank 1 (pid "), std::string::npos) << stacks.Stdout();

  ASSERT_TRUE(hosts.Vanish(1));
  ASSERT_EQ(WaitReady(2).size(), 2u) << master.Stderr() << spare.Stderr();
  Go();
  EXPECT_EQ(RunToEnd(master).code, 0) << master.Stderr();
  EXPECT_EQ(RunToEnd(spare).code, 0) << spare.Stderr();
  EXPECT_NE(spare.Stderr().find("a spare no more: this node takes node rank 1"), std::string::npos)
      << spare.Stderr();
  // The vanished host's launcher, cut off from its scheduler, ends by itself once it is back.
  ASSERT_TRUE(hosts.Return(1));
  EXPECT_NE(RunToEnd(node).code, 0) << node.Stderr();
}

// The README's daemons on a store, on hosts of their own: the active daemon on h0, a standby
// on h1, etcd on h2, agents on h3 and h4. A job submitted from h3 runs on both agents' hosts,
// its logs come from either host, and when the active daemon is killed the standby adopts the
// job with its workers and the submit gets its outcome.
TEST_F(HostsTest, DaemonsAndAgentsOnHostsOfTheirOwn) {
  Hosts hosts(5);
  ASSERT_TRUE(hosts.ok()) << "cannot make network namespaces (needs root and iproute2)";
  EtcdCluster etcd(dir_.File("etcd"), hosts, 2);
  ASSERT_TRUE(etcd.started()) << etcd.error();
  const std::string token = dir_.File("token");
  std::ofstream(token) << "7e3c1f0a9b2d48c6a5e1f7b3d9c2a8e4\n";
  chmod(token.c_str(), 0600);
  const std::string a = hosts.Address(0) + ":" + port_, b = hosts.Address(1) + ":" + port_;
  const std::string masters = a + "," + b;
  auto gangrun = [&](int host, std::vector<std::string> args) {
    // The command's name, its token, then its options (and a submitted task's own).
    args.insert(args.begin() + 1, {"--token_file", token});
    args.insert(args.begin(), GangrunBinary());
    return Launch(hosts.In(host, args), {"GANGRUN_TEST_READY=" + fifo_.path()}, dir_.path(),
                  dir_.path());
  };
  auto active = gangrun(0, {"scheduler", "--listen", a, "--store", etcd.Url()});
  ASSERT_TRUE(WaitForStderr(active, "is now the active one", seconds(20))) << active.Stderr();
  auto standby = gangrun(1, {"scheduler", "--listen", b, "--store", etcd.Url()});
  ASSERT_TRUE(WaitForStderr(standby, "the active daemon is at " + a, seconds(20)))
      << standby.Stderr();
  std::vector<Launched> agents;
  for (int host : {3, 4}) {
    agents.push_back(gangrun(host, {"agent", "--master", masters, "--slots", "2"}));
  }
  auto submit = gangrun(3, {"submit", "--master", masters, "--worker_num", "4",
                            "--local_worker_num", "2", "--node_timeout", "2", TestWorkerBinary(),
                            "--lines", "1", "--wait-file", go_, "--env", dir_.File("env")});
  const auto ready = WaitReady(4);
  ASSERT_EQ(ready.size(), 4u) << submit.Stderr() << active.Stderr();
  // Each rank's torch rendezvous is rank 0's host, an agent's address.
  const std::string env3 = ReadFile(dir_.File("env.3"));
  const std::string env0 = ReadFile(dir_.File("env.0"));
  const size_t at = env0.find("\nMASTER_ADDR=");
  ASSERT_NE(at, std::string::npos) << env0;
  const std::string master_addr = env0.substr(at + 13, env0.find('\n', at + 1) - at - 13);
  EXPECT_TRUE(master_addr == hosts.Address(3) || master_addr == hosts.Address(4)) << master_addr;
  EXPECT_NE(env3.find("\nMASTER_ADDR=" + master_addr + "\n"), std::string::npos) << env3;
  EXPECT_NE(env3.find("\nGANGRUN_SCHEDULER=" + hosts.Address(0) + ":"), std::string::npos) << env3;
  // Every rank's log, from a host that runs none of them... and from one that runs half.
  for (int host : {1, 4}) {
    auto logs = gangrun(host, {"logs", "--master", masters});
    EXPECT_EQ(RunToEnd(logs).code, 0) << logs.Stderr();
    for (int rank = 0; rank < 4; ++rank) {
      EXPECT_NE(logs.Stdout().find("line 0 of rank " + std::to_string(rank)), std::string::npos)
          << logs.Stdout();
    }
  }
  ASSERT_EQ(kill(active.pid, SIGKILL), 0);
  EXPECT_EQ(RunToEnd(active).signal, SIGKILL);
  ASSERT_TRUE(
      WaitForStderr(standby, "goes on under this scheduler: 4 of 4 worker(s) back", seconds(30)))
      << standby.Stderr();
  for (const auto& worker : ready) EXPECT_EQ(kill(worker.pid, 0), 0) << "a worker was restarted";
  Go();
  EXPECT_EQ(RunToEnd(submit).code, 0) << submit.Stderr();
  for (auto* daemon : {&agents[0], &agents[1], &standby}) {
    kill(daemon->pid, SIGTERM);
    EXPECT_EQ(RunToEnd(*daemon).code, 0) << daemon->Stderr();
  }
}

}  // namespace
}  // namespace gangrun::testing
