// Progress supervision end to end on the fake clock: a node's reports, hangs, stack capture
// and torch timers; the scheduler's capture, hang outcome, restarts and stragglers.

#include <gtest/gtest.h>

#include <csignal>
#include <set>

#include "node/node.h"
#include "scheduler/scheduler.h"
#include "tests/testing/fake_backend.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/scheduler_fakes.h"

namespace gangrun {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class FakeStackSampler : public node::StackSampler {
 public:
  void AddWorkerEnv(std::vector<std::string>& env) const override { env.push_back("STACK_HOOK=1"); }
  void Capture(std::vector<node::StackTarget> targets, common::Duration timeout,
               std::function<void(std::vector<v1::RankStack>)> done) override {
    captured = std::move(targets);
    this->timeout = timeout;
    this->done = std::move(done);
  }
  std::vector<node::StackTarget> captured;
  common::Duration timeout{};
  std::function<void(std::vector<v1::RankStack>)> done;
};

class RecordingLink : public node::SchedulerLink {
 public:
  void Send(const v1::NodeEvent& event) override { events.push_back(event); }
  template <typename Has>
  std::vector<v1::NodeEvent> Of(Has has) const {
    std::vector<v1::NodeEvent> out;
    for (const auto& e : events) {
      if ((e.*has)()) out.push_back(e);
    }
    return out;
  }
  std::vector<v1::NodeEvent> events;
};

class NodeSupervisionTest : public ::testing::Test {
 protected:
  NodeSupervisionTest() {
    node::Node::Options options;
    options.node_name = "h";
    options.local_worker_num = 2;
    options.heartbeat_interval = seconds(1);
    node::Supervision supervision;
    supervision.progress_path = [this](int local) -> absl::StatusOr<std::string> {
      if (unbindable.count(local)) return absl::InternalError("cannot bind it");
      return "/run/p" + std::to_string(local);
    };
    supervision.timer_file = "/run/timer";
    supervision.stacks = &sampler;
    supervision.wall_now = [this] { return wall; };
    supervision.signal_process = [this](pid_t pid, int sig) { signalled.emplace_back(pid, sig); };
    supervision.process_start_time = [this](pid_t pid) -> std::optional<uint64_t> {
      auto it = start_times.find(pid);
      return it == start_times.end() ? 1 : it->second;
    };
    node = std::make_unique<node::Node>(
        backend, clock, link, options,
        [](const v1::RankAssignment& a, uint64_t,
           int) -> absl::StatusOr<std::vector<node::ProcessSpec>> {
          std::vector<node::ProcessSpec> specs;
          for (int i = 0; i < a.local_worker_num(); ++i) {
            node::ProcessSpec spec;
            spec.rank = a.first_rank() + i;
            spec.local_rank = i;
            spec.env = {"GANGRUN_PROGRESS=/stale"};
            specs.push_back(spec);
          }
          return specs;
        },
        node::Node::Callbacks{}, supervision);
    node->Start();
  }
  void StartGeneration(const v1::ProgressRules& rules, bool answer = true) {
    v1::NodeCommand command;
    command.set_generation(1);
    command.mutable_start()->mutable_assignment()->set_local_worker_num(2);
    command.mutable_start()->mutable_assignment()->set_first_rank(4);
    *command.mutable_start()->mutable_progress_rules() = rules;
    node->OnCommand(command);
    if (!answer) return;
    backend.Start(10);
    backend.Start(11);
  }

