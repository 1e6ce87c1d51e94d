// Recovery without a person (scheduler/spares.cc, spare_pool.h, health_rounds.h,
// recovery_policy.h): spares that take a lost or excluded node's place, health rounds between
// generations, exit codes that must not be retried, bad-node exclusion, restarts without progress,
// job-wide signals and the time limit; a real Scheduler on the fake clock. The policy alone:
// recovery_policy_test.cc.

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>

#include "scheduler/recovery_policy.h"
#include "scheduler/scheduler.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/scheduler_fakes.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::seconds;
using Link = testing::FakeNodeLink;

class RecoveryTest : public ::testing::Test {
 protected:
  void Make(int world, int max_restarts = 0, int spares = 0) {
    options.world_size = world;
    options.cluster_timeout = seconds(10);
    options.node_timeout = node_timeout;
    options.heartbeat_interval = seconds(1);
    options.max_restarts = max_restarts;
    options.restart_backoff_initial = seconds(1);
    options.spare_nodes = spares;
    scheduler = std::make_unique<Scheduler>(clock, options);
    scheduler->SetOnFinished([this](const v1::JobOutcome& o) { outcome = o; });
    scheduler->Start();
  }
  // A node of one worker; its link is links[index].
  int Join(const std::string& name, bool health_check = false, const std::string& domain = "") {
    links.push_back(std::make_unique<Link>());
    int id = scheduler->AddNode(links.back().get());
    v1::NodeEvent join = testing::JoinEvent(name, "10.0.0." + std::to_string(links.size()), -1, 1);
    join.mutable_join()->set_health_check(health_check);
    join.mutable_join()->set_topology_domain(domain);
    scheduler->OnNodeEvent(id, join);
    return id;
  }
  Link& link(size_t index) { return *links.at(index); }
  void Send(int id, v1::NodeEvent event) {
    event.set_generation(scheduler->generation());
    scheduler->OnNodeEvent(id, event);
  }
  // The rank this node's last Start gave it.
  static int RankOf(const Link& link) {
    for (auto it = link.commands.rbegin(); it != link.commands.rend(); ++it) {
      if (it->has_start()) return it->start().assignment().first_rank();
    }
    return -1;
  }
  static int Count(const Link& link, v1::NodeCommand::CommandCase kind) {
    int n = 0;
    for (const auto& command : link.commands) n += command.command_case() == kind;
    return n;
  }
  // Every node of the running generation: its worker exits `code` (rank = its rank), it ends.
  void EndGeneration(const std::vector<int>& ids, const std::vector<size_t>& indexes, int code) {
    for (size_t i = 0; i < ids.size(); ++i) {
      Send(ids[i], testing::ExitedEvent(0, RankOf(link(indexes[i])), code));
    }
    for (int id : ids) Send(id, testing::EndedEvent(0));
  }
  // Time passes; the nodes keep sending heartbeats.
  void Pass(int secs, const std::vector<int>& ids) {
    for (int i = 0; i < secs; ++i) {
      for (int id : ids) Send(id, testing::HeartbeatEvent());
      clock.Advance(seconds(1));
    }
  }
  // Nodes a and b form the job and c waits as a spare (links 0, 1, 2); b's connection breaks
  // and a's worker is stopped, so generation 1 is over. a's and c's ids, and b's rank.
  struct LostB {
    int a, c, b_rank;
  };
  LostB LoseBWhileCWaitsAsASpare() {
    const int a = Join("a");
    const int b = Join("b");
    const int c = Join("c");
    const int b_rank = RankOf(link(1));
    scheduler->OnNodeDisconnected(b);
    Send(a, testing::ExitedEvent(0, RankOf(link(0)), 143, /*stopped=*/true));
    Send(a, testing::EndedEvent(0));
    return {a, c, b_rank};
  }
  v1::NodeState StateOf(const std::string& name) const {
    const v1::GetStatusResponse status = scheduler->Status();
    for (const auto& node : status.nodes()) {
      if (node.node_name() == name) return node.state();
    }
    return v1::NODE_STATE_UNSPECIFIED;
  }

