#include "node/node.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <csignal>
#include <sstream>

#include "common/logging.h"
#include "tests/testing/fake_backend.h"
#include "tests/testing/fake_clock.h"

namespace gangrun::node {
namespace {

using std::chrono::seconds;

class RecordingSchedulerLink : public SchedulerLink {
 public:
  void Send(const v1::NodeEvent& event) override { events.push_back(event); }
  std::vector<v1::NodeEvent> events;
};

class NodeTest : public ::testing::Test {
 protected:
  NodeTest() {
    Node::Options options;
    options.node_name = "h";
    options.local_worker_num = 2;
    options.grace = seconds(10);
    Node::Callbacks callbacks;
    callbacks.on_finished = [this](const v1::JobOutcome& o) { outcome = o; };
    node = std::make_unique<Node>(
        backend, clock, link, options,
        [](const v1::RankAssignment& a, uint64_t, int) -> absl::StatusOr<std::vector<ProcessSpec>> {
          std::vector<ProcessSpec> specs;
          for (int i = 0; i < a.local_worker_num(); ++i) {
            ProcessSpec spec;
            spec.rank = a.first_rank() + i;
            spec.local_rank = i;
            specs.push_back(spec);
          }
          return specs;
        },
        std::move(callbacks));
  }
  v1::NodeCommand Start(uint64_t generation) {
    v1::NodeCommand command;
    command.set_generation(generation);
    command.mutable_start()->mutable_assignment()->set_local_worker_num(2);
    command.mutable_start()->mutable_assignment()->set_first_rank(4);
    return command;
  }
  int Heartbeats() const {
    int n = 0;
    for (const auto& e : link.events) n += e.has_heartbeat();
    return n;
  }

  FakeBackend backend;
  testing::FakeClock clock;
  RecordingSchedulerLink link;
  std::unique_ptr<Node> node;
  std::optional<v1::JobOutcome> outcome;
};

TEST_F(NodeTest, JoinsWithItsSize) {
  node->Start();
  ASSERT_GE(link.events.size(), 1u);
  EXPECT_EQ(link.events[0].join().local_worker_num(), 2);
}

// A launcher that joined and waits says the scheduler's reminder (what is missing, the time
// left) as its own line.
TEST_F(NodeTest, AJoinerSaysTheSchedulersReminderWhileTheJobForms) {
  std::ostringstream text;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text);
  auto logger = common::Logger("node");
  logger->sinks().push_back(sink);
  node->Start();
  v1::NodeCommand waiting;
  waiting.mutable_waiting()->set_line("waiting for 2 of 4 workers (1 node(s) joined: a); 9 m left");
  node->OnCommand(waiting);
  logger->sinks().pop_back();
  EXPECT_NE(text.str().find("the scheduler is still waiting for 2 of 4 workers (1 node(s) "
                            "joined: a); 9 m left"),
            std::string::npos)
      << text.str();
  EXPECT_FALSE(outcome.has_value());
}

TEST_F(NodeTest, StartSpawnsTheAssignedRanksAndReportsThem) {
  node->OnCommand(Start(1));
  ASSERT_EQ(backend.spawned.size(), 2u);
  EXPECT_EQ(backend.spawned[1].rank, 5);
  backend.Start(10);
  backend.Start(11);
  ASSERT_EQ(link.events.size(), 2u);
  EXPECT_EQ(link.events[1].worker_started().rank(), 5);
  EXPECT_EQ(link.events[1].generation(), 1u);
}

TEST_F(NodeTest, RefusesAStaleStart) {
  node->OnCommand(Start(2));
  node->OnCommand(Start(1));
  node->OnCommand(Start(2));
  EXPECT_EQ(backend.spawned.size(), 2u);
}

TEST_F(NodeTest, RefusesAnAbortForAnotherGeneration) {
  node->OnCommand(Start(2));
  backend.Start(10);
  backend.Start(11);
  v1::NodeCommand abort;
  abort.set_generation(1);
  abort.mutable_abort()->set_reason("old");
  node->OnCommand(abort);
  EXPECT_EQ(backend.CountSignals(SIGTERM), 0);
  abort.set_generation(2);
  node->OnCommand(abort);
  EXPECT_EQ(backend.CountSignals(SIGTERM), 2);
}

TEST_F(NodeTest, ReportsGenerationEndedAfterTheLastExit) {
  node->OnCommand(Start(1));
  backend.Start(10);
  backend.Start(11);
  backend.Exit(10, common::ExitStatus::Exited(0));
  EXPECT_FALSE(link.events.back().has_generation_ended());
  backend.Exit(11, common::ExitStatus::Exited(0));
  EXPECT_TRUE(link.events.back().has_generation_ended());
}

TEST_F(NodeTest, SecondStopRequestKillsLocallyAtOnce) {
  node->OnCommand(Start(1));
  backend.Start(10);
  backend.Start(11);
  node->RequestStop(SIGINT);
  EXPECT_TRUE(link.events.back().has_stop_request());
  EXPECT_EQ(backend.CountSignals(SIGTERM), 2);  // local workers stop at once
  EXPECT_EQ(backend.CountSignals(SIGKILL), 0);
  node->RequestStop(SIGINT);
  EXPECT_EQ(backend.CountSignals(SIGKILL), 2);
}

TEST_F(NodeTest, StopBeforeTheJobFormedEndsAtOnce) {
  node->Start();
  node->RequestStop(SIGTERM);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_STOPPED_BY_SIGNAL);
}

