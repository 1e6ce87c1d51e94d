// A job with a store of record whose scheduler's launcher is paused past its lease (README "A
// store of record"): it steps down and no second scheduler ever acts, or, when nobody took
// over, it is elected again; a launcher stopped while it seeks the next scheduler exits.

#include <signal.h>

#include <chrono>

#include "tests/integration/store_fixture.h"

namespace gangrun::testing {
namespace {

using std::chrono::duration;
using std::chrono::seconds;
using std::chrono::steady_clock;

TEST_F(StoreTest, APausedSchedulerStepsDownAndNoSecondSchedulerEverActs) {
  ASSERT_NO_FATAL_FAILURE(StartStore(1));
  std::vector<Launched> launchers;
  for (int i = 0; i < 3; ++i) launchers.push_back(Start(Job("4:6", 2), Worker()));
  WaitReady(6);
  const store::SchedulerInfo first = WaitScheduler();
  Launched* paused = nullptr;
  for (auto& launcher : launchers) {
    if (launcher.pid == first.pid) paused = &launcher;
  }
  ASSERT_NE(paused, nullptr);
  ASSERT_EQ(kill(first.pid, SIGSTOP), 0);
  // What it said before the pause: generation 1, or 1 and 2 when the third launcher joined
  // after the first two had formed (a loaded machine).
  const size_t said_before_the_pause = paused->Stderr().size();
  // Past the lease: another launcher takes over and the survivors run the next generation.
  const store::SchedulerInfo second = WaitScheduler(first.term);
  WaitReady(4);
  ASSERT_EQ(kill(first.pid, SIGCONT), 0);
  ASSERT_TRUE(WaitForStderr(*paused, "no longer coordinates run " + run_, seconds(20)))
      << paused->Stderr();
  Go();
  for (auto& launcher : launchers) EXPECT_EQ(RunToEnd(launcher).code, 0) << launcher.Stderr();
  // The paused scheduler started nothing after it resumed.
  const std::string err = paused->Stderr();
  EXPECT_EQ(err.find("[gangrun scheduler] info: generation ", said_before_the_pause),
            std::string::npos)
      << err;
  // The store's fencing: every write of the record came from one term at a time, the first
  // scheduler's before the second's, none after.
  const auto history = RecordHistory();
  ASSERT_FALSE(history.empty());
  int64_t last_term = 0;
  uint64_t last_generation = 0;
  for (const auto& [term, generation] : history) {
    EXPECT_GE(term, last_term) << "a record by term " << term << " after one by " << last_term;
    EXPECT_GE(generation, last_generation);
    last_term = term;
    last_generation = generation;
  }
  EXPECT_EQ(history.front().first, first.term);
  EXPECT_NE(history.back().first, first.term);
  (void)second;
}

TEST_F(StoreTest, ALauncherThatSteppedDownCoordinatesAgainWhenItWins) {
  ASSERT_NO_FATAL_FAILURE(StartStore(1));
  // Its search after the step-down lasts its lease + 1 s + its node timeout (4 + 1 + 4 s):
  // room for the other's 2 s lease to run out on a loaded machine. Its pause lasts about its
  // lease and a formation (~6 s); its own node, paused with it, would give up on its
  // scheduler after T + 2 I of silence (6 s with a 1 s interval: half the runs), so 2 s.
  auto first = Start(Job("2:4", 2, {"--node_timeout", "4", "--heartbeat_interval", "2"}), Worker());
  const store::SchedulerInfo held = WaitScheduler();
  ASSERT_EQ(held.pid, first.pid);
  auto second = Start(Job("2:4", 2), Worker());
  WaitReady(4);
  // Paused past its lease: the other takes over and runs generation 2 alone (elastic).
  ASSERT_EQ(kill(first.pid, SIGSTOP), 0);
  const store::SchedulerInfo other = WaitScheduler(held.term);
  ASSERT_EQ(other.pid, second.pid) << "the other launcher did not take over";
  WaitReady(2);
  // That one is lost too; the first resumes, steps down, and wins the run back: its scheduler
  // must start generations again (a step-down fences one term, not the launcher).
  ASSERT_EQ(kill(second.pid, SIGKILL), 0);
  EXPECT_EQ(RunToEnd(second).signal, SIGKILL);
  ASSERT_EQ(kill(first.pid, SIGCONT), 0);
  const store::SchedulerInfo back = WaitScheduler(other.term);
  EXPECT_EQ(back.pid, first.pid);
  WaitReady(2);
  Go();
  EXPECT_EQ(RunToEnd(first).code, 0) << first.Stderr();
  EXPECT_NE(first.Stderr().find("no longer coordinates run " + run_), std::string::npos)
      << first.Stderr();
  auto record = Store()->ReadRecord();
  EXPECT_EQ(record->value["term"], back.term) << record->value.dump();
  EXPECT_EQ(record->value["outcome"]["kind"], "succeeded");
}

TEST_F(StoreTest, ASchedulerWhoseLeaseRanOutWhileNobodyTookOverIsElectedAgain) {
  ASSERT_NO_FATAL_FAILURE(StartStore(1));
  // Its lease is 2 s; the others wait 20 s before they give up on a silent scheduler.
  auto first = Start(Job("4", 2), Worker());
  const store::SchedulerInfo before = WaitScheduler();
  ASSERT_EQ(before.pid, first.pid);
  auto second = Start(Job("4", 2, {"--node_timeout", "20"}), Worker());
  WaitReady(4);
  ASSERT_EQ(kill(first.pid, SIGSTOP), 0);
  auto run = Store();
  const auto deadline = steady_clock::now() + seconds(20);
  while (run->Scheduler().value_or(std::nullopt).has_value()) {
    ASSERT_LT(steady_clock::now(), deadline) << "the paused scheduler's lease did not run out";
  }
  ASSERT_EQ(kill(first.pid, SIGCONT), 0);
  ASSERT_TRUE(WaitForStderr(first, "elected again", seconds(20))) << first.Stderr();
  const store::SchedulerInfo after = WaitScheduler(before.term);
  EXPECT_EQ(after.pid, first.pid);
  Go();
  EXPECT_EQ(RunToEnd(first).code, 0) << first.Stderr();
  EXPECT_EQ(RunToEnd(second).code, 0) << second.Stderr();
  EXPECT_EQ(first.Stderr().find("no longer coordinates"), std::string::npos) << first.Stderr();
  auto record = run->ReadRecord();
  EXPECT_EQ(record->value["term"], after.term) << record->value.dump();
  EXPECT_EQ(record->value["generation"], 1) << "the job went on in its first generation";
  EXPECT_EQ(record->value["outcome"]["kind"], "succeeded");
}

// A record write sent just before a pause lands, but its answer is never heard (its deadline
// passes in the pause): the record then has a revision the scheduler does not know, written
// under its own term. Nobody else coordinated: it is elected again. (The test writes the same
// record again, which is what such a write leaves.)
TEST_F(StoreTest, ASchedulersOwnWriteWhoseAnswerWasLostDoesNotMakeItStepDown) {
  ASSERT_NO_FATAL_FAILURE(StartStore(1));
  auto first = Start(Job("4", 2), Worker());
  const store::SchedulerInfo before = WaitScheduler();
  auto second = Start(Job("4", 2, {"--node_timeout", "20"}), Worker());
  WaitReady(4);
  auto run = Store();
  auto record = run->ReadRecord();
  ASSERT_TRUE(record.ok()) << record.status();
  ASSERT_EQ(record->value["term"], before.term) << record->value.dump();
  ASSERT_TRUE(run->client().Put(run->record_key(), record->value.dump()).ok());
  ASSERT_EQ(kill(first.pid, SIGSTOP), 0);
  const auto deadline = steady_clock::now() + seconds(20);
  while (run->Scheduler().value_or(std::nullopt).has_value()) {
    ASSERT_LT(steady_clock::now(), deadline) << "the paused scheduler's lease did not run out";
  }
  ASSERT_EQ(kill(first.pid, SIGCONT), 0);
  ASSERT_TRUE(WaitForStderr(first, "elected again", seconds(20))) << first.Stderr();
  Go();
  EXPECT_EQ(RunToEnd(first).code, 0) << first.Stderr();
  EXPECT_EQ(RunToEnd(second).code, 0) << second.Stderr();
  EXPECT_EQ(run->ReadRecord()->value["outcome"]["kind"], "succeeded");
}

TEST_F(StoreTest, ALauncherStoppedWhileItSeeksTheNextSchedulerExitsAtOnce) {
  ASSERT_NO_FATAL_FAILURE(StartStore(1));
  // The scheduler's lease is 30 s: a node that loses it seeks for up to 11 s (its own 5 s
  // lease + 1 s + its 5 s node timeout) and finds the old key all along.
  auto first = Start(Job("4", 2, {"--node_timeout", "30"}), Worker());
  ASSERT_EQ(WaitScheduler().pid, first.pid);
  auto second = Start(Job("4", 2, {"--node_timeout", "5"}), Worker());
  WaitReady(4);
  ASSERT_EQ(kill(first.pid, SIGSTOP), 0);
  ASSERT_TRUE(WaitForStderr(second, "looking for the job's next scheduler", seconds(20)))
      << second.Stderr();
  const auto stopped_at = steady_clock::now();
  ASSERT_EQ(kill(second.pid, SIGTERM), 0);
  EXPECT_EQ(RunToEnd(second).code, 128 + SIGTERM) << second.Stderr();
  const double took = duration<double>(steady_clock::now() - stopped_at).count();
  EXPECT_LT(took, 5.0) << "the launcher waited for its search to end";
  EXPECT_NE(second.Stderr().find("while looking for the job's next scheduler"), std::string::npos)
      << second.Stderr();
  kill(first.pid, SIGKILL);
  EXPECT_EQ(RunToEnd(first).signal, SIGKILL);
}

}  // namespace
}  // namespace gangrun::testing