  testing::FakeClock clock;
  common::Duration node_timeout = seconds(60);  // Make's
  Scheduler::Options options;
  std::unique_ptr<Scheduler> scheduler;
  std::vector<std::unique_ptr<Link>> links;
  std::optional<v1::JobOutcome> outcome;
};

TEST_F(RecoveryTest, NodesBeyondTheSizeWaitAsSparesUpToTheirNumber) {
  Make(2, 0, /*spares=*/1);
  Join("a");
  Join("b");
  EXPECT_EQ(scheduler->generation(), 1u);
  Join("c");
  ASSERT_FALSE(link(2).commands.empty());
  EXPECT_TRUE(link(2).commands.back().has_spare());
  EXPECT_EQ(StateOf("c"), v1::NODE_STATE_SPARE);
  EXPECT_EQ(scheduler->Status().spare_nodes(), 1);
  Join("d");  // beyond the spares too
  EXPECT_TRUE(link(3).rejected()) << "the fourth node is refused";
  EXPECT_EQ(Count(link(2), v1::NodeCommand::kStart), 0) << "a spare runs nothing";
}

TEST_F(RecoveryTest, ALostNodesPlaceGoesToASpareAtOnce) {
  Make(2, /*max_restarts=*/1, /*spares=*/1);
  const auto [a, c, b_rank] = LoseBWhileCWaitsAsASpare();
  // No backoff and no waiting: the spare runs the lost node's ranks in generation 2.
  EXPECT_EQ(scheduler->generation(), 2u);
  EXPECT_EQ(RankOf(link(2)), b_rank);
  EXPECT_EQ(RankOf(link(0)), 1 - b_rank) << "the survivor keeps its rank";
  EXPECT_EQ(scheduler->Status().spare_nodes(), 0);
  EndGeneration({a, c}, {0, 2}, 0);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_SUCCEEDED);
}

// --rejoin_window: the lost node's place waits for a launcher to come back; when the window
// ends (or, sooner, --cluster_time_out: 10 s here), the spare takes it.
TEST_F(RecoveryTest, AHeldPlaceGoesToTheSpareWhenTheRejoinWindowEnds) {
  for (const int window : {8, 60}) {
    SCOPED_TRACE("--rejoin_window " + std::to_string(window));
    scheduler.reset();  // before the links it holds
    links.clear();
    outcome.reset();
    options.rejoin_window = seconds(window);
    Make(2, /*max_restarts=*/1, /*spares=*/1);
    const auto [a, c, b_rank] = LoseBWhileCWaitsAsASpare();
    EXPECT_EQ(scheduler->state(), JobState::kAwaitingReplacement);
    const int held = std::min(window, 10);
    Pass(held - 1, {a, c});
    EXPECT_EQ(scheduler->generation(), 1u) << "the place is held";
    EXPECT_EQ(StateOf("c"), v1::NODE_STATE_SPARE);
    Pass(1, {a, c});
    EXPECT_EQ(scheduler->generation(), 2u);
    EXPECT_EQ(RankOf(link(2)), b_rank) << "the spare took it";
    EndGeneration({a, c}, {0, 2}, 0);
    ASSERT_TRUE(outcome.has_value());
    EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_SUCCEEDED);
  }
}

TEST_F(RecoveryTest, ALauncherBackWithinTheRejoinWindowTakesItsPlaceAndTheSpareWaits) {
  options.rejoin_window = seconds(15);
  Make(2, /*max_restarts=*/1, /*spares=*/1);
  const auto [a, c, b_rank] = LoseBWhileCWaitsAsASpare();
  Pass(5, {a, c});
  int back = Join("b");  // its launcher, started again
  EXPECT_EQ(scheduler->generation(), 2u);
  EXPECT_EQ(RankOf(link(3)), b_rank);
  EXPECT_EQ(RankOf(link(0)), 1 - b_rank);
  Pass(20, {a, c, back});  // past the window: nothing moves
  EXPECT_EQ(StateOf("c"), v1::NODE_STATE_SPARE);
  EXPECT_EQ(Count(link(2), v1::NodeCommand::kStart), 0);
  EndGeneration({a, back}, {0, 3}, 0);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_SUCCEEDED);
}

