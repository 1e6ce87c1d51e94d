// --agent_store True: real torch 1.13 gloo jobs whose ranks meet in gangrun's torch store
// (scheduler/torch_store.h), across two launchers and a restart, and across two test hosts in
// network namespaces.

#include <fstream>
#include <map>

#include "tests/integration/launcher_fixture.h"
#include "tests/testing/netns.h"

namespace gangrun::testing {
namespace {

// Each rank reduces its rank + 1 and says where its store was; in the first attempt, rank 3
// fails after the reduction when FAIL_FIRST is set (the next attempt meets in the same store).
constexpr char kDdp[] = R"PY(
import os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
print("attempt %s rank %d sum %.1f store %s:%s agent %s" % (
    attempt, dist.get_rank(), t.item(), os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"],
    os.environ["TORCHELASTIC_USE_AGENT_STORE"]), flush=True)
if os.environ.get("FAIL_FIRST") and attempt == "0" and dist.get_rank() == 3:
    sys.exit(1)
dist.barrier()
dist.destroy_process_group()
)PY";

class AgentStoreTest : public LauncherTest {
 protected:
  std::string Script() {
    std::ofstream(dir_.File("ddp.py")) << kDdp;
    return dir_.File("ddp.py");
  }
  // The "attempt A rank R ..." lines of `text`, by (attempt, rank).
  static std::map<std::pair<int, int>, std::string> Lines(const std::string& text) {
    std::map<std::pair<int, int>, std::string> lines;
    for (const auto& line : Split(text, '\n')) {
      int attempt = -1, rank = -1;
      if (sscanf(line.c_str(), "attempt %d rank %d", &attempt, &rank) == 2) {
        lines[{attempt, rank}] = line;
      }
    }
    return lines;
  }
};

TEST_F(AgentStoreTest, TwoLaunchersRanksMeetInGangrunsStoreAcrossARestart) {
  ASSERT_TRUE(HasTorch()) << "python3-torch is not installed (deploy/install-deps.sh installs it)";
  const std::string script = Script();
  const std::string port = FreePort();
  std::vector<Launched> launchers;
  for (const char* node_rank : {"1", "0"}) {
    launchers.push_back(
        Launch({TorchrunBinary(), "--nnodes", "2", "--nproc_per_node", "2", "--node_rank",
                node_rank, "--master_addr", "127.0.0.1", "--master_port", port, "--max_restarts",
                "1", "--restart_backoff", "0", "--agent_store", "True", script},
               {"PYTHON_EXEC=/usr/bin/python3", "FAIL_FIRST=1"}, dir_.path(), dir_.path()));
  }
  std::string out;
  for (auto& launcher : launchers) {
    EXPECT_EQ(RunToEnd(launcher).code, 0) << launcher.Stderr();
    out += launcher.Stdout();
  }
  auto lines = Lines(out);
  std::string store;
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (int rank = 0; rank < 4; ++rank) {
      const std::string& line = lines[std::make_pair(attempt, rank)];
      EXPECT_NE(line.find(" sum 10.0 store 127.0.0.1:"), std::string::npos) << out;
      EXPECT_NE(line.find(" agent True"), std::string::npos) << out;
      // One store for every rank of both attempts, and not the job's --master_port.
      const std::string at = line.substr(line.find(" store ") + 7);
      if (store.empty()) store = at;
      EXPECT_EQ(at, store) << out;
      EXPECT_EQ(at.find(":" + port + " "), std::string::npos) << out;
    }
  }
}

TEST_F(AgentStoreTest, RanksOnTwoHostsMeetInTheStoreWhereTheSchedulerListens) {
  ASSERT_TRUE(HasTorch()) << "python3-torch is not installed (deploy/install-deps.sh installs it)";
  Hosts hosts(2);
  ASSERT_TRUE(hosts.ok()) << "cannot make network namespaces (needs root and iproute2)";
  const std::string script = Script();
  const std::string port = FreePort();
  std::vector<Launched> launchers;
  for (int host : {1, 0}) {
    launchers.push_back(
        Launch(hosts.In(host, {TorchrunBinary(), "--nnodes", "2", "--nproc_per_node", "2",
                               "--node_rank", std::to_string(host), "--master_addr", "h0",
                               "--master_port", port, "--agent_store", "True", script}),
               {"PYTHON_EXEC=/usr/bin/python3"}, dir_.path(), dir_.path()));
  }
  std::string out;
  for (auto& launcher : launchers) {
    EXPECT_EQ(RunToEnd(launcher).code, 0) << launcher.Stderr();
    out += launcher.Stdout();
  }
  auto lines = Lines(out);
  for (int rank = 0; rank < 4; ++rank) {
    const std::string& line = lines[std::make_pair(0, rank)];
    EXPECT_NE(line.find(" sum 10.0 store " + hosts.Address(0) + ":"), std::string::npos) << out;
  }
}

TEST_F(AgentStoreTest, ARankThatNeverReachesTheStoreIsNamedAndWithAHangRuleTheJobStops) {
  ASSERT_TRUE(HasTorch()) << "python3-torch is not installed (deploy/install-deps.sh installs it)";
  // Rank 1 is stuck before init_process_group (a hung import, a stuck filesystem); rank 0 waits
  // in the store for its address, which gloo would wait for 30 minutes.
  std::ofstream(dir_.File("stuck.py")) << R"PY(
import os, time, datetime, torch.distributed as dist
if os.environ["RANK"] == "1":
    time.sleep(600)
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=600))
)PY";
  auto job = Launch(
      {TorchrunBinary(), "--nproc_per_node", "2", "--agent_store", "True", "--store_wait_report",
       "1", "--hang_timeout", "300", "--progress_hook", "False", dir_.File("stuck.py")},
      {"PYTHON_EXEC=/usr/bin/python3"}, dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(job).code, 5) << job.Stderr();  // a hang
  const std::string err = job.Stderr();
  EXPECT_NE(err.find("wait(s) in the torch store for "), std::string::npos) << err;
  EXPECT_NE(err.find("rank 1 ("), std::string::npos) << err;
  EXPECT_NE(err.find("never set its key"), std::string::npos) << err;
}

}  // namespace
}  // namespace gangrun::testing
