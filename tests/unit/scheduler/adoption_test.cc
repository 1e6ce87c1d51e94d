// A scheduler that adopts a running generation (Scheduler::Options::adopt_timeout): a daemon's
// job whose daemon moved; a real Scheduler on the fake clock.

#include <gtest/gtest.h>

#include <csignal>

#include "scheduler/scheduler.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/scheduler_fakes.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::seconds;
using Link = testing::FakeNodeLink;

class AdoptionTest : public ::testing::Test {
 protected:
  void Make(int max_restarts = 0) {
    options.world_size = 4;
    options.node_timeout = seconds(60);
    options.max_restarts = max_restarts;
    options.await_replacement = false;
    options.adopt_timeout = seconds(9);
    scheduler = std::make_unique<Scheduler>(clock, options);
    scheduler->SetOnFinished([this](const v1::JobOutcome& o) { outcome = o; });
    scheduler->Start();
  }
  // A node that runs node rank `node_rank` (2 workers) of generation `generation`.
  int Resume(int node_rank, uint64_t generation, int restart_count,
             std::vector<int> exited_codes = {}, bool ended = false) {
    links.push_back(std::make_unique<Link>());
    const int id = scheduler->AddNode(links.back().get());
    v1::NodeEvent event = testing::JoinEvent("h" + std::to_string(node_rank),
                                             "10.0.0." + std::to_string(node_rank + 1), -1, 2);
    v1::ResumeGeneration* resume = event.mutable_join()->mutable_resume();
    resume->set_generation(generation);
    resume->mutable_start()->set_restart_count(restart_count);
    auto* assignment = resume->mutable_start()->mutable_assignment();
    assignment->set_node_rank(node_rank);
    assignment->set_node_count(2);
    assignment->set_first_rank(2 * node_rank);
    assignment->set_local_worker_num(2);
    assignment->set_world_size(4);
    for (int i = 0; i < 2; ++i) {
      auto* started = resume->add_started();
      started->set_rank(2 * node_rank + i);
      started->set_pid(100 + 2 * node_rank + i);
    }
    for (size_t i = 0; i < exited_codes.size(); ++i) {
      *resume->add_exited() =
          testing::ExitedEvent(generation, 2 * node_rank + static_cast<int>(i), exited_codes[i])
              .worker_exited();
    }
    resume->set_ended(ended);
    scheduler->OnNodeEvent(id, event);
    return id;
  }

  testing::FakeClock clock;
  Scheduler::Options options;
  std::unique_ptr<Scheduler> scheduler;
  std::vector<std::unique_ptr<Link>> links;
  std::optional<v1::JobOutcome> outcome;
};

TEST_F(AdoptionTest, TheRunningGenerationGoesOnOnceEveryPlaceIsBackAndNothingStarts) {
  Make(/*max_restarts=*/3);
  Resume(1, 7, 2);
  EXPECT_EQ(scheduler->state(), JobState::kForming) << "one of two places is back";
  Resume(0, 7, 2);
  EXPECT_EQ(scheduler->state(), JobState::kRunning);
  EXPECT_EQ(scheduler->generation(), 7u) << "the generation goes on";
  for (const auto& link : links) {
    for (const auto& command : link->commands) {
      EXPECT_FALSE(command.has_start() || command.has_abort()) << command.DebugString();
    }
  }
  const v1::GetStatusResponse status = scheduler->Status();
  EXPECT_EQ(status.restarts(), 2);
  int running = 0;
  for (const auto& node : status.nodes()) {
    for (const auto& worker : node.workers()) {
      running += worker.state() == v1::WORKER_STATE_RUNNING && worker.pid() >= 100;
    }
  }
  EXPECT_EQ(running, 4);
  // The job then ends as any generation does.
  for (int id = 1; id <= 2; ++id) {
    for (int rank = 2 * (id - 1); rank < 2 * id; ++rank) {
      scheduler->OnNodeEvent(id, testing::ExitedEvent(7, rank, 0));
    }
    scheduler->OnNodeEvent(id, testing::EndedEvent(7));
  }
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_SUCCEEDED);
}