  node::FakeBackend backend;
  testing::FakeClock clock;
  RecordingLink link;
  FakeStackSampler sampler;
  double wall = 1000;
  std::vector<std::pair<pid_t, int>> signalled;
  std::map<pid_t, uint64_t> start_times;  // unset: 1
  std::set<int> unbindable;               // local ranks whose progress socket cannot be made
  std::unique_ptr<node::Node> node;
};

// A progress socket that cannot be made (just before its worker's spawn): without hang rules
// the worker runs without one (and without the GANGRUN_PROGRESS it inherited); with them it
// fails to start, since its hangs could not be seen.
TEST_F(NodeSupervisionTest, WithoutHangRulesAWorkerWhoseProgressSocketFailsRunsWithoutOne) {
  unbindable = {1};
  StartGeneration(v1::ProgressRules(), /*answer=*/false);
  ASSERT_EQ(backend.spawned.size(), 2u);
  for (const auto& entry : backend.spawned[1].env) {
    EXPECT_NE(entry.rfind("GANGRUN_PROGRESS=", 0), 0u) << entry;
  }
  EXPECT_TRUE(link.Of(&v1::NodeEvent::has_worker_exited).empty());
}

TEST_F(NodeSupervisionTest, WithHangRulesAWorkerWhoseProgressSocketFailsDoesNotStart) {
  unbindable = {1};
  v1::ProgressRules rules;
  rules.set_hang_timeout_seconds(5);
  StartGeneration(rules, /*answer=*/false);
  ASSERT_EQ(backend.spawned.size(), 1u);  // rank 4 only
  auto exited = link.Of(&v1::NodeEvent::has_worker_exited);
  ASSERT_EQ(exited.size(), 1u);
  EXPECT_EQ(exited[0].worker_exited().rank(), 5);
  EXPECT_EQ(exited[0].worker_exited().exit().exit_code(), 127);
}

TEST_F(NodeSupervisionTest, WorkersGetTheirChannelsAndTheHookOnlyWithHangRules) {
  v1::ProgressRules rules;
  rules.set_hang_timeout_seconds(5);
  rules.set_python_stacks(true);
  StartGeneration(rules);
  ASSERT_EQ(backend.spawned.size(), 2u);
  const auto& env = backend.spawned[1].env;
  auto has = [&env](const std::string& entry) {
    return std::find(env.begin(), env.end(), entry) != env.end();
  };
  EXPECT_TRUE(has("GANGRUN_PROGRESS=/run/p1"));
  EXPECT_FALSE(has("GANGRUN_PROGRESS=/stale"));  // ours replaces an inherited one
  EXPECT_TRUE(has("TORCHELASTIC_TIMER_FILE=/run/timer"));
  EXPECT_TRUE(has("STACK_HOOK=1"));
}

TEST_F(NodeSupervisionTest, ProgressTravelsAtTheHeartbeatRateAndAHangIsReportedOnce) {
  v1::ProgressRules rules;
  rules.set_hang_timeout_seconds(5);
  StartGeneration(rules);
  for (int i = 0; i < 100; ++i)
    node->supervisor().OnProgressDatagram(0, 10, "step " + std::to_string(i));
  node->supervisor().OnProgressDatagram(1, 11, "step 3");
  node->supervisor().OnProgressDatagram(7, 10, "step 3");  // no such local rank: ignored
  EXPECT_TRUE(link.Of(&v1::NodeEvent::has_progress).empty());
  clock.Advance(seconds(1));
  auto progress = link.Of(&v1::NodeEvent::has_progress);
  ASSERT_EQ(progress.size(), 1u);  // 101 datagrams, one message
  ASSERT_EQ(progress[0].progress().ranks_size(), 2);
  EXPECT_EQ(progress[0].progress().ranks(0).rank(), 4);
  EXPECT_EQ(progress[0].progress().ranks(0).step(), 99);
  clock.Advance(seconds(1));
  EXPECT_EQ(link.Of(&v1::NodeEvent::has_progress).size(), 1u);  // nothing changed
  EXPECT_TRUE(link.Of(&v1::NodeEvent::has_rank_hung).empty());
  clock.Advance(seconds(3));
  auto hung = link.Of(&v1::NodeEvent::has_rank_hung);
  ASSERT_EQ(hung.size(), 1u);  // both ranks hung at once: the scheduler hears of the first
  EXPECT_EQ(hung[0].rank_hung().rule(), "steady");
  EXPECT_EQ(hung[0].generation(), 1u);
  clock.Advance(seconds(60));
  EXPECT_EQ(link.Of(&v1::NodeEvent::has_rank_hung).size(), 1u);
}

// A rank's socket takes reports of that rank's worker only: a sibling rank's worker (pid 11,
// local rank 1) sending to local rank 0's socket is refused, and cannot hide rank 0's hang.
TEST_F(NodeSupervisionTest, ASiblingCannotReportAsAnotherRank) {
  v1::ProgressRules rules;
  rules.set_hang_timeout_seconds(5);
  StartGeneration(rules);
  node->supervisor().OnProgressDatagram(0, 10, "step 1");
  node->supervisor().OnProgressDatagram(0, 11, "step 777777");
  node->supervisor().OnProgressDatagram(0, 11, "section sibling");
  clock.Advance(seconds(1));
  auto progress = link.Of(&v1::NodeEvent::has_progress);
  ASSERT_EQ(progress.size(), 1u);
  ASSERT_EQ(progress[0].progress().ranks_size(), 1);
  EXPECT_EQ(progress[0].progress().ranks(0).rank(), 4);
  EXPECT_EQ(progress[0].progress().ranks(0).step(), 1);
  // Nor keeps it from being found hung.
  for (int i = 0; i < 6; ++i) {
    node->supervisor().OnProgressDatagram(0, 11, "step " + std::to_string(100 + i));
    clock.Advance(seconds(1));
  }
  EXPECT_FALSE(link.Of(&v1::NodeEvent::has_rank_hung).empty());
}

// A worker may report (and exit) before the keeper's word that it runs reaches the launcher:
// its report counts, and reaches the scheduler before its exit.
TEST_F(NodeSupervisionTest, AReportSentBeforeTheStartIsHeardCountsAndPrecedesTheExit) {
  v1::ProgressRules rules;
  rules.set_hang_timeout_seconds(5);
  StartGeneration(rules, /*answer=*/false);
  node->supervisor().OnProgressDatagram(0, 10,
                                        "step 1");  // pid 10 is not known to run yet: it counts
  backend.Start(10);
  backend.Exit(10, common::ExitStatus::Exited(1));
  int progress_at = -1, exited_at = -1;
  for (int i = 0; i < static_cast<int>(link.events.size()); ++i) {
    const auto& e = link.events[i];
    if (e.has_progress() && progress_at < 0) progress_at = i;
    if (e.has_worker_exited() && exited_at < 0) exited_at = i;
  }
  ASSERT_GE(progress_at, 0) << "the report was lost";
  ASSERT_GE(exited_at, 0);
  EXPECT_LT(progress_at, exited_at);
  EXPECT_EQ(link.events[progress_at].progress().ranks(0).rank(), 4);
  EXPECT_EQ(link.events[progress_at].progress().ranks(0).step(), 1);
}

TEST_F(NodeSupervisionTest, AnExitedRankCannotHang) {
  v1::ProgressRules rules;
  rules.set_initial_timeout_seconds(5);
  StartGeneration(rules);
  backend.Exit(10, common::ExitStatus::Exited(0));
  backend.Exit(11, common::ExitStatus::Exited(0));
  clock.Advance(seconds(10));
  EXPECT_TRUE(link.Of(&v1::NodeEvent::has_rank_hung).empty());
}

TEST_F(NodeSupervisionTest, CaptureSendsWhereButKeepsTheStackText) {
  StartGeneration(v1::ProgressRules{});
  v1::NodeCommand capture;
  capture.set_generation(1);
  capture.mutable_capture_stacks()->set_reason("hang");
  capture.mutable_capture_stacks()->set_timeout_seconds(3);
  node->OnCommand(capture);
  ASSERT_EQ(sampler.captured.size(), 2u);
  EXPECT_EQ(sampler.timeout, seconds(3));
  std::vector<v1::RankStack> stacks(2);
  stacks[0].set_rank(4);
  stacks[0].set_pid(10);
  stacks[0].set_where("load_batch (data.py:41)");
  stacks[0].set_text("a long stack");
  stacks[1].set_rank(5);
  stacks[1].set_pid(11);
  stacks[1].set_error("not sampled within 3 s");
  sampler.done(stacks);
  auto sent = link.Of(&v1::NodeEvent::has_stacks_captured);
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(sent[0].stacks_captured().stacks_size(), 2);
  EXPECT_EQ(sent[0].stacks_captured().stacks(0).where(), "load_batch (data.py:41)");
  EXPECT_EQ(sent[0].stacks_captured().stacks(0).text(), "");
  EXPECT_EQ(sent[0].stacks_captured().stacks(1).error(), "not sampled within 3 s");
}

TEST_F(NodeSupervisionTest, AnExpiredTorchTimerSignalsItsWorkerAndIsReported) {
  StartGeneration(v1::ProgressRules{});
  node->supervisor().OnTimerLine(
      R"({"version":1,"pid":11,"scope_id":"step","expiration_time":1002,"signal":9})");
  node->supervisor().OnTimerLine(
      R"({"version":1,"pid":10,"scope_id":"ok","expiration_time":1001,"signal":9})");
  node->supervisor().OnTimerLine(
      R"({"version":1,"pid":10,"scope_id":"ok","expiration_time":-1,"signal":0})");
  node->supervisor().OnTimerLine("not json");
  wall += 1.5;
  clock.Advance(milliseconds(1500));
  EXPECT_TRUE(signalled.empty());
  wall += 1;
  clock.Advance(seconds(1));
  ASSERT_EQ(signalled.size(), 1u);
  EXPECT_EQ(signalled[0], std::make_pair(pid_t{11}, 9));
  auto expired = link.Of(&v1::NodeEvent::has_timer_expired);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].timer_expired().rank(), 5);
  EXPECT_EQ(expired[0].timer_expired().scope(), "step");
}

