// No orphans: no worker and no descendant of a worker (also one that called setsid())
// outlives the launcher, however the launcher ends.

#include <fstream>
#include <utility>

#include "common/descendants.h"
#include "tests/integration/launcher_fixture.h"

namespace gangrun::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> children;
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  pid_t child;
  while (in >> child) children.push_back(child);
  return children;
}

TEST_F(LauncherTest, KillNineOfTheLauncherLeavesNothingBehindWithinOneSecond) {
  auto run = Start({"--worker_num", "2", "--local_worker_num", "2"}, {"--grandchild", "--hang"});
  auto ready = WaitReady(2);
  ASSERT_EQ(ready.size(), 2u);
  kill(run.pid, SIGKILL);
  ASSERT_TRUE(WaitExit(run.pid, seconds(5)).has_value());
  for (const auto& r : ready) {
    EXPECT_TRUE(WaitGone(r.pid, milliseconds(1000))) << "worker of rank " << r.rank;
    EXPECT_TRUE(WaitGone(r.grandchild, milliseconds(1000))) << "setsid grandchild of " << r.rank;
  }
}

TEST_F(LauncherTest, SigtermRemovesGrandchildrenThatLeftTheSession) {
  auto run = Start({"--worker_num", "2", "--local_worker_num", "2", "--grace_period", "0.5"},
                   {"--grandchild", "--hang"});
  auto ready = WaitReady(2);
  kill(run.pid, SIGTERM);
  EXPECT_EQ(RunToEnd(run).code, 128 + SIGTERM);
  for (const auto& r : ready) {
    EXPECT_FALSE(IsAlive(r.pid));
    EXPECT_FALSE(IsAlive(r.grandchild)) << "setsid grandchild outlived the launcher";
  }
}

TEST_F(LauncherTest, SuccessfulJobStillRemovesLeftoverDaemons) {
  auto run = Start({"--worker_num", "1", "--local_worker_num", "1", "--grace_period", "0.5"},
                   {"--grandchild"});
  auto ready = WaitReady(1);
  EXPECT_EQ(RunToEnd(run).code, 0) << run.Stderr();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_FALSE(IsAlive(ready[0].grandchild));
}

TEST_F(LauncherTest, LosingTheProcessKeeperStopsTheJobAndItsGrandchildren) {
  auto run = Start({"--worker_num", "1", "--local_worker_num", "1"}, {"--grandchild", "--hang"});
  auto ready = WaitReady(1);
  ASSERT_EQ(ready.size(), 1u);
  auto children = ChildrenOf(run.pid);
  ASSERT_EQ(children.size(), 1u) << "the launcher's only child is its keeper";
  kill(children[0], SIGKILL);
  EXPECT_EQ(RunToEnd(run).code, 4);
  EXPECT_NE(run.Stderr().find("process keeper"), std::string::npos) << run.Stderr();
  EXPECT_FALSE(IsAlive(ready[0].pid));
  EXPECT_FALSE(IsAlive(ready[0].grandchild));
}

// The launcher reaps its keeper before it exits, on every path: a launch that ends before its
// job does (bad options, --dry_run), whose keeper was forked at its start and never used, and
// a job's end, where the launcher goes on as soon as the keeper says everything below it is
// reaped. This process is a subreaper: a keeper still alive at the launcher's exit would be
// its child at once.
TEST_F(LauncherTest, NoKeeperOutlivesTheLauncherOnAnyPath) {
  const std::vector<std::pair<std::vector<std::string>, int>> runs = {
      {{"--worker_num", "0"}, 2},
      {{"--worker_num", "1", "--local_worker_num", "1", "--dry_run", "True"}, 0},
  };
  for (const auto& [args, code] : runs) {
    auto run = Start(args, {});
    EXPECT_EQ(RunToEnd(run).code, code) << run.Stderr();
    EXPECT_EQ(common::ListChildren(), std::vector<pid_t>{}) << args[1];
  }
  auto run = Start({"--worker_num", "2", "--local_worker_num", "2"}, {});
  EXPECT_EQ(WaitReady(2).size(), 2u);
  EXPECT_EQ(RunToEnd(run).code, 0) << run.Stderr();
  EXPECT_EQ(common::ListChildren(), std::vector<pid_t>{}) << "after a job";
}

}  // namespace
}  // namespace gangrun::testing