TEST_F(AdoptionTest, WhatHappenedWhileNoSchedulerHeardIsReplayed) {
  Make();
  Resume(0, 3, 0, {0, 0}, /*ended=*/true);
  Resume(1, 3, 0, {0, 0}, /*ended=*/true);
  ASSERT_TRUE(outcome.has_value()) << "every worker had exited 0 meanwhile";
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_SUCCEEDED);
}

TEST_F(AdoptionTest, AFailureDuringTheMoveStopsTheGenerationAsAnyFailure) {
  Make();
  Resume(0, 3, 0, {9});
  Resume(1, 3, 0);
  EXPECT_EQ(scheduler->state(), JobState::kStopping);
  EXPECT_TRUE(links[0]->aborted());
  EXPECT_TRUE(links[1]->aborted());
}

TEST_F(AdoptionTest, APlaceNotBackInTimeIsALostNodeUnderTheJobsRules) {
  Make();
  Resume(0, 5, 0);
  clock.Advance(seconds(10));
  EXPECT_TRUE(links[0]->aborted()) << "the survivor's generation ends";
  EXPECT_FALSE(outcome.has_value());
  scheduler->OnNodeEvent(1, testing::EndedEvent(5));
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_NODE_LOST);
  EXPECT_NE(outcome->message().find("2 worker(s) did not come back within 9.0 s"),
            std::string::npos)
      << outcome->message();
}

// The record said no generation had started; it may lag the nodes: those back with generation
// 1 are adopted, plain joins (nobody back yet) form the job afresh.
TEST_F(AdoptionTest, ARecordBeforeTheFirstGenerationAdoptsItsNodesOrFormsAfresh) {
  options.adopt_or_form = true;
  Make();
  Resume(0, 1, 0);
  Resume(1, 1, 0);
  EXPECT_EQ(scheduler->state(), JobState::kRunning);
  EXPECT_EQ(scheduler->generation(), 1u);
  for (const auto& link : links) {
    for (const auto& command : link->commands) EXPECT_FALSE(command.has_start());
  }

  Make();
  links.clear();  // the first scheduler's, gone with it
  for (int i = 0; i < 2; ++i) {
    links.push_back(std::make_unique<Link>());
    const int id = scheduler->AddNode(links.back().get());
    scheduler->OnNodeEvent(
        id, testing::JoinEvent("h" + std::to_string(i), "10.0.0." + std::to_string(i + 1), -1, 2));
  }
  EXPECT_EQ(scheduler->generation(), 1u) << "formed afresh";
  for (const auto& link : links) {
    EXPECT_FALSE(link->rejected());
    bool started = false;
    for (const auto& command : link->commands) started |= command.has_start();
    EXPECT_TRUE(started);
  }
  Resume(0, 1, 0);
  EXPECT_TRUE(links.back()->rejected()) << "the job formed afresh: nothing to resume";
}

TEST_F(AdoptionTest, MismatchedGenerationsAreRefusedAndNobodyBackDecidesNothing) {
  Make();
  Resume(0, 5, 0);
  Resume(1, 4, 0);
  EXPECT_TRUE(links[1]->rejected()) << "generation 4 against 5";
  links.push_back(std::make_unique<Link>());
  const int plain = scheduler->AddNode(links.back().get());
  scheduler->OnNodeEvent(plain, testing::JoinEvent("late", "10.0.0.9", -1, 2));
  EXPECT_TRUE(links.back()->rejected()) << "a plain join while the generation is adopted";

  // Another scheduler, and nobody comes back: the nodes may all still follow the lost daemon
  // (cut off from the store only), so nothing is taken over or decided until one is back or
  // the daemon stops the job.
  Make();
  clock.Advance(seconds(30));
  EXPECT_FALSE(outcome.has_value());
  EXPECT_EQ(scheduler->generation(), 0u);
  scheduler->Stop(SIGTERM, "no launcher of the job runs on its agents");
  ASSERT_TRUE(outcome.has_value());
  // Nobody back within the cluster timeout: the job's nodes are lost.
  outcome.reset();
  options.cluster_timeout = seconds(40);
  Make();
  clock.Advance(seconds(30));
  EXPECT_FALSE(outcome.has_value());
  clock.Advance(seconds(20));
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_NODE_LOST);
  EXPECT_NE(outcome->message().find("nobody came back"), std::string::npos) << outcome->message();
}

}  // namespace
}  // namespace gangrun::scheduler
