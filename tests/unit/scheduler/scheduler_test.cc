#include "scheduler/scheduler.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <csignal>
#include <sstream>

#include "common/logging.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/scheduler_fakes.h"

namespace gangrun::scheduler {
namespace {

// Options with the three sizes every test sets; the rest keep their defaults.
Scheduler::Options Sized(int world_size, common::Duration cluster_timeout,
                         common::Duration node_timeout) {
  Scheduler::Options options;
  options.world_size = world_size;
  options.cluster_timeout = cluster_timeout;
  options.node_timeout = node_timeout;
  return options;
}

using std::chrono::seconds;

using RecordingLink = testing::FakeNodeLink;

class SchedulerTest : public ::testing::Test {
 protected:
  void Make(int world_size, common::Duration timeout = seconds(60),
            common::Duration node_timeout = seconds(5)) {
    scheduler = std::make_unique<Scheduler>(clock, Sized(world_size, timeout, node_timeout));
    scheduler->SetOnFinished([this](const v1::JobOutcome& o) { outcome = o; });
    scheduler->Start();
  }
  int Join(RecordingLink& link, const std::string& name, const std::string& address, int node_rank,
           int workers, int free_port = 1000) {
    int id = scheduler->AddNode(&link);
    scheduler->OnNodeEvent(id, testing::JoinEvent(name, address, node_rank, workers, free_port));
    return id;
  }
  void Exited(int id, int rank, int code, bool stopped = false, int signal = 0) {
    v1::NodeEvent event =
        testing::ExitedEvent(scheduler->generation(), rank, code, stopped, signal);
    event.mutable_worker_exited()->add_log_tail("boom");
    scheduler->OnNodeEvent(id, event);
  }
  void Ended(int id) { scheduler->OnNodeEvent(id, testing::EndedEvent(scheduler->generation())); }

