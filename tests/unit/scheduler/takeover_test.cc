// A scheduler that takes a job over from the store's record (Scheduler::Options::takeover),
// and the store's fence (Options::may_start); a real Scheduler on the fake clock.

#include <gtest/gtest.h>

#include "scheduler/job_record.h"
#include "scheduler/scheduler.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/scheduler_fakes.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Link = testing::FakeNodeLink;

class TakeoverTest : public ::testing::Test {
 protected:
  void Make(int world, int min_world, int max_restarts,
            std::optional<Scheduler::Options::Takeover> takeover) {
    options.world_size = world;
    options.min_world_size = min_world;
    options.cluster_timeout = seconds(10);
    options.node_timeout = seconds(60);
    options.max_restarts = max_restarts;
    options.last_call = seconds(1);
    options.takeover = std::move(takeover);
    options.may_start = [this] { return lease_valid; };
    scheduler = std::make_unique<Scheduler>(clock, options);
    scheduler->SetOnFinished([this](const v1::JobOutcome& o) { outcome = o; });
    scheduler->SetOnRecord([this](nlohmann::json record) { records.push_back(record); });
    scheduler->Start();
  }
  int Join(const std::string& name) {
    links.push_back(std::make_unique<Link>());
    int id = scheduler->AddNode(links.back().get());
    scheduler->OnNodeEvent(
        id, testing::JoinEvent(name, "10.0.0." + std::to_string(links.size()), -1, 1));
    return id;
  }
  const v1::NodeCommand* LastStart(size_t index) const {
    const auto& commands = links.at(index)->commands;
    for (auto it = commands.rbegin(); it != commands.rend(); ++it) {
      if (it->has_start()) return &*it;
    }
    return nullptr;
  }

  testing::FakeClock clock;
  Scheduler::Options options;
  bool lease_valid = true;
  std::unique_ptr<Scheduler> scheduler;
  std::vector<std::unique_ptr<Link>> links;
  std::optional<v1::JobOutcome> outcome;
  std::vector<nlohmann::json> records;
};

TEST_F(TakeoverTest, AFixedJobUsesARestartAndWaitsForTheLostHostsPlace) {
  Make(2, 0, /*max_restarts=*/2, Scheduler::Options::Takeover{4, 1, "the scheduler's host h0"});
  EXPECT_EQ(scheduler->state(), JobState::kAwaitingReplacement);
  Join("survivor");
  EXPECT_EQ(LastStart(0), nullptr) << "one node of two: the lost place is empty";
  Join("replacement");
  const v1::NodeCommand* start = LastStart(0);
  ASSERT_NE(start, nullptr);
  EXPECT_EQ(start->generation(), 5u) << "the generation goes on from the record";
  EXPECT_EQ(start->start().restart_count(), 2) << "the lost host used a restart";
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back()["generation"], 5);
  EXPECT_EQ(records.back()["restarts_used"], 2);
  EXPECT_EQ(records.back()["members"].size(), 2u);
}

TEST_F(TakeoverTest, RestartsForgivenBeforeTheTakeoverStayForgiven) {
  // The record says 2 restarts, 1 of them forgiven as a node's hardware's: with 3 allowed,
  // the lost host's place uses the second counted one and a failure after it is restarted.
  options.restarts_forgiven = 1;
  Make(2, 0, /*max_restarts=*/3, Scheduler::Options::Takeover{3, 2, "the scheduler's host h0"});
  const int a = Join("survivor");
  const int b = Join("replacement");
  const v1::NodeCommand* start = LastStart(0);
  ASSERT_NE(start, nullptr);
  EXPECT_EQ(start->start().restart_count(), 3);
  EXPECT_EQ(records.back()["restarts_forgiven"], 1);
  EXPECT_EQ(scheduler->Status().restarts(), 3);
  scheduler->OnNodeEvent(a, testing::ExitedEvent(4, 0, 1));
  scheduler->OnNodeEvent(a, testing::EndedEvent(4));
  scheduler->OnNodeEvent(b, testing::EndedEvent(4));
  EXPECT_FALSE(outcome.has_value()) << outcome->message();
  EXPECT_EQ(scheduler->state(), JobState::kBackingOff) << "restart 3 of 3, 1 more not counted";
}

TEST_F(TakeoverTest, NoNodeInTheLostPlaceWithinTheClusterTimeoutLosesTheJob) {
  Make(2, 0, 1, Scheduler::Options::Takeover{1, 0, "the scheduler's host h0 was lost"});
  Join("survivor");
  clock.Advance(seconds(11));
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_NODE_LOST);
  EXPECT_NE(outcome->message().find("the scheduler's host h0 was lost"), std::string::npos)
      << outcome->message();
  EXPECT_EQ(records.back()["outcome"]["kind"], "node_lost");
}

TEST_F(TakeoverTest, AnElasticJobReformsWithTheSurvivorsAndNoRestartUsed) {
  Make(3, 2, 0, Scheduler::Options::Takeover{2, 0, "the scheduler's host h0 was lost"});
  Join("a");
  Join("b");
  clock.Advance(seconds(1));  // --last_call
  const v1::NodeCommand* start = LastStart(0);
  ASSERT_NE(start, nullptr);
  EXPECT_EQ(start->generation(), 3u);
  EXPECT_EQ(start->start().restart_count(), 0);
  EXPECT_EQ(start->start().assignment().world_size(), 2);
}

TEST_F(TakeoverTest, NothingStartsWithoutAConfirmedLeaseAndItStartsOnceConfirmed) {
  Make(2, 0, 0, std::nullopt);
  lease_valid = false;
  Join("a");
  Join("b");
  EXPECT_EQ(LastStart(0), nullptr) << "a scheduler without a confirmed lease started workers";
  EXPECT_EQ(scheduler->generation(), 0u);
  clock.Advance(seconds(5));
  EXPECT_EQ(LastStart(0), nullptr);
  lease_valid = true;
  clock.Advance(milliseconds(200));
  ASSERT_NE(LastStart(0), nullptr);
  EXPECT_EQ(scheduler->generation(), 1u);
}

TEST_F(TakeoverTest, StoppingNeverWaitsForTheLease) {
  Make(2, 0, 0, std::nullopt);
  int a = Join("a");
  Join("b");
  ASSERT_NE(LastStart(0), nullptr);
  lease_valid = false;
  scheduler->OnNodeDisconnected(a);
  EXPECT_TRUE(links[1]->aborted()) << "the survivor was not told to stop";
}

// A record gangrun did not write as it expects (another version, a hand edit) never throws.
TEST(JobRecordTest, AFieldOfAnotherTypeReadsAsItsFallback) {
  const nlohmann::json record = {{"generation", "three"}, {"restarts_used", 2}};
  EXPECT_EQ(RecordField(record, "generation", uint64_t{0}), 0u);
  EXPECT_EQ(RecordField(record, "restarts_used", 0), 2);
  EXPECT_EQ(RecordField(nlohmann::json::array(), "generation", 7), 7);
  const v1::JobOutcome outcome = OutcomeFromRecord({{"code", "x"}, {"message", 5}});
  EXPECT_EQ(outcome.kind(), v1::JobOutcome::KIND_NODE_LOST);
  EXPECT_EQ(OutcomeFromRecord("not an object").kind(), v1::JobOutcome::KIND_NODE_LOST);
}

}  // namespace
}  // namespace gangrun::scheduler
