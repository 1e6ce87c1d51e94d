// What the scheduler accepts from peers: absurd numbers, names and mismatched launchers are
// refused alone, and the job forms with the right nodes.

#include "scheduler/peer_checks.h"

#include <gtest/gtest.h>

#include <climits>

#include "scheduler/scheduler.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/scheduler_fakes.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::seconds;

using Link = testing::FakeNodeLink;

v1::JoinRequest GoodJoin(const std::string& name, int node_rank, int workers) {
  v1::JoinRequest join;
  join.set_node_name(name);
  join.set_host_address("10.0.0.1");
  join.set_node_rank(node_rank);
  join.set_local_worker_num(workers);
  join.set_free_port(30000);
  join.set_pid(42);
  join.set_world_size(4);
  join.set_min_world_size(4);
  join.set_personality("gangrun");
  return join;
}

class PeerChecksTest : public ::testing::Test {
 protected:
  PeerChecksTest() {
    Scheduler::Options options;
    options.world_size = 4;
    options.cluster_timeout = seconds(60);
    options.run_id = "job-1";
    options.personality = "gangrun";
    scheduler = std::make_unique<Scheduler>(clock, options);
    scheduler->SetOnFinished([this](const v1::JobOutcome& o) { outcome = o; });
    scheduler->Start();
  }
  void Join(Link& link, const v1::JoinRequest& join) {
    int id = scheduler->AddNode(&link);
    v1::NodeEvent event;
    *event.mutable_join() = join;
    scheduler->OnNodeEvent(id, event);
  }

  testing::FakeClock clock;
  std::unique_ptr<Scheduler> scheduler;
  std::optional<v1::JobOutcome> outcome;
};

TEST_F(PeerChecksTest, AbsurdNumbersAreRefusedAloneWithoutOverflowOrAllocation) {
  Link first;
  Join(first, GoodJoin("a", -1, 2));
  struct Case {
    std::string what;
    std::function<void(v1::JoinRequest&)> mutate;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"workers", [](auto& j) { j.set_local_worker_num(INT_MAX); }, "brings 2147483647 worker(s)"},
      {"negative", [](auto& j) { j.set_local_worker_num(-5); }, "brings -5 worker(s)"},
      {"rank", [](auto& j) { j.set_node_rank(INT_MAX); }, "node rank 2147483647, out of range"},
      {"port", [](auto& j) { j.set_free_port(70000); }, "offers port 70000"},
      {"address", [](auto& j) { j.set_host_address("evil; rm -rf /"); }, "numeric host address"},
      {"addresses",
       [](auto& j) {
         for (int i = 0; i < 17; ++i) j.add_addresses("10.0.0." + std::to_string(i));
       },
       "gives 17 addresses (at most 16)"},
      {"other address", [](auto& j) { j.add_addresses("h1"); }, "an address that is not numeric"},
      {"name", [](auto& j) { j.set_node_name(std::string(10000, 'n')); }, "node name"},
      {"control", [](auto& j) { j.set_node_name("a\nb"); }, "unprintable node name"},
      {"pid", [](auto& j) { j.set_pid(-1); }, "negative launcher pid"},
  };
  for (const auto& c : cases) {
    Link link;
    v1::JoinRequest join = GoodJoin("b", -1, 2);
    c.mutate(join);
    Join(link, join);
    EXPECT_TRUE(link.rejected()) << c.what;
    EXPECT_TRUE(link.closed) << c.what;
    EXPECT_NE(link.reason().find(c.expected), std::string::npos) << c.what << ": " << link.reason();
  }
  // Nobody else was hurt: the job forms when the right node comes.
  EXPECT_FALSE(outcome.has_value());
  Link second;
  Join(second, GoodJoin("b", -1, 2));
  EXPECT_TRUE(first.started());
  EXPECT_TRUE(second.started());
  EXPECT_EQ(second.commands.back().start().assignment().run_id(), "job-1");
}

TEST_F(PeerChecksTest, LaunchersStartedForAnotherJobAreRefusedNamingTheDifference) {
  Link first;
  Join(first, GoodJoin("a", 0, 2));
  Link other_size, other_run, other_kind;
  v1::JoinRequest join = GoodJoin("b", 1, 2);
  join.set_world_size(8);
  join.set_min_world_size(8);
  Join(other_size, join);
  EXPECT_NE(other_size.reason().find("was started with --worker_num 8, but the job has "
                                     "--worker_num 4"),
            std::string::npos)
      << other_size.reason();
  join = GoodJoin("b", 1, 2);
  join.set_run_id("job-2");
  Join(other_run, join);
  EXPECT_NE(other_run.reason().find("--run_id 'job-2', but the job's run id is 'job-1'"),
            std::string::npos)
      << other_run.reason();
  join = GoodJoin("b", 1, 2);
  join.set_personality("msrun");
  Join(other_kind, join);
  EXPECT_NE(other_kind.reason().find("runs as msrun, but the job's scheduler runs as gangrun"),
            std::string::npos)
      << other_kind.reason();
  Link right;
  Join(right, GoodJoin("b", 1, 2));
  EXPECT_TRUE(right.started());
  EXPECT_FALSE(outcome.has_value());
}

