#include "scheduler/telemetry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>

#include "scheduler/metrics.h"
#include "scheduler/scheduler.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/scheduler_fakes.h"
#include "tests/testing/test_util.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using NullLink = testing::FakeNodeLink;

class TelemetryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Scheduler::Options options;
    options.world_size = 2;
    options.max_restarts = 1;
    options.restart_backoff_initial = seconds(1);
    options.node_timeout = seconds(0);
    scheduler = std::make_unique<Scheduler>(clock, options);
    auto opened = EventLog::Open(log);
    ASSERT_TRUE(opened.ok());
    event_log = std::move(*opened);
    telemetry = std::make_unique<Telemetry>("job-1", event_log.get());
    scheduler->SetTelemetry(telemetry.get());
    scheduler->SetOnFinished([this](const v1::JobOutcome& o) { outcome = o; });
    scheduler->Start();
  }
  void Send(v1::NodeEvent event) {
    event.set_generation(scheduler->generation());
    scheduler->OnNodeEvent(node, event);
  }
  void Join() {
    node = scheduler->AddNode(&link);
    v1::NodeEvent event;
    event.mutable_join()->set_node_name("host-a");
    event.mutable_join()->set_host_address("10.0.0.1");
    event.mutable_join()->set_free_port(40000);
    event.mutable_join()->set_node_rank(-1);
    event.mutable_join()->set_local_worker_num(2);
    Send(event);
  }
  void Started(int rank) {
    v1::NodeEvent event;
    event.mutable_worker_started()->set_rank(rank);
    event.mutable_worker_started()->set_pid(100 + rank);
    Send(event);
  }
  void Exited(int rank, int code, bool stopped) {
    v1::NodeEvent event;
    event.mutable_worker_exited()->set_rank(rank);
    event.mutable_worker_exited()->set_pid(100 + rank);
    event.mutable_worker_exited()->mutable_exit()->set_exit_code(code);
    event.mutable_worker_exited()->set_stopped_by_us(stopped);
    Send(event);
  }
  void Ended() {
    v1::NodeEvent event;
    event.mutable_generation_ended();
    Send(event);
  }
  // The event log's lines; the ledger's (`phase`, `phase_moved`) only when asked for.
  std::vector<nlohmann::json> Events(bool ledger = false) {
    std::vector<nlohmann::json> events;
    std::ifstream in(log);
    std::string line;
    while (std::getline(in, line)) {
      nlohmann::json event = nlohmann::json::parse(line);
      const bool of_ledger = event["event"] == "phase" || event["event"] == "phase_moved";
      if (ledger == of_ledger) events.push_back(std::move(event));
    }
    return events;
  }

  testing::TempDir dir;
  std::string log = dir.File("events.jsonl");
  testing::FakeClock clock;
  std::unique_ptr<EventLog> event_log;
  std::unique_ptr<Telemetry> telemetry;
  NullLink link;
  int node = 0;
  std::unique_ptr<Scheduler> scheduler;
  std::optional<v1::JobOutcome> outcome;
};