TEST_F(NodeTest, LosingTheSchedulerMidJobStopsLocalProcessesThenEnds) {
  node->OnCommand(Start(1));
  backend.Start(10);
  backend.Start(11);
  node->OnLinkLost("connection reset", false);
  EXPECT_EQ(backend.CountSignals(SIGTERM), 2);
  EXPECT_FALSE(outcome.has_value());
  backend.Exit(10, common::ExitStatus::Signaled(SIGTERM));
  backend.Exit(11, common::ExitStatus::Signaled(SIGTERM));
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_NODE_LOST);
}

// A daemon's job on a store: the scheduler moves, the workers stay.
TEST_F(NodeTest, ADetachedNodeKeepsItsWorkersAndRejoinsWithTheGenerationItRuns) {
  node->OnCommand(Start(3));
  backend.Start(10);
  backend.Start(11);
  node->Detach("connection reset");
  backend.Exit(11, common::ExitStatus::Exited(0));  // while no scheduler hears
  node->RequestStop(SIGTERM);                       // held for the next scheduler
  EXPECT_GE(backend.CountSignals(SIGTERM), 1) << "the stop is local at once";
  const size_t sent = link.events.size();
  clock.Advance(seconds(3));
  EXPECT_EQ(Heartbeats(), 0) << "a detached node sends nothing";
  EXPECT_FALSE(outcome.has_value());
  RecordingSchedulerLink next;
  node->Reattach(next);
  EXPECT_EQ(link.events.size(), sent);
  ASSERT_GE(next.events.size(), 2u);
  ASSERT_TRUE(next.events[0].has_join());
  const v1::ResumeGeneration& resume = next.events[0].join().resume();
  EXPECT_EQ(resume.generation(), 3u);
  EXPECT_EQ(resume.start().assignment().first_rank(), 4);
  ASSERT_EQ(resume.started_size(), 2);
  EXPECT_EQ(resume.started(1).pid(), 11);
  ASSERT_EQ(resume.exited_size(), 1);
  EXPECT_EQ(resume.exited(0).rank(), 5);
  EXPECT_FALSE(resume.ended());
  bool stop = false;
  for (const auto& event : next.events) stop = stop || event.has_stop_request();
  EXPECT_TRUE(stop) << "the held stop request goes to the next scheduler";
}

TEST_F(NodeTest, RejectedTokenBeforeFormationIsAFormationFailure) {
  node->Start();
  node->OnLinkLost("wrong or missing token", true);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_FORMATION_FAILED);
  EXPECT_NE(outcome->message().find("token mismatch"), std::string::npos);
}

TEST_F(NodeTest, SendsHeartbeatsOnTheClock) {
  node->Start();
  int before = Heartbeats();
  clock.Advance(seconds(3));
  EXPECT_EQ(Heartbeats(), before + 3);
}

TEST_F(NodeTest, AHeartbeatPolicyMakesHeartbeatMessagesRare) {
  node->Start();
  v1::NodeCommand policy;
  policy.mutable_heartbeat_policy()->set_message_interval_ms(5000);
  node->OnCommand(policy);  // the scheduler watches our connection: its pings are heartbeats
  int before = Heartbeats();
  clock.Advance(seconds(10));
  EXPECT_EQ(Heartbeats(), before + 2);
  policy.mutable_heartbeat_policy()->set_message_interval_ms(0);  // back to every interval
  node->OnCommand(policy);
  before = Heartbeats();
  clock.Advance(seconds(3));
  EXPECT_EQ(Heartbeats(), before + 3);
}

TEST_F(NodeTest, FinishedCommandEndsTheNode) {
  v1::NodeCommand finished;
  finished.mutable_finished()->mutable_outcome()->set_kind(v1::JobOutcome::KIND_SUCCEEDED);
  node->OnCommand(finished);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_SUCCEEDED);
}

}  // namespace
}  // namespace gangrun::node