TEST_F(NodeSupervisionTest, ATimerFarInTheFutureIsCheckedDailyInsteadOfSpinning) {
  StartGeneration(v1::ProgressRules{});
  node->supervisor().OnTimerLine(
      R"({"pid":11,"scope_id":"far","expiration_time":1e300,"signal":9})");
  node->supervisor().OnTimerLine(
      R"({"pid":10,"scope_id":"far","expiration_time":10000000000.0,"signal":9})");
  const size_t pending = clock.pending_timers();
  clock.Advance(seconds(25 * 3600));  // a daily check, nothing due
  EXPECT_TRUE(signalled.empty());
  EXPECT_EQ(clock.pending_timers(), pending);
}

TEST_F(NodeSupervisionTest, TimersDieWithTheirWorkerAndTheirGeneration) {
  StartGeneration(v1::ProgressRules{});
  node->supervisor().OnTimerLine(
      R"({"pid":11,"scope_id":"step","expiration_time":1010,"signal":9})");
  node->supervisor().OnTimerLine(
      R"({"pid":10,"scope_id":"step","expiration_time":1010,"signal":9})");
  // Worker 10 exits: its timers go with it, while 11's stay.
  backend.Exit(10, common::ExitStatus::Exited(1));
  v1::NodeCommand abort;
  abort.set_generation(1);
  abort.mutable_abort()->set_reason("rank 4 failed");
  node->OnCommand(abort);
  backend.Exit(11, common::ExitStatus::Signaled(SIGTERM));
  // A new generation: the old workers' timers are gone, even if their pids come back.
  v1::NodeCommand second;
  second.set_generation(2);
  auto* assignment = second.mutable_start()->mutable_assignment();
  assignment->set_first_rank(4);
  assignment->set_local_worker_num(2);
  assignment->set_world_size(6);
  node->OnCommand(second);
  backend.Start(10);
  backend.Start(11);
  wall += 20;
  clock.Advance(seconds(20));
  EXPECT_TRUE(signalled.empty());
  EXPECT_TRUE(link.Of(&v1::NodeEvent::has_timer_expired).empty());
}