TEST_F(PeerChecksTest, NodeRankBeyondTheJobIsRefusedAloneAtOnce) {
  Link a, bad, b;
  Join(a, GoodJoin("a", 0, 2));
  Join(bad, GoodJoin("bad", 2, 2));  // 2 nodes of 2: rank 2 can never exist
  EXPECT_NE(bad.reason().find("node rank 2 of node 'bad' (10.0.0.1, launcher pid 42) is out of "
                              "range: with the nodes already joined, the job has at most 2"),
            std::string::npos)
      << bad.reason();
  Join(b, GoodJoin("b", 1, 2));
  EXPECT_TRUE(a.started());
  EXPECT_TRUE(b.started());
}

TEST_F(PeerChecksTest, NodeRankThatTurnsOutOutOfRangeIsRefusedAloneAtFormation) {
  // Sizes differ, so the node count is only known once every worker is there.
  Link small, big, right;
  Join(small, GoodJoin("small", 2, 1));  // could be one of up to 4 nodes
  Join(big, GoodJoin("big", 0, 3));      // 4 workers in 2 nodes: rank 2 does not exist
  EXPECT_TRUE(small.rejected());
  EXPECT_NE(small.reason().find("node rank 2 of node 'small'"), std::string::npos)
      << small.reason();
  EXPECT_NE(small.reason().find("the job has 2 node(s)"), std::string::npos) << small.reason();
  EXPECT_FALSE(big.started());
  EXPECT_FALSE(outcome.has_value());
  Join(right, GoodJoin("right", 1, 1));
  EXPECT_TRUE(big.started());
  EXPECT_TRUE(right.started());
}

TEST_F(PeerChecksTest, EventsAboutRanksANodeDoesNotRunAreIgnored) {
  Link a, b;
  Join(a, GoodJoin("a", 0, 2));
  Join(b, GoodJoin("b", 1, 2));
  ASSERT_TRUE(a.started());
  v1::NodeEvent event;
  event.set_generation(scheduler->generation());
  event.mutable_worker_exited()->set_rank(3);  // b's rank, sent by a
  event.mutable_worker_exited()->mutable_exit()->set_exit_code(1);
  scheduler->OnNodeEvent(1, event);
  event.mutable_worker_exited()->set_rank(INT_MAX);
  scheduler->OnNodeEvent(1, event);
  v1::NodeEvent started;
  started.set_generation(scheduler->generation());
  started.mutable_worker_started()->set_rank(-7);
  started.mutable_worker_started()->set_pid(5);
  scheduler->OnNodeEvent(1, started);
  EXPECT_EQ(a.commands.size(), 1u);  // no abort: nothing failed
  auto status = scheduler->Status();
  for (const auto& node : status.nodes()) EXPECT_EQ(node.workers_size(), 2);
}

TEST_F(PeerChecksTest, ASessionThatNeverJoinsIsClosed) {
  Link silent;
  scheduler->AddNode(&silent);
  clock.Advance(seconds(29));
  EXPECT_FALSE(silent.closed);
  clock.Advance(seconds(2));
  EXPECT_TRUE(silent.closed);
  EXPECT_TRUE(silent.rejected());
  Link a, b;  // the job still forms
  Join(a, GoodJoin("a", -1, 2));
  Join(b, GoodJoin("b", -1, 2));
  EXPECT_TRUE(a.started());
}

TEST(SanitizeTest, BoundsAndCleansFreeText) {
  EXPECT_EQ(Sanitize("ok", 10), "ok");
  EXPECT_EQ(Sanitize("a\x1b[2Jb", 10), "a?[2Jb");
  EXPECT_EQ(Sanitize(std::string(20, 'x'), 5), "xxxxx...");
  EXPECT_EQ(StopSignal(0), SIGTERM);
  EXPECT_EQ(StopSignal(1000), SIGTERM);
  EXPECT_EQ(StopSignal(SIGINT), SIGINT);
}

}  // namespace
}  // namespace gangrun::scheduler
