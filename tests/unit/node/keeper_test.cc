#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <boost/asio/io_context.hpp>

#include "node/keeper_client.h"
#include "tests/testing/process_test.h"
#include "tests/testing/run_until.h"

namespace gangrun::node {
namespace {

using std::chrono::milliseconds;
using testing::ReadFile;

class KeeperTest : public testing::ProcessTest {
 protected:
  void SetUp() override {
    auto client = KeeperClient::Start(io, {"/proc/self/exe", "__keeper"});
    ASSERT_TRUE(client.ok()) << client.status();
    keeper = std::move(*client);
    keeper->SetExitHandler(
        [this](pid_t pid, common::ExitStatus status) { exits.emplace_back(pid, status); });
  }

  void TearDown() override {
    keeper.reset();  // the keeper exits; then nothing may be left
    ProcessTest::TearDown();
  }

  // Runs the io_context until `done()` or a 10 s deadline.
  bool RunUntil(const std::function<bool()>& done) {
    return testing::RunUntil(io, done, std::chrono::seconds(10));
  }

  pid_t SpawnShell(const std::string& script, const std::string& log = "") {
    ProcessSpec spec;
    spec.exec_path = "/bin/sh";
    spec.argv = {"sh", "-c", script};
    spec.env = {"PATH=/usr/bin:/bin"};
    spec.log_path = log;
    std::optional<absl::StatusOr<pid_t>> result;
    keeper->Spawn(spec, [&](absl::StatusOr<pid_t> pid) { result = std::move(pid); });
    EXPECT_TRUE(RunUntil([&] { return result.has_value(); }));
    EXPECT_TRUE(result->ok()) << result->status();
    return result->ok() ? **result : -1;
  }

  boost::asio::io_context io;
  std::unique_ptr<KeeperClient> keeper;
  std::vector<std::pair<pid_t, common::ExitStatus>> exits;
  testing::TempDir dir;
};

TEST_F(KeeperTest, ReportsTheExitOfWhatItSpawned) {
  pid_t pid = SpawnShell("exit 4");
  ASSERT_TRUE(RunUntil([&] { return !exits.empty(); }));
  EXPECT_EQ(exits[0].first, pid);
  EXPECT_EQ(exits[0].second.code, 4);
}

TEST_F(KeeperTest, LogFileHoldsStdoutAndStderr) {
  std::string log = dir.File("w.log");
  SpawnShell("echo out; echo err >&2", log);
  ASSERT_TRUE(RunUntil([&] { return !exits.empty(); }));
  EXPECT_EQ(ReadFile(log), "out\nerr\n");
}

TEST_F(KeeperTest, SignalReachesTheProcessGroup) {
  pid_t pid = SpawnShell("sleep 100 & wait");
  keeper->SignalGroup(pid, SIGTERM);
  ASSERT_TRUE(RunUntil([&] { return !exits.empty(); }));
  EXPECT_TRUE(exits[0].second.signaled);
  EXPECT_EQ(exits[0].second.signal, SIGTERM);
}

TEST_F(KeeperTest, FailedSpawnIsReported) {
  ProcessSpec spec;
  spec.exec_path = dir.File("missing");
  spec.argv = {"missing"};
  std::optional<absl::StatusOr<pid_t>> result;
  keeper->Spawn(spec, [&](absl::StatusOr<pid_t> pid) { result = std::move(pid); });
  ASSERT_TRUE(RunUntil([&] { return result.has_value(); }));
  EXPECT_FALSE(result->ok());
}

TEST_F(KeeperTest, ShutdownKillsGrandchildrenThatLeftTheSession) {
  std::string pid_file = dir.File("gc");
  SpawnShell("setsid sh -c 'trap \"\" TERM; echo $$ > " + pid_file + ".tmp; mv " + pid_file +
             ".tmp " + pid_file + "; exec sleep 100' & wait");
  ASSERT_TRUE(RunUntil([&] { return !ReadFile(pid_file).empty(); }));
  pid_t grandchild = std::stoi(ReadFile(pid_file));
  EXPECT_TRUE(testing::IsAlive(grandchild));
  bool done = false;
  keeper->Shutdown(milliseconds(200), [&] { done = true; });
  ASSERT_TRUE(RunUntil([&] { return done; }));
  EXPECT_TRUE(testing::WaitGone(grandchild, milliseconds(1000)));
}

TEST_F(KeeperTest, LosingTheLauncherKillsEverything) {
  std::string pid_file = dir.File("gc");
  pid_t worker = SpawnShell("setsid sh -c 'echo $$ > " + pid_file + ".tmp; mv " + pid_file +
                            ".tmp " + pid_file + "; exec sleep 100' & sleep 100");
  ASSERT_TRUE(RunUntil([&] { return !ReadFile(pid_file).empty(); }));
  pid_t grandchild = std::stoi(ReadFile(pid_file));
  keeper.reset();  // the socket closes, as when the launcher dies
  EXPECT_TRUE(testing::WaitGone(worker, milliseconds(1000)));
  EXPECT_TRUE(testing::WaitGone(grandchild, milliseconds(1000)));
}

// A spawn the keeper never answered fails after the loss is reported, so that the launcher
// knows the loss, not a rank that "could not start", is why its job ended (a CI failure: the
// keeper killed between its child's exec and its answer).
TEST_F(KeeperTest, ALostKeeperIsReportedBeforeTheSpawnsItNeverAnswered) {
  std::vector<std::string> order;
  keeper->SetLostHandler([&] { order.push_back("lost"); });
  ASSERT_EQ(kill(keeper->keeper_pid(), SIGSTOP), 0);
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, keeper->keeper_pid(), &info, WSTOPPED | WNOWAIT), 0);
  ProcessSpec spec;
  spec.exec_path = "/bin/true";
  spec.argv = {"true"};
  std::optional<absl::StatusOr<pid_t>> result;
  keeper->Spawn(spec, [&](absl::StatusOr<pid_t> pid) {
    order.push_back("spawn");
    result = std::move(pid);
  });
  ASSERT_EQ(kill(keeper->keeper_pid(), SIGKILL), 0);
  ASSERT_TRUE(RunUntil([&] { return result.has_value(); }));
  EXPECT_FALSE(result->ok());
  EXPECT_EQ(order, (std::vector<std::string>{"lost", "spawn"}));
}

}  // namespace
}  // namespace gangrun::node
