// The hang capture (scheduler/hang_capture.h) against a fake node directory: every running
// node is asked, the verdict names where to look first with the directory's pid, a node that
// does not answer in time leaves its ranks not sampled, and a cancelled capture says nothing.
// No Scheduler.

#include "scheduler/hang_capture.h"

#include <gtest/gtest.h>

#include "tests/testing/fake_clock.h"
#include "tests/testing/fake_node_directory.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::seconds;

class HangCaptureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nodes_.job_state = JobState::kCapturing;
    nodes_.AddNode(1, "h1", {0, 1});
    nodes_.AddNode(2, "h2", {2, 3});
    hung_.set_host("h1");
    hung_.set_rank(0);
    hung_.set_pid(1000);
  }
  HangCapture Capture() {
    return HangCapture(nodes_, clock_, 2.0,
                       [this](HangVerdict verdict) { verdicts_.push_back(std::move(verdict)); });
  }
  // Node `node_id`'s stacks: each of its ranks with `collectives` collectives issued, in f.
  v1::StacksCaptured Stacks(int node_id, std::map<int, int64_t> collectives) const {
    v1::StacksCaptured captured;
    for (const auto& [rank, count] : collectives) {
      v1::RankStack* stack = captured.add_stacks();
      stack->set_rank(rank);
      stack->set_where("step (train.py:9)");
      stack->set_collectives(count);
      stack->set_last_op("all_reduce");
      if (rank == 3) stack->set_flight_recorder("/logs/nccl_trace_rank_3");
    }
    (void)node_id;
    return captured;
  }

  testing::FakeClock clock_;
  testing::FakeNodeDirectory nodes_;
  v1::RootCause hung_;
  std::vector<HangVerdict> verdicts_;
};

TEST_F(HangCaptureTest, TheRankBehindTheOthersIsWhereToLookFirst) {
  HangCapture capture = Capture();
  capture.Begin("rank 0 on h1 made no progress for 30 s (--hang_timeout 30)", hung_);
  EXPECT_EQ(nodes_.SentTo(1).size(), 1u);
  EXPECT_EQ(nodes_.SentTo(2).size(), 1u);
  EXPECT_TRUE(nodes_.SentTo(1)[0].has_capture_stacks());
  EXPECT_EQ(nodes_.SentTo(1)[0].capture_stacks().request(), 0u) << "the hang's, not a request";
  capture.OnCaptured(1, Stacks(1, {{0, 42}, {1, 42}}));
  EXPECT_TRUE(verdicts_.empty());
  capture.OnCaptured(2, Stacks(2, {{2, 42}, {3, 41}}));
  ASSERT_EQ(verdicts_.size(), 1u);
  const HangVerdict& verdict = verdicts_[0];
  EXPECT_EQ(verdict.root_cause.rank(), 3);
  EXPECT_EQ(verdict.root_cause.host(), "h2");
  EXPECT_EQ(verdict.root_cause.pid(), 1003) << "the directory's pid of rank 3";
  EXPECT_EQ(verdict.message.rfind("rank 3 on h2 is behind the others, at collective #41", 0), 0u)
      << verdict.message;
  EXPECT_NE(verdict.message.find(kLookHereFirst), std::string::npos) << verdict.message;
  EXPECT_NE(verdict.message.find("; noticed when rank 0 on h1 made no progress"), std::string::npos)
      << verdict.message;
  EXPECT_EQ(verdict.groups.size(), 2u);
  // The hang and the flight recorder's dump were recorded.
  ASSERT_EQ(nodes_.recorded.size(), 2u);
  EXPECT_EQ(nodes_.recorded[0].first, Event::kFlightRecorder);
  EXPECT_EQ(nodes_.recorded[1].first, Event::kHang);
  EXPECT_FALSE(capture.active());
}

TEST_F(HangCaptureTest, ANodeThatDoesNotAnswerInTimeLeavesTheHungRankAsTheCause) {
  HangCapture capture = Capture();
  capture.Begin("rank 0 on h1 made no progress", hung_);
  capture.OnCaptured(1, Stacks(1, {{0, 42}, {1, 42}}));
  capture.OnCaptured(3, Stacks(3, {{5, 1}}));  // not a node that was asked
  clock_.Advance(seconds(6));
  EXPECT_TRUE(verdicts_.empty());
  clock_.Advance(seconds(2));  // the nodes' 2 s and the answers' margin of 5 s
  ASSERT_EQ(verdicts_.size(), 1u);
  EXPECT_EQ(verdicts_[0].root_cause.rank(), 0);
  EXPECT_EQ(verdicts_[0].root_cause.pid(), 1000);
  EXPECT_EQ(verdicts_[0].message.rfind("rank 0 on h1 made no progress; ", 0), 0u)
      << verdicts_[0].message;
  capture.OnCaptured(2, Stacks(2, {{2, 42}}));  // too late: nothing more
  EXPECT_EQ(verdicts_.size(), 1u);
}

TEST_F(HangCaptureTest, NoRunningNodeJudgesAtOnceAndACancelledCaptureSaysNothing) {
  for (auto& [rank, place] : nodes_.places) place.running = false;
  HangCapture idle = Capture();
  idle.Begin("rank 0 on h1 made no progress", hung_);
  EXPECT_TRUE(nodes_.sent.empty());
  ASSERT_EQ(verdicts_.size(), 1u);
  EXPECT_EQ(verdicts_[0].message, "rank 0 on h1 made no progress");
  for (auto& [rank, place] : nodes_.places) place.running = true;
  HangCapture cancelled = Capture();
  cancelled.Begin("rank 0 on h1 made no progress", hung_);
  cancelled.Cancel();
  cancelled.OnCaptured(1, Stacks(1, {{0, 42}, {1, 42}}));
  clock_.Advance(seconds(60));
  EXPECT_EQ(verdicts_.size(), 1u);
}

}  // namespace
}  // namespace gangrun::scheduler
