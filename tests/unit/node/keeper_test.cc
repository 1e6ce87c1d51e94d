#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>

#include "common/clock.h"
#include "common/env_list.h"
#include "common/env_names.h"
#include "node/keeper_client.h"
#include "node/worker_channels.h"
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

// The kernel's strings are bytes: an environment, arguments and a log path that are not UTF-8
// reach the worker whole (a `string` field made the keeper drop such a request, and the
// launch waited for ever).
TEST_F(KeeperTest, BytesThatAreNotUtf8ReachTheWorkerWhole) {
  ProcessSpec spec;
  spec.exec_path = "/bin/sh";
  spec.argv = {"sh", "-c", "printf '%s|%s' \"$LATIN\" \"$0\"", "arg\xe9"};
  spec.env = {"PATH=/usr/bin:/bin", "LATIN=caf\xe9\xff"};
  spec.log_path = dir.File("w\xe9.log");
  std::optional<absl::StatusOr<pid_t>> result;
  keeper->Spawn(spec, [&](absl::StatusOr<pid_t> pid) { result = std::move(pid); });
  ASSERT_TRUE(RunUntil([&] { return result.has_value(); })) << "the keeper never answered";
  ASSERT_TRUE(result->ok()) << result->status();
  ASSERT_TRUE(RunUntil([&] { return !exits.empty(); }));
  EXPECT_EQ(ReadFile(spec.log_path), "caf\xe9\xff|arg\xe9");
}

// A worker's progress socket is made with its GANGRUN_PROGRESS, just before its spawn: the
// first spawn waits for one socket, not for one per local rank.
// The supervisor's way to a node, for the channels' test: what it sends, nothing running.
class ChannelsOwner : public Supervisor::Owner {
 public:
  void Send(v1::NodeEvent event) override { sent.push_back(std::move(event)); }
  const std::map<pid_t, ProcessSpec>* Running() const override { return nullptr; }
  uint64_t generation() const override { return 1; }
  std::vector<v1::NodeEvent> sent;
};

// A worker's progress socket is made with its GANGRUN_PROGRESS, just before its spawn: the
// first spawn waits for one socket, not for one per local rank. Its reports reach the
// supervisor the channels were given, and nothing once it is gone.
TEST_F(KeeperTest, AProgressSocketIsBoundWhenItsWorkerIsPreparedAndHearsItsReports) {
  auto channels = WorkerChannels::Create(io, *keeper);
  ASSERT_TRUE(channels.ok()) << channels.status();
  Supervision supervision = (*channels)->supervision();
  absl::StatusOr<std::string> first = supervision.progress_path(0);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string dir = first->substr(0, first->rfind('/'));
  EXPECT_EQ(access((dir + "/p1").c_str(), F_OK), -1) << "bound before its worker was prepared";
  common::AsioClock clock(io.get_executor());
  ChannelsOwner owner;
  auto supervisor = std::make_unique<Supervisor>(clock, owner, supervision);
  v1::StartGeneration start;
  supervisor->StartGeneration(start);
  ProcessSpec worker;
  worker.rank = 5;
  worker.local_rank = 2;
  ASSERT_TRUE(supervisor->AddWorker(start, worker).ok());
  const std::string third(common::LastValueOf(worker.env, env::kProgress).value_or(""));
  EXPECT_EQ(third, dir + "/p2");
  auto send = [&](const std::string& report) {
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un address = {};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", third.c_str());
    EXPECT_EQ(sendto(fd, report.data(), report.size(), 0, reinterpret_cast<sockaddr*>(&address),
                     sizeof(address)),
              static_cast<ssize_t>(report.size()));
    close(fd);
  };
  send("step 1");
  ASSERT_TRUE(RunUntil([&] {
    supervisor->SendProgress();
    return !owner.sent.empty();
  }));
  ASSERT_EQ(owner.sent[0].progress().ranks_size(), 1);
  EXPECT_EQ(owner.sent[0].progress().ranks(0).rank(), 5);
  EXPECT_EQ(owner.sent[0].progress().ranks(0).step(), 1);
  supervisor.reset();  // the reports go nowhere now, and nothing breaks
  send("step 2");
  io.run_for(std::chrono::milliseconds(50));
  EXPECT_EQ(owner.sent.size(), 1u);
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
