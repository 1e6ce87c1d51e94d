// The scheduler's state machine (scheduler/job_state.h): a real Scheduler, driven on the fake
// clock through one scenario per kind of edge, takes every edge of the table; an edge the
// table does not list stops the process.

#include "scheduler/job_state.h"

#include <gtest/gtest.h>

#include <set>

#include "scheduler/scheduler.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/scheduler_fakes.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Link = testing::FakeNodeLink;

// One scenario: a scheduler of `world` one-worker nodes, its links and what it went through.
class Scenario {
 public:
  explicit Scenario(int world, int max_restarts = 0, int min_world = 0) {
    Scheduler::Options options;
    options.world_size = world;
    options.min_world_size = min_world;
    options.cluster_timeout = seconds(10);
    options.node_timeout = seconds(60);
    options.max_restarts = max_restarts;
    options.restart_backoff_initial = seconds(1);
    options.last_call = milliseconds(0);
    scheduler_ = std::make_unique<Scheduler>(clock_, options);
    scheduler_->SetTelemetry(&telemetry_);
    scheduler_->Start();
  }
  int Join(int rank, bool health_check = false) {
    links_.push_back(std::make_unique<Link>());
    int id = scheduler_->AddNode(links_.back().get());
    v1::NodeEvent join = testing::JoinEvent("n" + std::to_string(rank),
                                            "10.0.0." + std::to_string(rank + 1), rank, 1);
    join.mutable_join()->set_health_check(health_check);
    scheduler_->OnNodeEvent(id, join);
    return id;
  }
  void Send(int id, v1::NodeEvent event) {
    event.set_generation(scheduler_->generation());
    scheduler_->OnNodeEvent(id, event);
  }
  void Exit(int id, int rank, int code, bool stopped = false) {
    Send(id, testing::ExitedEvent(0, rank, code, stopped));
  }
  void End(int id) { Send(id, testing::EndedEvent(0)); }
  void Hang(int id, int rank) {
    v1::NodeEvent hung;
    hung.mutable_rank_hung()->set_rank(rank);
    hung.mutable_rank_hung()->set_rule("steady");
    Send(id, hung);
  }
  std::set<std::pair<std::string, std::string>> Taken() const {
    std::set<std::pair<std::string, std::string>> taken;
    for (const auto& t : telemetry_.transitions()) taken.insert({t.from, t.to});
    return taken;
  }
  Scheduler& scheduler() { return *scheduler_; }
  testing::FakeClock& clock() { return clock_; }

 private:
  testing::FakeClock clock_;
  Telemetry telemetry_{"job"};
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::unique_ptr<Link>> links_;
};

TEST(JobStateTest, EveryEdgeOfTheTableIsTakenByTheScheduler) {
  std::set<std::pair<std::string, std::string>> taken;
  auto collect = [&](const Scenario& run) {
    for (const auto& edge : run.Taken()) taken.insert(edge);
  };
  {  // forming -> finished: nobody comes
    Scenario run(2);
    run.clock().Advance(seconds(11));
    collect(run);
  }
  {  // forming -> running -> finished: everyone exits 0
    Scenario run(1);
    int a = run.Join(0);
    run.Exit(a, 0, 0);
    run.End(a);
    collect(run);
  }
  {  // running -> stopping -> backing off -> forming -> running -> stopping -> finished
    Scenario run(1, /*max_restarts=*/1);
    int a = run.Join(0);
    run.Exit(a, 0, 1);
    run.End(a);
    run.clock().Advance(seconds(1));
    run.Exit(a, 0, 1);
    run.End(a);
    collect(run);
  }
  {  // running -> capturing -> stopping; capturing -> finished
    Scenario run(1);
    int a = run.Join(0);
    run.Hang(a, 0);
    run.Send(a, [] {
      v1::NodeEvent stacks;
      stacks.mutable_stacks_captured()->add_stacks()->set_rank(0);
      return stacks;
    }());
    collect(run);
    Scenario well(1);
    int b = well.Join(0);
    well.Hang(b, 0);
    well.Exit(b, 0, 0);  // it ended well before its stack came
    well.End(b);
    collect(well);
  }
  {  // stopping -> awaiting replacement -> forming; awaiting -> finished
    Scenario run(2, /*max_restarts=*/1);
    int a = run.Join(0);
    int b = run.Join(1);
    run.scheduler().OnNodeDisconnected(b);
    run.End(a);   // the survivor stopped its workers
    run.Join(1);  // a replacement comes
    collect(run);
    Scenario lost(2, /*max_restarts=*/1);
    int c = lost.Join(0);
    int d = lost.Join(1);
    lost.scheduler().OnNodeDisconnected(d);
    lost.End(c);
    lost.clock().Advance(seconds(11));  // no replacement in time
    collect(lost);
  }
  {  // forming -> awaiting replacement: a health check after a restart excludes a node
    Scenario run(2, /*max_restarts=*/1);
    int a = run.Join(0, /*health_check=*/true);
    int b = run.Join(1, /*health_check=*/true);
    run.Exit(a, 0, 1);
    run.End(a);
    run.End(b);
    run.clock().Advance(seconds(1));  // the backoff ends; the round is still open
    EXPECT_EQ(run.scheduler().state(), JobState::kForming);
    run.Send(a, testing::HealthEvent(1, true));
    run.Send(b, testing::HealthEvent(1, false, "no GPU"));
    EXPECT_EQ(run.scheduler().state(), JobState::kAwaitingReplacement);
    collect(run);
  }
  {  // stopping -> forming: an elastic job re-forms; backing off -> finished: a loss meanwhile
    Scenario elastic(2, 0, /*min_world=*/1);
    int a = elastic.Join(0);
    int b = elastic.Join(1);
    elastic.scheduler().OnNodeDisconnected(a);
    elastic.End(b);  // the survivor's workers stopped: the job re-forms with it alone
    collect(elastic);
    Scenario backoff(2, /*max_restarts=*/1);
    int c = backoff.Join(0);
    int d = backoff.Join(1);
    backoff.Exit(c, 0, 1);
    backoff.End(c);
    backoff.End(d);
    backoff.scheduler().OnNodeDisconnected(d);
    collect(backoff);
  }
  for (const auto& [from, to] : AllEdges()) {
    EXPECT_EQ(taken.count({std::string(JobStateName(from)), std::string(JobStateName(to))}), 1u)
        << "no scenario takes " << JobStateName(from) << " -> " << JobStateName(to);
  }
  // And nothing outside the table was taken (Enter would have stopped the test).
  EXPECT_EQ(taken.size(), AllEdges().size());
}

TEST(JobStateTest, PhasesFollowFromTheStates) {
  EXPECT_EQ(PhaseOf(JobState::kAwaitingReplacement), v1::JOB_PHASE_FORMING);
  EXPECT_EQ(PhaseOf(JobState::kCapturing), v1::JOB_PHASE_HUNG);
  EXPECT_EQ(PhaseOf(JobState::kBackingOff), v1::JOB_PHASE_RESTARTING);
  for (JobState state : kAllJobStates) EXPECT_NE(PhaseOf(state), v1::JOB_PHASE_UNSPECIFIED);
}

TEST(JobStateDeathTest, AnEdgeTheTableDoesNotListStopsTheProcess) {
  EXPECT_FALSE(EdgeAllowed(JobState::kFinished, JobState::kRunning));
  EXPECT_FALSE(EdgeAllowed(JobState::kBackingOff, JobState::kRunning));
  EXPECT_DEATH(CheckEdge(JobState::kFinished, JobState::kRunning), "no edge finished -> running");
}

}  // namespace
}  // namespace gangrun::scheduler