// --topology_domain: the spare of the lost node's domain takes its place, though another came
// first; with none of its domain, the first spare does.
TEST_F(RecoveryTest, ASpareOfTheLostNodesDomainIsChosenFirst) {
  Make(2, /*max_restarts=*/2, /*spares=*/2);
  int a = Join("a", false, "rack1");
  int b = Join("b", false, "rack2");
  Join("s1", false, "rack1");  // spares, in this order
  int s2 = Join("s2", false, "rack2");
  const int b_rank = RankOf(link(1));
  scheduler->OnNodeDisconnected(b);
  Send(a, testing::ExitedEvent(0, RankOf(link(0)), 143, /*stopped=*/true));
  Send(a, testing::EndedEvent(0));
  ASSERT_EQ(scheduler->generation(), 2u);
  EXPECT_EQ(RankOf(link(3)), b_rank) << "s2, of rack2, took b's place";
  EXPECT_EQ(Count(link(2), v1::NodeCommand::kStart), 0) << "s1 still waits";
  EXPECT_EQ(StateOf("s1"), v1::NODE_STATE_SPARE);
  // s2 (rack2) is lost now: no spare of rack2 is left, so s1 of rack1 takes its place.
  scheduler->OnNodeDisconnected(s2);
  Send(a, testing::ExitedEvent(0, RankOf(link(0)), 143, /*stopped=*/true));
  Send(a, testing::EndedEvent(0));
  ASSERT_EQ(scheduler->generation(), 3u);
  EXPECT_EQ(RankOf(link(2)), b_rank);
}

TEST_F(RecoveryTest, ASpareThatComesAfterThePlaceWasLeftTakesIt) {
  Make(2, /*max_restarts=*/1, /*spares=*/1);
  int a = Join("a");
  int b = Join("b");
  scheduler->OnNodeDisconnected(b);
  Send(a, testing::EndedEvent(0));
  EXPECT_EQ(scheduler->state(), JobState::kAwaitingReplacement);
  Join("c");  // a spare's launcher (or a relaunched one): it takes the place
  EXPECT_EQ(scheduler->generation(), 2u);
  EXPECT_TRUE(link(2).started());
}

// The job's end says what a hot spare would have saved: the wait for a node to take the lost
// one's place (here 7 s of reforming); a job with a spare hears nothing of it.
TEST_F(RecoveryTest, WithoutASpareTheOutcomeSaysWhatOneWouldHaveSaved) {
  Make(2, /*max_restarts=*/1);
  int a = Join("a");
  int b = Join("b");
  scheduler->OnNodeDisconnected(b);
  Send(a, testing::EndedEvent(0));
  ASSERT_EQ(scheduler->state(), JobState::kAwaitingReplacement);
  Pass(7, {a});
  int c = Join("c");  // a relaunched launcher takes the place
  ASSERT_EQ(scheduler->generation(), 2u);
  EndGeneration({a, c}, {0, 2}, 0);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_SUCCEEDED);
  EXPECT_NEAR(outcome->ledger().replacement_wait_seconds(), 7, 0.01);
  EXPECT_EQ(outcome->ledger().what_if(),
            "a hot spare (--spare_nodes 1) would have saved about 7.0 s of reforming: the wait "
            "for a node to take a lost one's place");
  EXPECT_EQ(WhatIf(outcome->ledger(), {/*spare_nodes=*/1}), "") << "it had one";
}