TEST_F(NodeSupervisionTest, ATimerWhosePidWentToAnotherProcessNeverFires) {
  StartGeneration(v1::ProgressRules{});
  start_times[11] = 100;
  node->supervisor().OnTimerLine(
      R"({"pid":11,"scope_id":"step","expiration_time":1002,"signal":9})");
  start_times[11] = 200;  // pid 11 is another process now
  wall += 5;
  clock.Advance(seconds(5));
  EXPECT_TRUE(signalled.empty());
}

TEST_F(NodeSupervisionTest, ATimerOfAStrangerSignalsNobody) {
  StartGeneration(v1::ProgressRules{});
  node->supervisor().OnTimerLine(R"({"pid":1,"scope_id":"x","expiration_time":0,"signal":9})");
  clock.Advance(seconds(1));
  EXPECT_TRUE(signalled.empty());
  EXPECT_TRUE(link.Of(&v1::NodeEvent::has_timer_expired).empty());
}

// ---- the scheduler ----

class SchedulerHangTest : public ::testing::Test {
 protected:
  void Make(int max_restarts = 0) {
    scheduler::Scheduler::Options options;
    options.world_size = 4;
    options.max_restarts = max_restarts;
    options.node_timeout = common::Duration::zero();  // no heartbeats in these tests
    options.progress_rules.set_hang_timeout_seconds(30);
    options.progress_rules.set_stack_timeout_seconds(10);
    scheduler = std::make_unique<scheduler::Scheduler>(clock, options);
    scheduler->SetOnFinished([this](const v1::JobOutcome& o) { outcome = o; });
    scheduler->Start();
    ia = scheduler->AddNode(&a);
    scheduler->OnNodeEvent(ia, testing::JoinEvent("a", "10.0.0.1", 0, 2));
    ib = scheduler->AddNode(&b);
    scheduler->OnNodeEvent(ib, testing::JoinEvent("b", "10.0.0.2", 1, 2));
    for (int rank = 0; rank < 4; ++rank) {
      scheduler->OnNodeEvent(rank < 2 ? ia : ib, testing::StartedEvent(1, rank, 100 + rank));
    }
  }
  v1::NodeEvent Hung(int rank) {
    v1::NodeEvent event;
    event.set_generation(scheduler->generation());
    event.mutable_rank_hung()->set_rank(rank);
    event.mutable_rank_hung()->set_rule("steady");
    event.mutable_rank_hung()->set_silent_seconds(30);
    event.mutable_rank_hung()->set_bound_seconds(30);
    return event;
  }
  v1::NodeEvent Stacks(std::vector<std::pair<int, std::string>> where) {
    v1::NodeEvent event;
    event.set_generation(scheduler->generation());
    auto* captured = event.mutable_stacks_captured();
    for (const auto& [rank, place] : where) {
      auto* stack = captured->add_stacks();
      stack->set_rank(rank);
      stack->set_where(place);
    }
    return event;
  }
  void EndGeneration() {
    for (int rank = 0; rank < 4; ++rank) {
      scheduler->OnNodeEvent(rank < 2 ? ia : ib,
                             testing::ExitedEvent(scheduler->generation(), rank, 0, true, SIGTERM));
    }
    scheduler->OnNodeEvent(ia, testing::EndedEvent(scheduler->generation()));
    scheduler->OnNodeEvent(ib, testing::EndedEvent(scheduler->generation()));
  }