TEST_F(TelemetryTest, CountsAndLogsAFailureARestartAndTheEnd) {
  Join();
  clock.Advance(milliseconds(30));
  Started(0);
  Started(1);
  Exited(1, 3, false);
  clock.Advance(milliseconds(20));
  Exited(0, 143, true);
  Ended();  // generation 1 over: restart after the 1 s backoff
  clock.Advance(seconds(1));
  clock.Advance(milliseconds(10));
  Started(0);
  Started(1);
  Exited(0, 0, false);
  Exited(1, 0, false);
  Ended();
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_SUCCEEDED);

  EXPECT_EQ(telemetry->generations(), 2u);
  EXPECT_EQ(telemetry->restarts(), 1u);
  EXPECT_EQ(telemetry->failures(FailureCause::kWorkerExit), 1u);
  EXPECT_EQ(telemetry->rendezvous().count, 2u);
  // Generation 1: start to running 30 ms; generation 2: end of backoff to running 10 ms.
  EXPECT_NEAR(telemetry->rendezvous().sum_seconds, 0.040, 1e-9);
  EXPECT_EQ(telemetry->stop().count, 1u);
  EXPECT_NEAR(telemetry->stop().last_seconds, 0.020, 1e-9);

  std::vector<std::string> names;
  for (const auto& event : Events()) {
    EXPECT_EQ(event["job"], "job-1");
    names.push_back(event["event"]);
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"node_joined", "generation_started", "generation_running",
                                      "worker_failed", "generation_aborted", "generation_ended",
                                      "verdict", "restart_scheduled", "generation_started",
                                      "generation_running", "generation_ended", "job_finished"}));
  EXPECT_EQ(Events()[3]["rank"], 1);
  EXPECT_EQ(Events()[5]["stop_latency_ms"], 20);
  EXPECT_EQ(Events()[6]["verdict"], "restart");
  EXPECT_EQ(Events()[6]["fingerprint"], "exit code 3");
  EXPECT_EQ(Events()[7]["delay_ms"], 1000);
  // The ledger's phases as the job went (its ranks report no progress: running is training).
  std::vector<std::string> phases;
  for (const auto& event : Events(/*ledger=*/true)) {
    phases.push_back(event["generation"].dump() + " " + event["phase"].get<std::string>());
  }
  EXPECT_EQ(phases, (std::vector<std::string>{"0 forming", "1 training", "1 stopping", "1 backoff",
                                              "1 reforming", "2 training"}));
  EXPECT_EQ(Events(true)[2]["previous"], "training");
  EXPECT_NEAR(Events(true)[2]["previous_seconds"].get<double>(), 0.030, 1e-9);

  const std::string text = "\n" + RenderMetrics({{scheduler.get(), telemetry.get()}});
  EXPECT_NE(text.find("\ngangrun_generations_total{job=\"job-1\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ngangrun_restarts_total{job=\"job-1\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("\ngangrun_failures_total{job=\"job-1\",cause=\"worker_exit\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("\ngangrun_job_phase{job=\"job-1\",phase=\"finished\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("\ngangrun_workers{job=\"job-1\",state=\"succeeded\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("\ngangrun_rendezvous_seconds_count{job=\"job-1\"} 2\n"), std::string::npos);
  // Every sample follows the TYPE line of its family.
  std::string family;
  for (size_t at = 0; (at = text.find('\n', at)) != std::string::npos; ++at) {
    std::string line = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
    if (line.rfind("# TYPE ", 0) == 0) family = line.substr(7, line.find(' ', 7) - 7);
    if (line.empty() || line[0] == '#') continue;
    EXPECT_EQ(line.rfind(family, 0), 0u) << line << " outside family " << family;
  }
}

TEST(MetricsFormatTest, SampleValuesAreExactAndSpellTheSpecialValuesAsPrometheusDoes) {
  EXPECT_EQ(FormatSampleValue(268435456), "268435456");
  EXPECT_EQ(FormatSampleValue(0), "0");
  EXPECT_EQ(FormatSampleValue(0.1), "0.1");
  EXPECT_EQ(FormatSampleValue(1e-7), "1e-07");
  EXPECT_EQ(FormatSampleValue(12345678901234567.0), "12345678901234568");
  EXPECT_EQ(FormatSampleValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatSampleValue(-std::nan("")), "NaN");
  EXPECT_EQ(FormatSampleValue(HUGE_VAL), "+Inf");
  EXPECT_EQ(FormatSampleValue(-HUGE_VAL), "-Inf");
}

TEST_F(TelemetryTest, StatusListsWorkersWithPidsAndStates) {
  Join();
  Started(0);
  Started(1);
  auto status = scheduler->Status();
  ASSERT_EQ(status.nodes_size(), 1);
  EXPECT_EQ(status.phase(), v1::JOB_PHASE_RUNNING);
  EXPECT_EQ(status.job_id(), "job-1");
  ASSERT_EQ(status.nodes(0).workers_size(), 2);
  EXPECT_EQ(status.nodes(0).workers(1).pid(), 101);
  EXPECT_EQ(status.nodes(0).workers(1).state(), v1::WORKER_STATE_RUNNING);
  scheduler->Stop(SIGTERM, "stopped by gangrun stop");
  Exited(0, 0, true);
  Exited(1, 0, true);
  Ended();
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), v1::JobOutcome::KIND_STOPPED_BY_SIGNAL);
  EXPECT_EQ(outcome->message(), "stopped by gangrun stop");
  EXPECT_EQ(scheduler->Status().phase(), v1::JOB_PHASE_FINISHED);
}

TEST_F(TelemetryTest, ProgressHangsAndStragglersReachTheEventLogAndMetrics) {
  Join();
  Started(0);
  Started(1);
  v1::NodeEvent progress;
  for (int rank = 0; rank < 2; ++rank) {
    auto* p = progress.mutable_progress()->add_ranks();
    p->set_rank(rank);
    p->set_reports(6);
    p->set_step(5);
    p->set_step_seconds(rank == 0 ? 0.2 : 0.9);  // median 0.55: 0.9 > 1.5 x 0.55
  }
  Send(progress);
  std::string text = "\n" + RenderMetrics({{scheduler.get(), telemetry.get()}});
  EXPECT_NE(text.find("\ngangrun_rank_step{job=\"job-1\",rank=\"1\"} 5\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("\ngangrun_rank_step_seconds{job=\"job-1\",rank=\"0\"} 0.2\n"),
            std::string::npos);
  EXPECT_NE(text.find("\ngangrun_stragglers{job=\"job-1\"} 1\n"), std::string::npos);
  v1::NodeEvent hung;
  hung.mutable_rank_hung()->set_rank(1);
  hung.mutable_rank_hung()->set_rule("steady");
  Send(hung);
  text = "\n" + RenderMetrics({{scheduler.get(), telemetry.get()}});
  EXPECT_NE(text.find("\ngangrun_job_phase{job=\"job-1\",phase=\"hung\"} 1\n"), std::string::npos)
      << text;
  v1::NodeEvent stacks;
  auto* stack = stacks.mutable_stacks_captured()->add_stacks();
  stack->set_rank(1);
  stack->set_where("f (a.py:1)");
  stacks.mutable_stacks_captured()->add_stacks()->set_rank(0);
  stacks.mutable_stacks_captured()->mutable_stacks(1)->set_where("f (a.py:1)");
  Send(stacks);
  text = "\n" + RenderMetrics({{scheduler.get(), telemetry.get()}});
  EXPECT_NE(text.find("\ngangrun_failures_total{job=\"job-1\",cause=\"hang\"} 1\n"),
            std::string::npos);
  std::vector<std::string> names;
  for (const auto& e : Events()) names.push_back(e["event"]);
  ASSERT_GE(names.size(), 6u);
  EXPECT_EQ(names[3], "rank_hung");
  EXPECT_EQ(names[4], "hang");
  EXPECT_EQ(Events()[4]["groups"][0]["ranks"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(names[5], "generation_aborted");
}

}  // namespace
}  // namespace gangrun::scheduler