  testing::FakeClock clock;
  std::unique_ptr<Scheduler> scheduler;
  std::optional<v1::JobOutcome> outcome;
};

// What the scheduler logs while a test runs (its "scheduler" logger), for lines users read.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)) {
    common::Logger("scheduler")->sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = common::Logger("scheduler")->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  std::string text() const { return text_.str(); }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

TEST_F(SchedulerTest, AWaitForNodesIsSaidAgainWithWhatIsMissingAndTheTimeLeft) {
  LogCapture log;
  Make(4, seconds(600), seconds(300));  // a node timeout that outlasts the test's silence
  RecordingLink a, b;
  Join(a, "hosta", "10.0.0.1", 0, 2);
  EXPECT_NE(log.text().find("waiting for 2 of 4 workers (1 node(s) joined: hosta; node rank 1 "
                            "has not joined); 10 m 0 s left"),
            std::string::npos)
      << log.text();
  clock.Advance(seconds(10));
  EXPECT_NE(log.text().find("still waiting for 2 of 4 workers (1 node(s) joined: hosta; node "
                            "rank 1 has not joined); 9 m 50 s left"),
            std::string::npos)
      << log.text();
  // The launcher that joined is told the same line, to say it too.
  ASSERT_EQ(a.commands.size(), 1u);
  EXPECT_EQ(a.commands[0].waiting().line(),
            "waiting for 2 of 4 workers (1 node(s) joined: hosta; node rank 1 has not joined); "
            "9 m 50 s left");
  Join(b, "hostb", "10.0.0.2", 1, 2);
  ASSERT_EQ(a.commands.size(), 2u);
  EXPECT_TRUE(a.started());  // formed
  const size_t said = log.text().size();
  clock.Advance(seconds(120));
  EXPECT_EQ(log.text().find("still waiting", said), std::string::npos) << log.text();
}

TEST_F(SchedulerTest, StartsGenerationOneWhenAllWorkersJoined) {
  Make(4);
  RecordingLink a, b;
  Join(a, "hostb", "10.0.0.2", -1, 2, 2222);
  EXPECT_TRUE(a.commands.empty());
  Join(b, "hosta", "10.0.0.1", -1, 2, 1111);
  ASSERT_EQ(a.commands.size(), 1u);
  ASSERT_EQ(b.commands.size(), 1u);
  const auto& sa = a.commands[0];
  const auto& sb = b.commands[0];
  EXPECT_EQ(sa.generation(), 1u);
  EXPECT_EQ(sa.start().assignment().node_rank(), 1);
  EXPECT_EQ(sa.start().assignment().first_rank(), 2);
  EXPECT_EQ(sb.start().assignment().node_rank(), 0);
  EXPECT_EQ(sb.start().assignment().world_size(), 4);
  // MASTER_ADDR/PORT come from the rank-0 node.
  EXPECT_EQ(sa.start().assignment().master_addr(), "10.0.0.1");
  EXPECT_EQ(sa.start().assignment().master_port(), 1111);
}

TEST_F(SchedulerTest, FirstFailureAbortsEveryNodeAndIsTheRootCause) {
  Make(2);
  RecordingLink a, b;
  int ia = Join(a, "a", "10.0.0.1", 0, 1);
  int ib = Join(b, "b", "10.0.0.2", 1, 1);
  Exited(ib, 1, 7);
  ASSERT_EQ(a.commands.size(), 2u);
  EXPECT_TRUE(a.commands[1].has_abort());
  EXPECT_TRUE(b.commands[1].has_abort());
  EXPECT_EQ(a.commands[1].generation(), 1u);
  Exited(ia, 0, 0, /*stopped=*/true, SIGTERM);
  Ended(ia);
  EXPECT_FALSE(outcome.has_value());
  Ended(ib);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_WORKER_FAILED);
  EXPECT_EQ(outcome->root_cause().rank(), 1);
  EXPECT_EQ(outcome->root_cause().host(), "b");
  EXPECT_EQ(outcome->root_cause().exit().exit_code(), 7);
  EXPECT_EQ(outcome->root_cause().log_tail(0), "boom");
  EXPECT_EQ(outcome->stopped_ranks_size(), 1);
  EXPECT_TRUE(a.commands.back().has_finished());
}

TEST_F(SchedulerTest, LaterFailuresDoNotReplaceTheRootCause) {
  Make(2);
  RecordingLink a;
  int id = Join(a, "a", "10.0.0.1", -1, 2);
  Exited(id, 1, 3);
  Exited(id, 0, 9);  // failed on its own while the job was stopping
  Ended(id);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->root_cause().rank(), 1);
}

TEST_F(SchedulerTest, SucceedsWhenEveryWorkerExitsZero) {
  Make(2);
  RecordingLink a;
  int id = Join(a, "a", "10.0.0.1", -1, 2);
  Exited(id, 0, 0);
  Exited(id, 1, 0);
  Ended(id);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_SUCCEEDED);
}

TEST_F(SchedulerTest, StopRequestAbortsAndEndsWithTheSignal) {
  Make(1);
  RecordingLink a;
  int id = Join(a, "a", "10.0.0.1", -1, 1);
  v1::NodeEvent stop;
  stop.mutable_stop_request()->set_signal(SIGTERM);
  scheduler->OnNodeEvent(id, stop);
  EXPECT_TRUE(a.commands.back().has_abort());
  Exited(id, 0, 0, true, SIGTERM);
  Ended(id);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_STOPPED_BY_SIGNAL);
  EXPECT_EQ(outcome->signal(), SIGTERM);
}

TEST_F(SchedulerTest, FormationTimesOutNamingWhatIsMissing) {
  Make(4, seconds(10), /*node_timeout=*/common::Duration::zero());
  RecordingLink a;
  Join(a, "early", "10.0.0.1", -1, 2);
  clock.Advance(seconds(9));
  EXPECT_FALSE(outcome.has_value());
  clock.Advance(seconds(1));
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_FORMATION_FAILED);
  EXPECT_NE(outcome->message().find("2 of 4 workers joined (present: node 'early' (10.0.0.1))"),
            std::string::npos)
      << outcome->message();
}