// A node lost to silence cost the job its node timeout (10 s, and the sweep's lateness) of
// detecting; the node that stayed was never silent for more than 1 s, so a node timeout of 3 s
// (3 heartbeat intervals) would have found the loss sooner by the rest.
TEST_F(RecoveryTest, ALossToSilenceSaysWhatATighterNodeTimeoutWouldHaveSaved) {
  node_timeout = seconds(10);
  Make(2, /*max_restarts=*/1);
  int a = Join("a");
  Join("b");
  ASSERT_EQ(scheduler->state(), JobState::kRunning);
  Pass(14, {a});  // b says nothing: lost at the first sweep 11 s after its last word
  ASSERT_EQ(scheduler->state(), JobState::kStopping);
  Send(a, testing::EndedEvent(0));
  ASSERT_EQ(scheduler->state(), JobState::kAwaitingReplacement);
  int c = Join("c");
  ASSERT_EQ(scheduler->generation(), 2u);
  EndGeneration({a, c}, {0, 2}, 0);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->ledger().silent_losses(), 1);
  EXPECT_GT(outcome->ledger().silent_loss_seconds(), 11);
  EXPECT_LE(outcome->ledger().silent_loss_seconds(), 13.5);
  EXPECT_EQ(outcome->ledger().what_if().rfind(
                "a node timeout of 3 s (--node_timeout; no node that stayed was silent for "
                "more than 1.0 s) would have saved about ",
                0),
            0u)
      << outcome->ledger().what_if();
  EXPECT_NE(outcome->ledger().what_if().find("of detecting: 1 node(s) lost to silence"),
            std::string::npos)
      << outcome->ledger().what_if();
}

// No hang rule caught it: a rank failed after the job had stopped stepping (a collective's
// timeout, say). The silence past 3 of its usual steps (at least 1 s) was a stall, not
// training; a failure right after a step moves nothing.
TEST_F(RecoveryTest, TheSilenceBeforeAFailureIsAStallNotTraining) {
  Make(1, /*max_restarts=*/2);
  int a = Join("a");
  auto step = [&](int n) {
    v1::NodeEvent progress;
    auto* rank = progress.mutable_progress()->add_ranks();
    rank->set_rank(0);
    rank->set_step(n);
    rank->set_reports(n);
    rank->set_step_seconds(0.5);
    Send(a, progress);
  };
  Send(a, testing::StartedEvent(0, 0, 100));
  step(5);
  Pass(10, {a});  // nothing steps for 10 s; then gloo's timeout ends rank 0
  Send(a, testing::ExitedEvent(0, 0, 1));
  Send(a, testing::EndedEvent(0));
  clock.Advance(seconds(60));
  ASSERT_EQ(scheduler->generation(), 2u);
  Send(a, testing::StartedEvent(0, 0, 101));
  step(1);
  Pass(1, {a});  // within 3 steps of 0.5 s, and under 1 s: not a stall
  Send(a, testing::ExitedEvent(0, 0, 1));
  Send(a, testing::EndedEvent(0));
  clock.Advance(seconds(2));  // the backoff
  ASSERT_EQ(scheduler->generation(), 3u);
  EndGeneration({a}, {0}, 0);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_SUCCEEDED);
  EXPECT_NEAR(outcome->ledger().seconds().at("stalled"), 10 - 1.5, 0.01);
  EXPECT_NEAR(outcome->ledger().seconds().at("training"), 1.5 + 1, 0.01);
}

TEST_F(RecoveryTest, AnElasticJobsNodesBeyondItsMaximumAreSparesThatKeepItsSize) {
  options.min_world_size = 1;
  options.last_call = seconds(0);
  Make(2, 0, /*spares=*/1);
  int a = Join("a");
  int b = Join("b");
  Join("c");  // beyond MAX
  EXPECT_TRUE(link(2).commands.back().has_spare());
  const uint64_t before = scheduler->generation();
  scheduler->OnNodeDisconnected(a);
  Send(b, testing::ExitedEvent(0, RankOf(link(1)), 143, true));
  Send(b, testing::EndedEvent(0));
  EXPECT_EQ(scheduler->generation(), before + 1);
  EXPECT_TRUE(link(2).started()) << "the spare keeps the job at its maximum";
  EXPECT_EQ(scheduler->Status().world_size(), 2);
}

TEST_F(RecoveryTest, AnElasticJobShrinksWhenAnExcludedNodeHasNoSpare) {
  options.min_world_size = 1;
  options.last_call = seconds(0);
  Make(2, /*max_restarts=*/1);
  int a = Join("a", true);
  int b = Join("b", true);
  EndGeneration({a, b}, {0, 1}, 1);
  Send(a, testing::HealthEvent(1, true));
  Send(b, testing::HealthEvent(1, false, "no GPU"));
  clock.Advance(seconds(1));  // the backoff
  EXPECT_EQ(scheduler->generation(), 2u);
  ASSERT_TRUE(link(0).started());
  EXPECT_EQ(link(0).commands.back().start().assignment().world_size(), 1);
}

