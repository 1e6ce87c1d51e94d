// Where a job's time went (scheduler/ledger.h), on the fake clock: the header's worked example
// phase by phase, every second in exactly one phase, and the one-line summary. No Scheduler.

#include "scheduler/ledger.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/testing/fake_clock.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::seconds;

double Seconds(const v1::Ledger& ledger, const std::string& phase) {
  auto it = ledger.seconds().find(phase);
  return it == ledger.seconds().end() ? 0 : it->second;
}

double Sum(const v1::Ledger& ledger) {
  double sum = 0;
  for (const auto& [phase, value] : ledger.seconds()) sum += value;
  return sum;
}

TEST(LedgerTest, TheHeadersWorkedExample) {
  testing::FakeClock clock;
  Ledger ledger(clock);
  ledger.OnState(JobState::kForming);
  clock.Advance(seconds(2));
  ledger.OnState(JobState::kRunning);
  ledger.OnGenerationStarted(1, 2, false);
  clock.Advance(seconds(3));
  ledger.OnFirstReport();
  EXPECT_EQ(ledger.phase(), LedgerPhase::kTraining);
  ledger.OnFirstReport();  // both ranks have reported: the 3 s were starting
  clock.Advance(seconds(21));
  ledger.OnCheckpoint(100, seconds(1));  // heard of a second late
  ledger.OnCheckpoint(99, seconds(0));   // not beyond it: nothing
  clock.Advance(seconds(19));
  ledger.Reclassify(LedgerPhase::kStalled, seconds(10));  // judged hung after 10 s of silence
  ledger.OnState(JobState::kCapturing);
  clock.Advance(seconds(1));
  ledger.OnState(JobState::kStopping);
  clock.Advance(seconds(1));
  ledger.OnState(JobState::kBackingOff);
  clock.Advance(seconds(1));
  ledger.OnState(JobState::kForming);
  EXPECT_EQ(ledger.phase(), LedgerPhase::kReforming);
  clock.Advance(seconds(1));
  ledger.OnState(JobState::kRunning);
  ledger.OnGenerationStarted(2, 2, false);
  clock.Advance(seconds(3));
  ledger.OnFirstReport();
  ledger.OnFirstReport();
  clock.Advance(seconds(17));
  ledger.OnState(JobState::kFinished);
  clock.Advance(seconds(100));  // frozen at the end

  const v1::Ledger done = ledger.ToProto();
  EXPECT_EQ(done.wall_seconds(), 69);
  EXPECT_EQ(Seconds(done, "forming"), 2);
  EXPECT_EQ(Seconds(done, "starting"), 6);
  EXPECT_EQ(Seconds(done, "training"), 47);
  EXPECT_EQ(Seconds(done, "stalled"), 10);
  EXPECT_EQ(Seconds(done, "detecting"), 1);
  EXPECT_EQ(Seconds(done, "stopping"), 1);
  EXPECT_EQ(Seconds(done, "backoff"), 1);
  EXPECT_EQ(Seconds(done, "reforming"), 1);
  EXPECT_EQ(Sum(done), done.wall_seconds());
  EXPECT_EQ(done.lost_work_seconds(), 10);
  EXPECT_EQ(done.checkpoint_step(), 100);
  EXPECT_NEAR(done.ettr(), (47.0 - 10) / 69, 1e-9);
  ASSERT_EQ(done.generations_size(), 3);  // before the first, and each generation
  EXPECT_EQ(done.generations(1).generation(), 1u);
  EXPECT_EQ(done.generations(1).seconds().at("training"), 30);
  EXPECT_EQ(done.generations(1).lost_work_seconds(), 10);
  EXPECT_EQ(done.generations(1).checkpoint_step(), 100);
  EXPECT_EQ(done.generations(2).seconds().at("training"), 17);
  EXPECT_EQ(done.generations(2).lost_work_seconds(), 0) << "it succeeded: nothing redone";
  EXPECT_EQ(DescribeLedger(done),
            "1 m 9 s in all, ETTR 54% (training 47 s); the largest losses: training redone after "
            "restarts 10 s, stalled 10 s, starting 6.0 s; last checkpoint: step 100");
  // As the event log and the store's record keep it, and back.
  const v1::Ledger back = LedgerFromJson(LedgerJson(done));
  EXPECT_EQ(back.lost_work_seconds(), 10);
  EXPECT_EQ(back.checkpoint_step(), 100);
}