  testing::FakeClock clock;
  testing::FakeNodeLink a, b;
  int ia = 0, ib = 0;
  std::unique_ptr<scheduler::Scheduler> scheduler;
  std::optional<v1::JobOutcome> outcome;
};

TEST_F(SchedulerHangTest, TheRulesTravelWithEveryGeneration) {
  Make();
  ASSERT_TRUE(a.commands[0].has_start());
  EXPECT_EQ(a.commands[0].start().progress_rules().hang_timeout_seconds(), 30);
}

TEST_F(SchedulerHangTest, AHangCapturesEveryStackThenStopsWithTheOddOneOut) {
  Make();
  scheduler->OnNodeEvent(ia, Hung(0));
  EXPECT_EQ(scheduler->Status().phase(), v1::JOB_PHASE_HUNG);
  ASSERT_TRUE(a.commands.back().has_capture_stacks());
  ASSERT_TRUE(b.commands.back().has_capture_stacks());
  EXPECT_EQ(a.commands.back().capture_stacks().timeout_seconds(), 10);
  scheduler->OnNodeEvent(ib, Hung(3));  // the same hang, seen elsewhere: nothing new
  scheduler->OnNodeEvent(ia, Stacks({{0, "wait (t.py:8)"}, {1, "wait (t.py:8)"}}));
  EXPECT_FALSE(a.aborted());
  scheduler->OnNodeEvent(ib, Stacks({{2, "load (d.py:4)"}, {3, "wait (t.py:8)"}}));
  ASSERT_TRUE(a.aborted());
  // The headline leads with where to look, not with the rank whose silence was noticed first;
  // the stop's lines carry only its first clause (the whole verdict is the report's).
  EXPECT_EQ(a.commands.back().abort().reason(),
            "the job hung: rank 2 on b is the odd one out, in load (d.py:4)");
  EndGeneration();
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_HUNG);
  EXPECT_EQ(outcome->root_cause().rank(), 2);
  EXPECT_EQ(outcome->root_cause().host(), "b");
  ASSERT_EQ(outcome->stack_groups_size(), 2);
  EXPECT_TRUE(outcome->stack_groups(1).odd_one_out());
}