TEST_F(RecoveryTest, WithoutAwaitingAReplacementALostPlaceNoSpareTakesEndsTheJob) {
  options.await_replacement = false;  // a daemon's job
  Make(2, /*max_restarts=*/1);
  int a = Join("a");
  int b = Join("b");
  scheduler->OnNodeDisconnected(b);
  Send(a, testing::EndedEvent(0));
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_NODE_LOST);
  EXPECT_NE(outcome->message().find("no spare is left to take its place"), std::string::npos)
      << outcome->message();
}

TEST_F(RecoveryTest, WithoutAwaitingAReplacementASpareStillOnItsWayIsWaitedFor) {
  options.await_replacement = false;
  Make(2, /*max_restarts=*/1, /*spares=*/1);
  int a = Join("a");
  int b = Join("b");
  scheduler->OnNodeDisconnected(b);  // before the spare came
  Send(a, testing::EndedEvent(0));
  EXPECT_FALSE(outcome.has_value());
  Join("c");  // the spare: it takes the place
  EXPECT_EQ(scheduler->generation(), 2u);
  EXPECT_TRUE(link(2).started());
}

TEST_F(RecoveryTest, AnExitCodeOfTheListEndsTheJobWithBudgetLeft) {
  options.recovery.no_restart_exit_codes = {93};
  Make(2, /*max_restarts=*/3);
  int a = Join("a");
  int b = Join("b");
  EndGeneration({a, b}, {0, 1}, 93);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_WORKER_FAILED);
  EXPECT_NE(outcome->message().find("--no_restart_exit_codes"), std::string::npos)
      << outcome->message();
  EXPECT_EQ(scheduler->generation(), 1u);
}

TEST_F(RecoveryTest, ANodeThatFailsTwiceInARowIsExcludedAndASpareTakesItsPlace) {
  options.recovery.exclude_after = 2;
  Make(2, /*max_restarts=*/5, /*spares=*/1);
  int a = Join("a");
  int b = Join("b");
  int c = Join("c");  // spare
  for (int generation = 1; generation <= 2; ++generation) {
    Send(b, testing::ExitedEvent(0, RankOf(link(1)), 1));
    Send(a, testing::ExitedEvent(0, RankOf(link(0)), 143, true));
    Send(a, testing::EndedEvent(0));
    Send(b, testing::EndedEvent(0));
    if (generation == 1) clock.Advance(seconds(1));  // the backoff
  }
  ASSERT_GT(Count(link(1), v1::NodeCommand::kExcluded), 0) << "b is told it is excluded";
  clock.Advance(seconds(2));
  EXPECT_EQ(scheduler->generation(), 3u);
  EXPECT_TRUE(link(2).started()) << "the spare runs generation 3";
  EXPECT_EQ(Count(link(1), v1::NodeCommand::kStart), 2);
  EXPECT_EQ(scheduler->Status().failures().at("excluded"), 1u);
  EndGeneration({a, c}, {0, 2}, 0);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_SUCCEEDED);
}

TEST_F(RecoveryTest, RestartsWithoutProgressStopTheJob) {
  options.recovery.max_no_progress_restarts = 2;
  Make(1, /*max_restarts=*/10);
  int a = Join("a");
  for (int generation = 1; generation <= 3; ++generation) {
    Send(a, testing::StartedEvent(0, 0, 100 + generation));
    v1::NodeEvent progress;
    auto* rank = progress.mutable_progress()->add_ranks();
    rank->set_rank(0);
    rank->set_step(1);  // every generation gets to step 1 and fails
    rank->set_reports(1);
    Send(a, progress);
    Send(a, testing::ExitedEvent(0, 0, 1));
    Send(a, testing::EndedEvent(0));
    if (outcome) break;
    clock.Advance(seconds(60));
  }
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(scheduler->generation(), 3u) << "generation 1 progressed; 2 and 3 did not";
  EXPECT_NE(outcome->message().find("made no progress"), std::string::npos) << outcome->message();
}

