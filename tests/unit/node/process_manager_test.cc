#include "node/process_manager.h"

#include <gtest/gtest.h>

#include <csignal>

#include "tests/testing/fake_backend.h"
#include "tests/testing/fake_clock.h"

namespace gangrun::node {
namespace {

using common::ExitStatus;
using std::chrono::seconds;

class ProcessManagerTest : public ::testing::Test {
 protected:
  ProcessManagerTest() {
    ProcessManager::Callbacks callbacks;
    callbacks.on_started = [this](const ProcessSpec& spec, pid_t pid) {
      started.push_back(spec.rank);
    };
    callbacks.on_exited = [this](const ProcessSpec& spec, pid_t, ExitStatus status, bool stopped) {
      exits.push_back({spec.rank, status, stopped});
    };
    callbacks.on_spawn_failed = [this](const ProcessSpec& spec, const absl::Status&) {
      failed.push_back(spec.rank);
    };
    callbacks.on_all_ended = [this] { ++all_ended; };
    manager = std::make_unique<ProcessManager>(backend, clock, std::move(callbacks));
  }

  void SpawnRanks(int n) {
    for (int rank = 0; rank < n; ++rank) {
      ProcessSpec spec;
      spec.rank = rank;
      manager->Spawn(spec);
    }
    for (int rank = 0; rank < n; ++rank) backend.Start(100 + rank);
  }

  struct Exit {
    int rank;
    ExitStatus status;
    bool stopped;
  };
  FakeBackend backend;
  testing::FakeClock clock;
  std::unique_ptr<ProcessManager> manager;
  std::vector<int> started;
  std::vector<int> failed;
  std::vector<Exit> exits;
  int all_ended = 0;
};

TEST_F(ProcessManagerTest, ReportsExitedAndSignaledDistinctly) {
  SpawnRanks(2);
  backend.Exit(100, ExitStatus::Exited(3));
  backend.Exit(101, ExitStatus::Signaled(SIGSEGV));
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_FALSE(exits[0].status.signaled);
  EXPECT_EQ(exits[0].status.code, 3);
  EXPECT_TRUE(exits[1].status.signaled);
  EXPECT_EQ(exits[1].status.signal, SIGSEGV);
  EXPECT_FALSE(exits[0].stopped);
  EXPECT_EQ(all_ended, 1);
}

TEST_F(ProcessManagerTest, StopSendsSigtermToEveryGroup) {
  SpawnRanks(3);
  manager->StopAll(seconds(30));
  EXPECT_EQ(backend.CountSignals(SIGTERM), 3);
  EXPECT_EQ(backend.CountSignals(SIGKILL), 0);
}

TEST_F(ProcessManagerTest, EscalatesToSigkillAfterGrace) {
  SpawnRanks(2);
  manager->StopAll(seconds(30));
  backend.Exit(100, ExitStatus::Signaled(SIGTERM));  // rank 1 ignores SIGTERM
  clock.Advance(seconds(29));
  EXPECT_EQ(backend.CountSignals(SIGKILL), 0);
  clock.Advance(seconds(1));
  EXPECT_GE(backend.CountSignals(SIGKILL), 1);
  EXPECT_TRUE((std::find(backend.signals.begin(), backend.signals.end(),
                         FakeBackend::Signal{101, SIGKILL}) != backend.signals.end()));
  backend.Exit(101, ExitStatus::Signaled(SIGKILL));
  EXPECT_TRUE(exits[1].stopped);
  EXPECT_EQ(all_ended, 1);
}

TEST_F(ProcessManagerTest, RepeatedStopOnlyShortensGrace) {
  SpawnRanks(1);
  manager->StopAll(seconds(30));
  clock.Advance(seconds(2));
  manager->StopAll(seconds(60));  // longer: ignored
  EXPECT_EQ(backend.CountSignals(SIGTERM), 1);
  clock.Advance(seconds(28));
  EXPECT_EQ(backend.CountSignals(SIGKILL), 1);  // the original deadline held
}

TEST_F(ProcessManagerTest, ZeroGraceStopKillsAtOnce) {
  SpawnRanks(1);
  manager->StopAll(seconds(30));
  manager->StopAll(seconds(0));
  EXPECT_EQ(backend.CountSignals(SIGKILL), 1);
}

TEST_F(ProcessManagerTest, ProcessStartingDuringStopIsStoppedAtOnce) {
  ProcessSpec spec;
  spec.rank = 0;
  manager->Spawn(spec);
  manager->StopAll(seconds(5));
  backend.Start(100);
  EXPECT_TRUE((backend.signals == std::vector<FakeBackend::Signal>{{100, SIGTERM}}));
}

TEST_F(ProcessManagerTest, NoTimerIsLeftOnceEverythingEnded) {
  SpawnRanks(1);
  manager->StopAll(seconds(5));
  backend.Exit(100, ExitStatus::Signaled(SIGTERM));
  EXPECT_EQ(clock.pending_timers(), 0u);
}

TEST_F(ProcessManagerTest, SpawnFailureIsReportedAndCountsAsEnded) {
  ProcessSpec spec;
  spec.rank = 4;
  manager->Spawn(spec);
  backend.FailStart("no such file");
  EXPECT_EQ(failed, std::vector<int>{4});
  EXPECT_EQ(all_ended, 1);
}

TEST_F(ProcessManagerTest, SpawnAllPreparesEachJustBeforeItsRequestAndEndsOnlyAfterTheLast) {
  std::vector<ProcessSpec> specs(3);
  for (int rank = 0; rank < 3; ++rank) specs[rank].rank = rank;
  std::vector<std::pair<int, size_t>> prepared;  // (rank, requests sent before it)
  manager->SpawnAll(std::move(specs), [&](ProcessSpec& spec) {
    prepared.emplace_back(spec.rank, backend.spawned.size());
    spec.env.push_back("PREPARED=1");
    // The first one cannot be readied: a failure at once, yet not the end of them all.
    return spec.rank == 0 ? absl::InternalError("no socket") : absl::OkStatus();
  });
  EXPECT_EQ(prepared, (std::vector<std::pair<int, size_t>>{{0, 0}, {1, 0}, {2, 1}}));
  EXPECT_EQ(failed, std::vector<int>{0});
  ASSERT_EQ(backend.spawned.size(), 2u);
  EXPECT_EQ(backend.spawned[0].env, std::vector<std::string>{"PREPARED=1"});
  EXPECT_EQ(all_ended, 0);
  backend.Start(101);
  backend.Start(102);
  backend.Exit(101, ExitStatus::Exited(0));
  EXPECT_EQ(all_ended, 0);
  backend.Exit(102, ExitStatus::Exited(0));
  EXPECT_EQ(all_ended, 1);
}

TEST_F(ProcessManagerTest, SignalAllForwardsToLiveGroups) {
  SpawnRanks(2);
  backend.Exit(100, ExitStatus::Exited(0));
  manager->SignalAll(SIGUSR1);
  EXPECT_TRUE((backend.signals == std::vector<FakeBackend::Signal>{{101, SIGUSR1}}));
}

}  // namespace
}  // namespace gangrun::node
