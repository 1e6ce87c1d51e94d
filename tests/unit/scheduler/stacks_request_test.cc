// The `gangrun stacks` component (scheduler/stacks_request.h) against a fake node directory:
// who is asked, the grouped answer, a node that does not answer in time, and what it refuses.
// No Scheduler.

#include "scheduler/stacks_request.h"

#include <gtest/gtest.h>

#include "tests/testing/fake_clock.h"
#include "tests/testing/fake_node_directory.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::seconds;

class StacksRequestsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nodes_.size = 4;
    nodes_.AddNode(1, "h1", {0, 1});
    nodes_.AddNode(2, "h2", {2, 3});
  }
  // Asks, keeping the answer.
  void Ask(StacksRequests& stacks, std::vector<int> ranks = {}, double timeout = 0) {
    v1::StacksRequest request;
    for (int rank : ranks) request.add_ranks(rank);
    request.set_timeout_seconds(timeout);
    stacks.Request(request, [this](absl::StatusOr<v1::StacksResponse> response) {
      ++answers_;
      answer_ = std::move(response);
    });
  }
  // Node `node_id`'s answer to the capture it was sent: each rank in `where`.
  v1::StacksCaptured Captured(int node_id, const std::string& where) const {
    const auto sent = nodes_.SentTo(node_id);
    EXPECT_FALSE(sent.empty());
    v1::StacksCaptured captured;
    if (sent.empty()) return captured;
    captured.set_request(sent.back().capture_stacks().request());
    for (const auto& [rank, place] : nodes_.places) {
      if (place.node_id != node_id) continue;
      v1::RankStack* stack = captured.add_stacks();
      stack->set_rank(rank);
      stack->set_where(where);
      stack->set_text("Traceback\n  in " + where + "\x01");
    }
    return captured;
  }

  testing::FakeClock clock_;
  testing::FakeNodeDirectory nodes_;
  int answers_ = 0;
  absl::StatusOr<v1::StacksResponse> answer_ = absl::UnknownError("no answer");
};

TEST_F(StacksRequestsTest, EveryRunningNodeIsAskedAndTheAnswersAreGrouped) {
  StacksRequests stacks(nodes_, clock_, 5.0);
  Ask(stacks);
  for (int node : {1, 2}) {
    ASSERT_EQ(nodes_.SentTo(node).size(), 1u);
    const v1::CaptureStacks capture = nodes_.SentTo(node)[0].capture_stacks();
    EXPECT_EQ(capture.timeout_seconds(), 5.0);  // the job's when the request does not say
    EXPECT_TRUE(capture.with_text());
  }
  stacks.OnCaptured(1, Captured(1, "step (train.py:9)"));
  EXPECT_EQ(answers_, 0);
  stacks.OnCaptured(2, Captured(2, "load (data.py:4)"));
  ASSERT_EQ(answers_, 1);
  ASSERT_TRUE(answer_.ok()) << answer_.status();
  EXPECT_EQ(answer_->stacks_size(), 4);
  EXPECT_EQ(answer_->stacks(2).host(), "h2");
  EXPECT_EQ(answer_->stacks(2).text(), "Traceback\n  in load (data.py:4)?") << "sanitized";
  EXPECT_EQ(answer_->groups_size(), 2);
  ASSERT_EQ(nodes_.recorded.size(), 1u);
  EXPECT_EQ(nodes_.recorded[0].first, Event::kStacksRequested);
  // A second answer from a node is not counted twice.
  stacks.OnCaptured(2, Captured(2, "load (data.py:4)"));
  EXPECT_EQ(answers_, 1);
}

TEST_F(StacksRequestsTest, OnlyTheNodesOfTheRanksAskedForAreAsked) {
  nodes_.places[3].running =
      false;  // node 2 ended its generation: rank 2 is asked of it all the same
  StacksRequests stacks(nodes_, clock_, 5.0);
  Ask(stacks, {0});
  EXPECT_EQ(nodes_.SentTo(1).size(), 1u);
  EXPECT_TRUE(nodes_.SentTo(2).empty());
  EXPECT_EQ(nodes_.SentTo(1)[0].capture_stacks().ranks_size(), 1);
}

TEST_F(StacksRequestsTest, ANodeThatDoesNotAnswerInTimeIsNamed) {
  StacksRequests stacks(nodes_, clock_, 5.0);
  Ask(stacks, {}, 1.0);
  stacks.OnCaptured(1, Captured(1, "step (train.py:9)"));
  clock_.Advance(seconds(2));
  EXPECT_EQ(answers_, 0);
  clock_.Advance(seconds(2));  // the request's second and the answers' margin have passed
  ASSERT_EQ(answers_, 1);
  ASSERT_TRUE(answer_.ok());
  EXPECT_EQ(answer_->stacks_size(), 2);
  EXPECT_NE(answer_->summary().find("no answer in time from 1 node(s), e.g. h2"), std::string::npos)
      << answer_->summary();
  // Its late answer goes nowhere.
  stacks.OnCaptured(2, Captured(2, "load (data.py:4)"));
  EXPECT_EQ(answers_, 1);
}

TEST_F(StacksRequestsTest, WhatItCannotAnswerIsRefusedAtOnce) {
  StacksRequests stacks(nodes_, clock_, 5.0);
  Ask(stacks, {4});
  EXPECT_EQ(answer_.status().code(), absl::StatusCode::kInvalidArgument);
  Ask(stacks);
  Ask(stacks);
  EXPECT_EQ(answer_.status().code(), absl::StatusCode::kUnavailable) << "one at a time";
  nodes_.job_state = JobState::kBackingOff;
  StacksRequests idle(nodes_, clock_, 5.0);
  Ask(idle);
  EXPECT_EQ(answer_.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(answers_, 3);
}

TEST_F(StacksRequestsTest, ARequestOpenWhenTheJobEndsIsAnswered) {
  {
    StacksRequests stacks(nodes_, clock_, 5.0);
    Ask(stacks);
  }
  ASSERT_EQ(answers_, 1);
  EXPECT_EQ(answer_.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gangrun::scheduler