TEST_F(RecoveryTest, AFailedHealthCheckBetweenGenerationsExcludesTheNode) {
  Make(2, /*max_restarts=*/1, /*spares=*/1);
  int a = Join("a", true);
  int b = Join("b", true);
  int c = Join("c", true);  // spare, checked too
  EndGeneration({a, b}, {0, 1}, 1);
  EXPECT_EQ(Count(link(0), v1::NodeCommand::kCheckHealth), 1);
  EXPECT_EQ(Count(link(2), v1::NodeCommand::kCheckHealth), 1);
  clock.Advance(seconds(1));  // the backoff passed; the round is still open
  EXPECT_EQ(scheduler->generation(), 1u);
  Send(a, testing::HealthEvent(1, true));
  Send(c, testing::HealthEvent(1, true));
  Send(b, testing::HealthEvent(1, false, "GPU 3 fell off the bus"));
  EXPECT_GT(Count(link(1), v1::NodeCommand::kExcluded), 0);
  EXPECT_EQ(scheduler->generation(), 2u);
  EXPECT_TRUE(link(2).started());
  EXPECT_EQ(scheduler->Status().failures().at("health_check"), 1u);
}

// The health checks run while the backoff does; what of them outlasts it is the ledger's
// health_checks phase, not reforming.
TEST_F(RecoveryTest, HealthChecksThatOutlastTheBackoffAreTheirOwnPhase) {
  Make(1, /*max_restarts=*/1);
  int a = Join("a", true);
  EndGeneration({a}, {0}, 1);
  clock.Advance(seconds(1));  // the backoff (1 s) passed; the check has not answered
  clock.Advance(seconds(3));
  EXPECT_EQ(scheduler->generation(), 1u);
  Send(a, testing::HealthEvent(1, true));
  ASSERT_EQ(scheduler->generation(), 2u);
  EndGeneration({a}, {0}, 0);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_NEAR(outcome->ledger().seconds().at("health_checks"), 3, 0.01);
  EXPECT_NEAR(outcome->ledger().seconds().at("backoff"), 1, 0.01);
  EXPECT_EQ(outcome->ledger().seconds().count("reforming"), 0u);
}

TEST_F(RecoveryTest, AForwardedSignalReachesEveryNodeOnlyIfAllowed) {
  options.signals_to_forward = {SIGUSR1};
  Make(2);
  int a = Join("a");
  Join("b");
  v1::NodeEvent forward;
  forward.mutable_forward_signal()->set_signal(SIGUSR1);
  Send(a, forward);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(link(i).commands.back().has_signal()) << i;
    EXPECT_EQ(link(i).commands.back().signal().signal(), SIGUSR1);
  }
  forward.mutable_forward_signal()->set_signal(SIGTERM);
  Send(a, forward);
  EXPECT_EQ(Count(link(1), v1::NodeCommand::kSignal), 1) << "SIGTERM is not forwarded";
}

TEST_F(RecoveryTest, TheTimeLimitSignalsEarlyThenStopsTheJob) {
  options.time_limit = seconds(100);
  options.time_limit_signal = SIGUSR1;
  options.time_limit_signal_before = seconds(30);
  Make(1);
  int a = Join("a");
  Pass(69, {a});
  EXPECT_EQ(Count(link(0), v1::NodeCommand::kSignal), 0);
  Pass(1, {a});
  EXPECT_EQ(Count(link(0), v1::NodeCommand::kSignal), 1);
  EXPECT_NEAR(scheduler->Status().time_left_seconds(), 30, 0.01);
  Pass(30, {a});
  EXPECT_TRUE(link(0).aborted());
  EXPECT_FALSE(outcome.has_value()) << "the job ends when its workers have stopped";
  Send(a, testing::ExitedEvent(0, 0, 143, true));
  Send(a, testing::EndedEvent(0));
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_TIME_LIMIT);
}

}  // namespace
}  // namespace gangrun::scheduler