// A job whose ranks report progress: a generation that failed before all its ranks reported
// (a crash in its imports, a peer that never joined init_process_group) was starting, not
// training, whether the job's reports were known then (generation 2) or only later
// (generation 1); nothing of it is redone.
TEST(LedgerTest, AGenerationThatFailedBeforeItsRanksReportedWasStarting) {
  testing::FakeClock clock;
  Ledger ledger(clock);
  ledger.OnState(JobState::kRunning);
  ledger.OnGenerationStarted(1, 2, false);
  ledger.OnFirstReport();  // one rank of two
  clock.Advance(seconds(5));
  ledger.OnState(JobState::kStopping);
  ledger.OnState(JobState::kRunning);
  ledger.OnGenerationStarted(2, 2, false);
  clock.Advance(seconds(2));
  ledger.OnFirstReport();
  ledger.OnFirstReport();  // the job reports: generation 1's 5 s were starting
  clock.Advance(seconds(10));
  ledger.OnState(JobState::kStopping);
  ledger.OnState(JobState::kRunning);
  ledger.OnGenerationStarted(3, 2, false);
  clock.Advance(seconds(4));  // fails before any report
  ledger.OnState(JobState::kStopping);
  ledger.OnState(JobState::kRunning);
  ledger.OnGenerationStarted(4, 2, false);
  ledger.OnFirstReport();
  ledger.OnFirstReport();
  clock.Advance(seconds(6));
  ledger.OnState(JobState::kFinished);
  const v1::Ledger done = ledger.ToProto();
  EXPECT_EQ(Seconds(done, "starting"), 5 + 2 + 4);
  EXPECT_EQ(Seconds(done, "training"), 10 + 6);
  EXPECT_EQ(done.lost_work_seconds(), 10) << "generation 2's training, without a checkpoint";
  EXPECT_EQ(Sum(done), done.wall_seconds());
  auto of = [&](uint64_t generation) {
    for (const auto& g : done.generations()) {
      if (g.generation() == generation) return g;
    }
    return v1::GenerationLedger();
  };
  EXPECT_EQ(of(1).seconds().count("training"), 0u);
  EXPECT_EQ(of(1).seconds().at("starting"), 5);
  EXPECT_EQ(of(1).lost_work_seconds(), 0);
  EXPECT_EQ(of(2).lost_work_seconds(), 10);
  EXPECT_EQ(of(3).seconds().at("starting"), 4);
}

// A job over in a blink is said in milliseconds, so that its line adds up to what it says.
// A daemon's job waited 7 s for slots before its scheduler started: that is its first phase,
// and its wall time counts from the submission.
TEST(LedgerTest, ASubmittedJobsWaitForSlotsIsQueued) {
  testing::FakeClock clock;
  const common::TimePoint submitted = clock.Now();
  clock.Advance(seconds(7));
  Ledger ledger(clock, submitted);
  ledger.OnState(JobState::kForming);
  clock.Advance(seconds(2));
  ledger.OnState(JobState::kRunning);
  ledger.OnGenerationStarted(1, 1, false);
  clock.Advance(seconds(11));
  ledger.OnState(JobState::kFinished);
  const v1::Ledger out = ledger.ToProto();
  EXPECT_DOUBLE_EQ(Seconds(out, "queued"), 7);
  EXPECT_DOUBLE_EQ(Seconds(out, "forming"), 2);
  EXPECT_DOUBLE_EQ(out.wall_seconds(), 20);
  EXPECT_DOUBLE_EQ(Sum(out), out.wall_seconds());
  EXPECT_NEAR(out.ettr(), 11.0 / 20, 1e-9);
  EXPECT_NE(DescribeLedger(out).find("queued 7.0 s"), std::string::npos) << DescribeLedger(out);
  // A launcher's own job (or one submitted just now) has none.
  Ledger own(clock, clock.Now());
  EXPECT_DOUBLE_EQ(Seconds(own.ToProto(), "queued"), 0);
}

