// A node's supervisor (node/supervisor.h) alone, on the fake clock and a fake owner: what a
// worker gets, progress and a hang (reported once), a report from another rank's process, and a
// torch timer's expiry. No Node.

#include "node/supervisor.h"

#include <gtest/gtest.h>

#include <csignal>

#include "tests/testing/fake_clock.h"

namespace gangrun::node {
namespace {

using std::chrono::seconds;

class FakeOwner : public Supervisor::Owner {
 public:
  void Send(v1::NodeEvent event) override { sent.push_back(std::move(event)); }
  const std::map<pid_t, ProcessSpec>* Running() const override { return &running; }
  uint64_t generation() const override { return 1; }
  std::vector<v1::NodeEvent> sent;
  std::map<pid_t, ProcessSpec> running;
};

class SupervisorTest : public ::testing::Test {
 protected:
  SupervisorTest() {
    Supervision parts;
    parts.progress_path = [](int local) -> absl::StatusOr<std::string> {
      return "/run/p" + std::to_string(local);
    };
    parts.timer_file = "/run/timer";
    parts.wall_now = [this] { return wall; };
    parts.signal_process = [this](pid_t pid, int sig) { signalled.emplace_back(pid, sig); };
    parts.process_start_time = [](pid_t) -> std::optional<uint64_t> { return 1; };
    supervisor = std::make_unique<Supervisor>(clock, owner, parts);
  }
  // Ranks 4 and 5 (local 0 and 1) start as pids 10 and 11 under `rules`.
  void Start(const v1::ProgressRules& rules) {
    v1::StartGeneration start;
    *start.mutable_progress_rules() = rules;
    supervisor->StartGeneration(start);
    for (int local = 0; local < 2; ++local) {
      ProcessSpec spec;
      spec.rank = 4 + local;
      spec.local_rank = local;
      ASSERT_TRUE(supervisor->AddWorker(start, spec).ok());
      EXPECT_NE(std::find(spec.env.begin(), spec.env.end(),
                          "GANGRUN_PROGRESS=/run/p" + std::to_string(local)),
                spec.env.end());
      owner.running[10 + local] = spec;
    }
  }
  std::vector<v1::NodeEvent> Sent(bool (v1::NodeEvent::*has)() const) const {
    std::vector<v1::NodeEvent> out;
    for (const auto& event : owner.sent) {
      if ((event.*has)()) out.push_back(event);
    }
    return out;
  }

  testing::FakeClock clock;
  FakeOwner owner;
  double wall = 1000;
  std::vector<std::pair<pid_t, int>> signalled;
  std::unique_ptr<Supervisor> supervisor;
};

TEST_F(SupervisorTest, ProgressIsTakenAndAHangIsReportedOncePerGeneration) {
  v1::ProgressRules rules;
  rules.set_hang_timeout_seconds(5);
  Start(rules);
  supervisor->OnProgressDatagram(0, 10, "step 1");
  supervisor->OnProgressDatagram(1, 11, "step 1");
  supervisor->SendProgress();
  ASSERT_EQ(Sent(&v1::NodeEvent::has_progress).size(), 1u);
  EXPECT_EQ(Sent(&v1::NodeEvent::has_progress)[0].progress().ranks_size(), 2);
  for (int t = 0; t < 8; ++t) {  // rank 4 goes on, rank 5 stops reporting
    clock.Advance(seconds(1));
    supervisor->OnProgressDatagram(0, 10, "step " + std::to_string(2 + t));
  }
  auto hung = Sent(&v1::NodeEvent::has_rank_hung);
  ASSERT_EQ(hung.size(), 1u);
  EXPECT_EQ(hung[0].rank_hung().rank(), 5);
  clock.Advance(seconds(30));
  EXPECT_EQ(Sent(&v1::NodeEvent::has_rank_hung).size(), 1u) << "once per generation";
}

TEST_F(SupervisorTest, AReportFromAnotherRanksProcessIsIgnored) {
  Start(v1::ProgressRules());
  supervisor->OnProgressDatagram(0, 11, "step 777");  // pid 11 is rank 5's worker
  supervisor->SendProgress();
  EXPECT_TRUE(Sent(&v1::NodeEvent::has_progress).empty());
  supervisor->OnProgressDatagram(0, 10, "step 3");
  supervisor->SendProgress();
  ASSERT_EQ(Sent(&v1::NodeEvent::has_progress).size(), 1u);
  EXPECT_EQ(Sent(&v1::NodeEvent::has_progress)[0].progress().ranks(0).step(), 3);
}

TEST_F(SupervisorTest, AnExpiredTorchTimerIsReportedThenSignalledAndStopEndsTheChecks) {
  Start(v1::ProgressRules());
  supervisor->OnTimerLine(
      R"({"version":1,"pid":11,"scope_id":"step","expiration_time":1002,"signal":9})");
  wall = 1003;
  clock.Advance(seconds(3));
  auto expired = Sent(&v1::NodeEvent::has_timer_expired);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].timer_expired().rank(), 5);
  EXPECT_EQ(signalled, (std::vector<std::pair<pid_t, int>>{{11, SIGKILL}}));
  supervisor->OnTimerLine(
      R"({"version":1,"pid":10,"scope_id":"x","expiration_time":1004,"signal":9})");
  supervisor->Stop();
  wall = 1100;
  clock.Advance(seconds(100));
  EXPECT_EQ(signalled.size(), 1u) << "stopped: no more checks";
}

}  // namespace
}  // namespace gangrun::node