TEST_F(SchedulerHangTest, ANodeThatNeverAnswersIsWaitedForOnlyUntilTheCaptureTimeout) {
  Make();
  scheduler->OnNodeEvent(ia, Hung(1));
  scheduler->OnNodeEvent(ia, Stacks({{0, "x"}, {1, "x"}}));
  clock.Advance(seconds(14));
  EXPECT_FALSE(a.aborted());
  clock.Advance(seconds(1));  // 10 s + the 5 s margin
  ASSERT_TRUE(a.aborted());
  EndGeneration();
  ASSERT_TRUE(outcome.has_value());
  EXPECT_NE(outcome->message().find("2 ranks (0-1) in x"), std::string::npos) << outcome->message();
}

TEST_F(SchedulerHangTest, AFailureDuringTheCaptureWins) {
  Make();
  scheduler->OnNodeEvent(ia, Hung(1));
  scheduler->OnNodeEvent(ib, testing::ExitedEvent(1, 2, 7));
  ASSERT_TRUE(a.aborted());
  EndGeneration();
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_WORKER_FAILED);
}

TEST_F(SchedulerHangTest, AHangUsesTheRestartBudget) {
  Make(/*max_restarts=*/1);
  scheduler->OnNodeEvent(ia, Hung(1));
  clock.Advance(seconds(15));
  EndGeneration();
  EXPECT_FALSE(outcome.has_value());
  clock.Advance(seconds(2));  // the backoff
  EXPECT_EQ(scheduler->generation(), 2u);
  EXPECT_EQ(scheduler->Status().restarts(), 1);
}

TEST_F(SchedulerHangTest, AnExpiredTorchTimerStopsTheJobAsHung) {
  Make();
  v1::NodeEvent event;
  event.set_generation(1);
  event.mutable_timer_expired()->set_rank(3);
  event.mutable_timer_expired()->set_pid(103);
  event.mutable_timer_expired()->set_scope("data_load");
  event.mutable_timer_expired()->set_signal(SIGKILL);
  scheduler->OnNodeEvent(ib, event);
  ASSERT_TRUE(a.aborted());
  EndGeneration();
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_HUNG);
  EXPECT_NE(outcome->message().find("'data_load'"), std::string::npos);
  EXPECT_EQ(outcome->root_cause().rank(), 3);
}

TEST_F(SchedulerHangTest, RefusesProgressOfRanksANodeDoesNotRun) {
  Make();
  v1::NodeEvent event;
  event.set_generation(1);
  auto* rank = event.mutable_progress()->add_ranks();
  rank->set_rank(3);  // node a runs 0-1
  rank->set_reports(1);
  rank->set_step(9);
  scheduler->OnNodeEvent(ia, event);
  scheduler->OnNodeEvent(ia, Hung(2));
  auto status = scheduler->Status();
  EXPECT_EQ(status.nodes(1).workers(1).reports(), 0u);
  EXPECT_EQ(status.phase(), v1::JOB_PHASE_RUNNING);
}

TEST_F(SchedulerHangTest, StatusShowsStepsAgesAndStragglers) {
  Make();
  for (int node = 0; node < 2; ++node) {
    v1::NodeEvent event;
    event.set_generation(1);
    for (int local = 0; local < 2; ++local) {
      const int r = node * 2 + local;
      auto* rank = event.mutable_progress()->add_ranks();
      rank->set_rank(r);
      rank->set_reports(10);
      rank->set_step(100);
      rank->set_age_seconds(0.5);
      rank->set_step_seconds(r == 3 ? 0.5 : 0.2);  // median 0.2; 0.5 > 1.5 x 0.2
      rank->set_section(r == 0 ? "checkpoint" : "");
    }
    scheduler->OnNodeEvent(node == 0 ? ia : ib, event);
  }
  clock.Advance(seconds(2));
  auto status = scheduler->Status();
  EXPECT_EQ(status.stragglers(), 1);
  EXPECT_DOUBLE_EQ(status.median_step_seconds(), 0.2);
  const auto& w3 = status.nodes(1).workers(1);
  EXPECT_EQ(w3.rank(), 3);
  EXPECT_TRUE(w3.straggler());
  EXPECT_EQ(w3.step(), 100);
  EXPECT_NEAR(w3.progress_age_seconds(), 2.5, 1e-6);
  EXPECT_FALSE(status.nodes(0).workers(0).straggler());
  EXPECT_EQ(status.nodes(0).workers(0).section(), "checkpoint");
}

}  // namespace
}  // namespace gangrun