// The event log's story (Event::kPhase, kPhaseMoved): each phase the job enters, with how long
// the one before lasted, and each span moved after the fact; what it tells adds up to the
// ledger.
TEST(LedgerTest, EachPhaseChangeAndEachMoveIsTold) {
  testing::FakeClock clock;
  const common::TimePoint submitted = clock.Now();
  clock.Advance(seconds(4));
  Ledger ledger(clock, submitted);
  std::vector<std::string> told;
  ledger.SetOnChange([&](const Ledger::Change& change) {
    told.push_back((change.moved ? std::to_string(change.generation) + " " : "") +
                   std::string(LedgerPhaseName(change.from)) + (change.moved ? " => " : " -> ") +
                   std::string(LedgerPhaseName(change.to)) + " " +
                   std::to_string(common::SecondsOf(change.seconds)).substr(0, 3));
  });
  ledger.Open();
  clock.Advance(seconds(2));
  ledger.OnState(JobState::kRunning);
  ledger.OnGenerationStarted(1, 1, false);
  clock.Advance(seconds(3));
  ledger.OnFirstReport();  // the 3 s were starting
  clock.Advance(seconds(10));
  ledger.Reclassify(LedgerPhase::kStalled, seconds(4));
  ledger.OnState(JobState::kStopping);
  clock.Advance(seconds(1));
  ledger.OnState(JobState::kBackingOff);
  clock.Advance(seconds(1));
  ledger.OnState(JobState::kForming);
  ledger.OnHealthChecks(true);
  ledger.OnHealthChecks(true);  // no change: told once
  clock.Advance(seconds(2));
  ledger.OnHealthChecks(false);
  ledger.OnState(JobState::kFinished);
  EXPECT_EQ(told, (std::vector<std::string>{
                      "queued -> forming 4.0",
                      "forming -> training 2.0",
                      "1 training => starting 3.0",
                      "1 training => stalled 4.0",
                      "training -> stopping 13.",
                      "stopping -> backoff 1.0",
                      "backoff -> reforming 1.0",
                      "reforming -> health_checks 0.0",
                      "health_checks -> reforming 2.0",
                  }));
  const v1::Ledger done = ledger.ToProto();
  EXPECT_DOUBLE_EQ(Seconds(done, "starting"), 3);
  EXPECT_DOUBLE_EQ(Seconds(done, "training"), 6);
  EXPECT_DOUBLE_EQ(Seconds(done, "stalled"), 4);
}

// The what-if's tighter node timeout: 3 heartbeat intervals, or twice the longest silence of a
// node that stayed, whichever is larger; said only when it is below the node timeout and saves
// at least 1 s.
TEST(LedgerTest, ATighterNodeTimeoutIsProposedFromTheSilencesThatWereNotLosses) {
  v1::Ledger ledger;
  ledger.set_silent_losses(2);
  ledger.set_silent_loss_seconds(21);
  WhatIfSettings settings{0, seconds(10), seconds(1), std::chrono::milliseconds(900)};
  EXPECT_EQ(WhatIf(ledger, settings),
            "a node timeout of 3 s (--node_timeout; no node that stayed was silent for more "
            "than 0.9 s) would have saved about 15 s of detecting: 2 node(s) lost to silence");
  settings.longest_silence = std::chrono::milliseconds(2600);  // twice: 5.2 s, up to 6 s
  EXPECT_NE(WhatIf(ledger, settings).find("a node timeout of 6 s"), std::string::npos);
  settings.longest_silence = seconds(5);  // 10 s: no tighter timeout is safe
  EXPECT_EQ(WhatIf(ledger, settings), "");
  ledger.set_silent_losses(0);
  ledger.set_silent_loss_seconds(0);
  settings.longest_silence = seconds(0);
  EXPECT_EQ(WhatIf(ledger, settings), "") << "nothing was lost to silence";
}

TEST(LedgerTest, ABlinkOfAJobIsSaidInMilliseconds) {
  v1::Ledger ledger;
  ledger.set_wall_seconds(0.04);
  ledger.set_ettr(0.5);
  ledger.set_checkpoint_step(-1);  // none
  (*ledger.mutable_seconds())["training"] = 0.02;
  (*ledger.mutable_seconds())["starting"] = 0.02;
  EXPECT_EQ(DescribeLedger(ledger), "40 ms in all, ETTR 50% (training 20 ms)")
      << "losses under 0.05 s are not named";
}

// Without the hook or reports, running is training, every generation.
TEST(LedgerTest, AJobThatNeverReportsTrainsWhileItRuns) {
  testing::FakeClock clock;
  Ledger ledger(clock);
  ledger.OnState(JobState::kRunning);
  ledger.OnGenerationStarted(1, 1, false);
  clock.Advance(seconds(5));
  ledger.OnState(JobState::kStopping);
  ledger.OnState(JobState::kRunning);
  ledger.OnGenerationStarted(2, 1, false);
  clock.Advance(seconds(3));
  ledger.OnState(JobState::kFinished);
  const v1::Ledger done = ledger.ToProto();
  EXPECT_EQ(Seconds(done, "training"), 8);
  EXPECT_EQ(Seconds(done, "starting"), 0);
  EXPECT_EQ(done.lost_work_seconds(), 5);
}