TEST_F(SchedulerTest, NegativeTimeoutWaitsForever) {
  Make(2, common::Duration(-1), common::Duration::zero());
  clock.Advance(std::chrono::hours(24 * 365));
  EXPECT_FALSE(outcome.has_value());
}

TEST_F(SchedulerTest, SilentNodeIsLostAfterNodeTimeoutAndOneIntervalAndTheJobStops) {
  Make(2, seconds(60), seconds(4));
  RecordingLink a, b;
  int ia = Join(a, "a", "10.0.0.1", 0, 1);
  Join(b, "b", "10.0.0.2", 1, 1);
  v1::NodeEvent heartbeat;
  heartbeat.mutable_heartbeat();
  for (int i = 0; i < 5; ++i) {  // a keeps beating, b is silent
    clock.Advance(seconds(1));
    scheduler->OnNodeEvent(ia, heartbeat);
  }
  // 5 s of silence: the node timeout (4 s) and the heartbeat it owed (1 s) cost nothing.
  ASSERT_FALSE(a.commands.back().has_abort());
  clock.Advance(seconds(1));
  scheduler->OnNodeEvent(ia, heartbeat);
  ASSERT_TRUE(a.commands.back().has_abort());
  EXPECT_NE(a.commands.back().abort().reason().find("node 'b'"), std::string::npos);
  Exited(ia, 0, 0, true, SIGTERM);
  Ended(ia);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_NODE_LOST);
  EXPECT_NE(outcome->message().find("no heartbeat"), std::string::npos) << outcome->message();
}

TEST_F(SchedulerTest, AStopRequestFromASessionThatNeverJoinedIsIgnored) {
  Make(2);
  RecordingLink a, b, stranger;
  int ia = Join(a, "a", "10.0.0.1", 0, 1);
  Join(b, "b", "10.0.0.2", 1, 1);
  ASSERT_TRUE(a.started());
  int is = scheduler->AddNode(&stranger);
  v1::NodeEvent stop;
  stop.mutable_stop_request()->set_signal(SIGTERM);
  stop.mutable_stop_request()->set_reason("not a node");
  scheduler->OnNodeEvent(is, stop);
  EXPECT_FALSE(a.commands.back().has_abort());
  EXPECT_EQ(scheduler->Status().phase(), v1::JOB_PHASE_RUNNING);
  // A node's own request stops the job.
  scheduler->OnNodeEvent(ia, stop);
  EXPECT_TRUE(a.commands.back().has_abort());
}

TEST_F(SchedulerTest, BrokenConnectionLosesTheNodeAtOnce) {
  Make(2);
  RecordingLink a, b;
  int ia = Join(a, "a", "10.0.0.1", 0, 1);
  int ib = Join(b, "b", "10.0.0.2", 1, 1);
  scheduler->OnNodeDisconnected(ib);
  ASSERT_TRUE(a.commands.back().has_abort());
  Ended(ia);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_NODE_LOST);
  EXPECT_NE(outcome->message().find("connection broke"), std::string::npos);
}

TEST_F(SchedulerTest, NodeLeavingDuringFormationFreesItsPlace) {
  Make(2);
  RecordingLink a, c, d;
  int ia = Join(a, "a", "10.0.0.1", 0, 1);
  scheduler->OnNodeDisconnected(ia);
  Join(c, "c", "10.0.0.3", 0, 1);  // takes node rank 0, which a held
  EXPECT_TRUE(c.commands.empty());
  Join(d, "d", "10.0.0.4", -1, 1);
  ASSERT_EQ(c.commands.size(), 1u);
  EXPECT_TRUE(c.commands[0].has_start());
  EXPECT_TRUE(a.commands.empty());
}

class RestartTest : public SchedulerTest {
 protected:
  void MakeWithRestarts(int max_restarts) {
    Scheduler::Options options = Sized(2, seconds(60), seconds(60));
    options.max_restarts = max_restarts;
    options.restart_backoff_initial = seconds(1);
    options.restart_backoff_cap = seconds(3);
    scheduler = std::make_unique<Scheduler>(clock, options);
    scheduler->SetOnFinished([this](const v1::JobOutcome& o) { outcome = o; });
    scheduler->Start();
  }
  // Rank 1 fails, rank 0 is stopped, the node reports the generation over.
  void FailGeneration(int id, int code) {
    Exited(id, 1, code);
    Exited(id, 0, 0, true, SIGTERM);
    Ended(id);
  }
  int Starts(const RecordingLink& link) {
    int n = 0;
    for (const auto& c : link.commands) n += c.has_start();
    return n;
  }
};

TEST_F(RestartTest, FailureStartsTheNextGenerationAfterTheBackoff) {
  MakeWithRestarts(2);
  RecordingLink a;
  int id = Join(a, "a", "10.0.0.1", -1, 2);
  FailGeneration(id, 3);
  EXPECT_EQ(Starts(a), 1);
  // Status says why the generation ended and what follows, as submit's console does.
  const std::string last = scheduler->Status().last_generation_end();
  EXPECT_EQ(last.rfind("generation 1 ended: rank 1 on ", 0), 0u) << last;
  EXPECT_NE(last.find("exited with code 3"), std::string::npos) << last;
  EXPECT_NE(last.find("; restarting in 1 s (restart 1 of 2)"), std::string::npos) << last;
  clock.Advance(std::chrono::milliseconds(999));
  EXPECT_EQ(Starts(a), 1);
  clock.Advance(std::chrono::milliseconds(1));
  ASSERT_EQ(Starts(a), 2);
  EXPECT_EQ(a.commands.back().generation(), 2u);
  EXPECT_EQ(a.commands.back().start().restart_count(), 1);
  Exited(id, 0, 0);
  Exited(id, 1, 0);
  Ended(id);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_SUCCEEDED);
}

TEST_F(RestartTest, BudgetRunsOutWithTheLastFailuresCode) {
  MakeWithRestarts(2);
  RecordingLink a;
  int id = Join(a, "a", "10.0.0.1", -1, 2);
  FailGeneration(id, 3);
  clock.Advance(seconds(1));  // backoff 1 s
  FailGeneration(id, 4);
  clock.Advance(seconds(1));
  EXPECT_EQ(Starts(a), 2);  // the second backoff is 2 s
  clock.Advance(seconds(1));
  EXPECT_EQ(Starts(a), 3);
  FailGeneration(id, 5);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_WORKER_FAILED);
  EXPECT_EQ(outcome->root_cause().exit().exit_code(), 5);
}

TEST_F(RestartTest, StaleEventsFromTheOldGenerationAreIgnored) {
  MakeWithRestarts(1);
  RecordingLink a;
  int id = Join(a, "a", "10.0.0.1", -1, 2);
  FailGeneration(id, 3);
  clock.Advance(seconds(1));
  v1::NodeEvent stale;
  stale.set_generation(1);
  stale.mutable_worker_exited()->set_rank(0);
  stale.mutable_worker_exited()->mutable_exit()->set_exit_code(9);
  scheduler->OnNodeEvent(id, stale);
  EXPECT_TRUE(a.commands.back().has_start());  // no abort of generation 2
}

TEST_F(RestartTest, LostNodeIsReplacedAndARejoinDoesNotResetTheBudget) {
  MakeWithRestarts(1);
  RecordingLink a, b, c;
  int ia = Join(a, "a", "10.0.0.1", 0, 1);
  int ib = Join(b, "b", "10.0.0.2", 1, 1);
  scheduler->OnNodeDisconnected(ib);  // b's launcher died
  ASSERT_TRUE(a.commands.back().has_abort());
  Exited(ia, 0, 0, true, SIGTERM);
  Ended(ia);
  EXPECT_FALSE(outcome.has_value());        // waiting for a replacement
  int ic = Join(c, "b", "10.0.0.2", 1, 1);  // b started again
  ASSERT_EQ(Starts(c), 1);
  EXPECT_EQ(c.commands.back().generation(), 2u);
  EXPECT_EQ(c.commands.back().start().restart_count(), 1);
  EXPECT_EQ(c.commands.back().start().assignment().first_rank(), 1);
  EXPECT_EQ(Starts(a), 2);
  // The budget (1) is spent: losing it again ends the job.
  scheduler->OnNodeDisconnected(ic);
  Exited(ia, 0, 0, true, SIGTERM);
  Ended(ia);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_NODE_LOST);
}