TEST(LedgerTest, ARunningJobIsCountedToNowAndSilenceIsNeverMoreThanItTrained) {
  testing::FakeClock clock;
  Ledger ledger(clock);
  clock.Advance(seconds(1));
  ledger.OnState(JobState::kRunning);
  ledger.OnGenerationStarted(1, 1, false);
  clock.Advance(seconds(4));
  // A node lost after 30 s of silence, in a generation that ran 4 s: 4 s were detecting.
  ledger.Reclassify(LedgerPhase::kDetecting, seconds(30));
  const v1::Ledger now = ledger.ToProto();
  EXPECT_EQ(now.wall_seconds(), 5);
  EXPECT_EQ(Seconds(now, "detecting"), 4);
  EXPECT_EQ(Seconds(now, "training"), 0);
  EXPECT_EQ(Sum(now), now.wall_seconds());
  EXPECT_EQ(now.phase(), "training");
  // Ranks that never report progress: all of their time is training (no starting is known).
  clock.Advance(seconds(5));
  EXPECT_EQ(Seconds(ledger.ToProto(), "training"), 5);
  EXPECT_EQ(Seconds(ledger.ToProto(), "starting"), 0);
}

TEST(LedgerTest, AnAdoptedGenerationHasNoStartingTime) {
  testing::FakeClock clock;
  Ledger ledger(clock);
  ledger.OnState(JobState::kRunning);
  ledger.OnGenerationStarted(4, 1, true);
  clock.Advance(seconds(3));
  ledger.OnFirstReport();
  EXPECT_EQ(Seconds(ledger.ToProto(), "starting"), 0);
  EXPECT_EQ(Seconds(ledger.ToProto(), "training"), 3);
}

// The event log's and the store's form, and back; a record gangrun did not write reads as far
// as it can, never throwing.
TEST(LedgerTest, ItsJsonReadsBackAndAForeignOneHarmsNothing) {
  v1::Ledger ledger;
  ledger.set_wall_seconds(69);
  ledger.set_ettr(0.68);
  (*ledger.mutable_seconds())["training"] = 47;
  (*ledger.mutable_seconds())["stalled"] = 10;
  const v1::Ledger back = LedgerFromJson(LedgerJson(ledger));
  EXPECT_EQ(back.wall_seconds(), 69);
  EXPECT_EQ(back.ettr(), 0.68);
  EXPECT_EQ(back.seconds().at("training"), 47);
  EXPECT_EQ(back.seconds().at("stalled"), 10);
  const v1::Ledger foreign = LedgerFromJson(nlohmann::json::parse(
      R"({"wall_seconds": "x", "ettr": 7, "seconds": {"training": -3, "mining": 5,
          "backoff": [1], "stopping": 2}})"));
  EXPECT_EQ(foreign.wall_seconds(), 0);
  EXPECT_EQ(foreign.ettr(), 1);
  EXPECT_EQ(foreign.seconds_size(), 1);
  EXPECT_EQ(foreign.seconds().at("stopping"), 2);
  EXPECT_EQ(LedgerFromJson(nlohmann::json::array()).seconds_size(), 0);
}

TEST(LedgerTest, ItKeepsTheLastGenerationsAndEverySecondOfTheJob) {
  testing::FakeClock clock;
  Ledger ledger(clock);
  for (uint64_t generation = 1; generation <= 100; ++generation) {
    ledger.OnState(JobState::kRunning);
    ledger.OnGenerationStarted(generation, 1, false);
    clock.Advance(seconds(1));
    ledger.OnState(JobState::kStopping);
    ledger.OnState(JobState::kForming);
  }
  const v1::Ledger now = ledger.ToProto();
  ASSERT_EQ(now.generations_size(), 64);
  EXPECT_EQ(now.generations(0).generation(), 37u);
  EXPECT_EQ(Seconds(now, "training"), 100);
}

// Without a checkpoint, a restart does every step again; an adopted generation (a daemon's
// failover, workers untouched) redoes nothing.
TEST(LedgerTest, WithoutACheckpointARestartLosesAllOfTheGenerationsTraining) {
  testing::FakeClock clock;
  Ledger ledger(clock);
  ledger.OnState(JobState::kRunning);
  ledger.OnGenerationStarted(1, 1, false);
  ledger.OnFirstReport();
  clock.Advance(seconds(8));
  ledger.OnGenerationStarted(1, 1, true);  // adopted: the same generation goes on
  clock.Advance(seconds(2));
  ledger.OnState(JobState::kStopping);
  clock.Advance(seconds(1));
  ledger.OnState(JobState::kRunning);
  ledger.OnGenerationStarted(2, 1, false);
  ledger.OnFirstReport();
  clock.Advance(seconds(5));
  const v1::Ledger now = ledger.ToProto();
  EXPECT_EQ(now.lost_work_seconds(), 10);
  EXPECT_EQ(now.checkpoint_step(), -1);
  EXPECT_NEAR(now.ettr(), (15.0 - 10) / 16, 1e-9);
  EXPECT_EQ(LedgerFromJson(nlohmann::json::object()).checkpoint_step(), -1);
}

}  // namespace
}  // namespace gangrun::scheduler