TEST_F(RestartTest, NoReplacementWithinTheClusterTimeoutLosesTheJob) {
  Scheduler::Options options = Sized(2, seconds(30), seconds(60));
  options.max_restarts = 3;
  scheduler = std::make_unique<Scheduler>(clock, options);
  scheduler->SetOnFinished([this](const v1::JobOutcome& o) { outcome = o; });
  scheduler->Start();
  RecordingLink a, b;
  int ia = Join(a, "a", "10.0.0.1", 0, 1);
  int ib = Join(b, "b", "10.0.0.2", 1, 1);
  scheduler->OnNodeDisconnected(ib);
  Ended(ia);
  clock.Advance(seconds(29));
  EXPECT_FALSE(outcome.has_value());
  clock.Advance(seconds(1));
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_NODE_LOST);
  EXPECT_NE(outcome->message().find("no node took its place"), std::string::npos);
}

TEST_F(RestartTest, StopDuringTheBackoffEndsTheJob) {
  MakeWithRestarts(3);
  RecordingLink a;
  int id = Join(a, "a", "10.0.0.1", -1, 2);
  FailGeneration(id, 3);
  v1::NodeEvent stop;
  stop.mutable_stop_request()->set_signal(SIGINT);
  scheduler->OnNodeEvent(id, stop);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_STOPPED_BY_SIGNAL);
  clock.Advance(seconds(10));
  EXPECT_EQ(Starts(a), 1);
}

class ElasticTest : public RestartTest {
 protected:
  void MakeElastic(int min, int max) {
    Scheduler::Options options = Sized(max, seconds(60), seconds(60));
    options.min_world_size = min;
    options.last_call = seconds(1);
    scheduler = std::make_unique<Scheduler>(clock, options);
    scheduler->SetOnFinished([this](const v1::JobOutcome& o) { outcome = o; });
    scheduler->Start();
  }
  // Every rank of the current generation on `id` exits (stopped) and the node reports.
  void StopAll(int id, std::initializer_list<int> ranks) {
    for (int rank : ranks) Exited(id, rank, 0, true, SIGTERM);
    Ended(id);
  }
};

TEST_F(ElasticTest, FormsAtTheMinimumAfterTheLastCall) {
  MakeElastic(2, 4);
  RecordingLink a;
  Join(a, "a", "10.0.0.1", -1, 2);
  clock.Advance(std::chrono::milliseconds(999));
  EXPECT_EQ(Starts(a), 0);
  clock.Advance(std::chrono::milliseconds(1));
  ASSERT_EQ(Starts(a), 1);
  EXPECT_EQ(a.commands.back().start().assignment().world_size(), 2);
}

TEST_F(ElasticTest, FormsAtOnceAtTheMaximum) {
  MakeElastic(2, 4);
  RecordingLink a, b;
  Join(a, "a", "10.0.0.1", -1, 2);
  Join(b, "b", "10.0.0.2", -1, 2);
  ASSERT_EQ(Starts(b), 1);
  EXPECT_EQ(b.commands.back().start().assignment().world_size(), 4);
}

TEST_F(ElasticTest, GrowsWhenANodeJoinsLaterWithoutUsingTheBudget) {
  MakeElastic(2, 4);
  RecordingLink a, b;
  int ia = Join(a, "a", "10.0.0.1", -1, 2);
  clock.Advance(seconds(1));
  ASSERT_EQ(Starts(a), 1);
  int ib = Join(b, "b", "10.0.0.2", -1, 2);
  ASSERT_TRUE(a.commands.back().has_abort());
  StopAll(ia, {0, 1});
  ASSERT_EQ(Starts(a), 2);
  ASSERT_EQ(Starts(b), 1);
  EXPECT_EQ(b.commands.back().generation(), 2u);
  EXPECT_EQ(b.commands.back().start().assignment().world_size(), 4);
  EXPECT_EQ(b.commands.back().start().assignment().first_rank(), 2);
  EXPECT_EQ(b.commands.back().start().restart_count(), 0);
  for (int rank : {0, 1}) Exited(ia, rank, 0);
  for (int rank : {2, 3}) Exited(ib, rank, 0);
  Ended(ia);
  Ended(ib);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_SUCCEEDED);
}

TEST_F(ElasticTest, ShrinksWhenANodeIsLostAndEnoughRemain) {
  MakeElastic(2, 4);
  RecordingLink a, b;
  int ia = Join(a, "a", "10.0.0.1", -1, 2);
  int ib = Join(b, "b", "10.0.0.2", -1, 2);
  scheduler->OnNodeDisconnected(ib);
  ASSERT_TRUE(a.commands.back().has_abort());
  StopAll(ia, {0, 1});
  ASSERT_EQ(Starts(a), 2);
  EXPECT_EQ(a.commands.back().start().assignment().world_size(), 2);
  EXPECT_FALSE(outcome.has_value());
}

TEST_F(ElasticTest, LosingANodeBelowTheMinimumLosesTheJob) {
  MakeElastic(3, 4);
  RecordingLink a, b;
  int ia = Join(a, "a", "10.0.0.1", -1, 2);
  int ib = Join(b, "b", "10.0.0.2", -1, 2);
  scheduler->OnNodeDisconnected(ib);
  StopAll(ia, {0, 1});
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_NODE_LOST);
}

TEST_F(ElasticTest, ScaleReleasesTheHighestNodesAndReforms) {
  MakeElastic(2, 4);
  RecordingLink a, b;
  int ia = Join(a, "a", "10.0.0.1", 0, 2);
  Join(b, "b", "10.0.0.2", 1, 2);
  EXPECT_EQ(scheduler->Scale(1).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(scheduler->Scale(2).ok());
  ASSERT_TRUE(b.commands.back().has_finished());
  EXPECT_EQ(b.commands.back().finished().outcome().kind(), v1::JobOutcome::KIND_SUCCEEDED);
  ASSERT_TRUE(a.commands.back().has_abort());
  StopAll(ia, {0, 1});
  ASSERT_EQ(Starts(a), 2);
  EXPECT_EQ(a.commands.back().start().assignment().world_size(), 2);
}

TEST_F(SchedulerTest, ScaleIsRefusedForAFixedSizeJob) {
  Make(2);
  EXPECT_EQ(scheduler->Scale(4).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(SchedulerTest, ExtraNodeIsRejectedByName) {
  Make(2);
  RecordingLink a, b;
  Join(a, "a", "10.0.0.1", -1, 1);
  Join(b, "greedy", "10.0.0.2", -1, 2);
  ASSERT_EQ(b.commands.size(), 1u);
  ASSERT_TRUE(b.commands[0].has_rejected());
  EXPECT_NE(b.commands[0].rejected().reason().find("greedy"), std::string::npos);
}

TEST_F(SchedulerTest, EventsOfAnotherGenerationAreIgnored) {
  Make(1);
  RecordingLink a;
  int id = Join(a, "a", "10.0.0.1", -1, 1);
  v1::NodeEvent stale;
  stale.set_generation(0);
  stale.mutable_worker_exited()->set_rank(0);
  stale.mutable_worker_exited()->mutable_exit()->set_exit_code(1);
  scheduler->OnNodeEvent(id, stale);
  EXPECT_EQ(a.commands.size(), 1u);  // no abort
}

}  // namespace
}  // namespace gangrun::scheduler
