// The progress hook's side of supervision, each rule on its own: the hook's datagram, how its
// counts become a rank's step and liveness, the hint for ranks that never report, native
// stacks with file:line, the hang report by collective count, and the flight recorder's
// arming and collection (with a stand-in for torch's reader of the dump pipe).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <fstream>
#include <thread>

#include "common/env_names.h"
#include "node/flight_recorder.h"
#include "node/progress.h"
#include "node/stacks.h"
#include "scheduler/hang_report.h"
#include "tests/testing/test_util.h"

namespace gangrun::node {
namespace {

using std::chrono::seconds;

const common::TimePoint kT0 = common::TimePoint() + seconds(1000);

v1::ProgressRules Steady(double seconds_) {
  v1::ProgressRules rules;
  rules.set_hang_timeout_seconds(seconds_);
  return rules;
}

TEST(HookDatagramTest, CarriesCountsTheLastCollectiveAndWhetherInsideIt) {
  auto hook = ParseProgress("hook 42 7 all_reduce 1");
  ASSERT_TRUE(hook.ok());
  EXPECT_EQ(hook->kind, ProgressDatagram::Kind::kHook);
  EXPECT_EQ(hook->collectives, 42);
  EXPECT_EQ(hook->step, 7);
  EXPECT_EQ(hook->name, "all_reduce");
  EXPECT_TRUE(hook->inside);
  EXPECT_TRUE(ParseProgress("hook 0 0 ddp:all_reduce 0").ok());
  EXPECT_EQ(ParseProgress("hook")->kind, ProgressDatagram::Kind::kHello);
  for (const char* bad : {"hook 1 2 op", "hook -1 0 op 0", "hook 1 x op 0", "hook 1 2 bad!op 0",
                          "hook 1 2 op 2", "hook 1 2 op 0 extra"}) {
    EXPECT_FALSE(ParseProgress(bad).ok()) << bad;
  }
}

TEST(HookProgressTest, OptimizerStepsAreTheStepElseCollectivesAndExplicitStepsWin) {
  ProgressTracker tracker(Steady(10));
  tracker.AddRank(0, kT0);
  tracker.AddRank(1, kT0);
  ASSERT_TRUE(tracker.OnDatagram(0, "hook 3 0 barrier 0", kT0 + seconds(1)));
  EXPECT_EQ(tracker.TakeChanges(kT0 + seconds(1))[0].step(), 3);  // no optimizer step yet
  ASSERT_TRUE(tracker.OnDatagram(0, "hook 9 2 ddp:all_reduce 0", kT0 + seconds(2)));
  auto changes = tracker.TakeChanges(kT0 + seconds(2));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].step(), 2);
  EXPECT_EQ(changes[0].collectives(), 9);
  EXPECT_EQ(changes[0].last_op(), "ddp:all_reduce");
  EXPECT_EQ(changes[0].optimizer_steps(), 2);
  EXPECT_EQ(tracker.HookOf(0).collectives, 9);
  EXPECT_EQ(tracker.HookOf(1).collectives, -1);  // nothing from the hook
  // A script's own `step` reports win over the hook's counts, which still prove it alive.
  tracker.OnDatagram(1, "step 100", kT0 + seconds(3));
  tracker.OnDatagram(1, "hook 50 40 all_reduce 1", kT0 + seconds(4));
  changes = tracker.TakeChanges(kT0 + seconds(4));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].step(), 100);
  EXPECT_EQ(changes[0].collectives(), 50);
  EXPECT_EQ(changes[0].reports(), 2u);
  // The steady bound counts from the hook's last datagram.
  EXPECT_EQ(*tracker.NextDeadline(), kT0 + seconds(12));
}

TEST(HookProgressTest, TheInitialBoundNeverFiresOnceTheHookReported) {
  v1::ProgressRules rules;
  rules.set_initial_timeout_seconds(5);
  rules.set_learn(true);
  ProgressTracker tracker(rules);
  tracker.AddRank(0, kT0);
  tracker.AddRank(1, kT0);
  tracker.OnDatagram(0, "hook 1 0 all_reduce 1", kT0 + seconds(1));
  tracker.OnDatagram(1, "step 1", kT0 + seconds(1));
  // Rank 1 (a script's own reports, not learned yet) keeps the initial bound; rank 0 not.
  auto hung = tracker.CheckHangs(kT0 + seconds(100));
  ASSERT_EQ(hung.size(), 1u);
  EXPECT_EQ(hung[0].rank(), 1);
  EXPECT_EQ(hung[0].rule(), "initial");
}

TEST(HookProgressTest, TheHooksCountsBeforeTheFirstCollectiveAreNotAReport) {
  // torch.distributed imported, init_process_group waiting for a slow host: not hung by the
  // steady bound, which starts at the first counted collective.
  ProgressTracker tracker(Steady(3));
  tracker.AddRank(0, kT0);
  ASSERT_TRUE(tracker.OnDatagram(0, "hook 0 0 - 0", kT0 + seconds(1)));
  EXPECT_TRUE(tracker.TakeChanges(kT0 + seconds(1)).empty());
  EXPECT_FALSE(tracker.NextDeadline().has_value());
  EXPECT_TRUE(tracker.CheckHangs(kT0 + seconds(100)).empty());
  EXPECT_EQ(tracker.HookOf(0).collectives, 0);
  EXPECT_EQ(*tracker.NextSilentRank(), kT0 + kHookedSilence);  // the hook is there
  ASSERT_TRUE(tracker.OnDatagram(0, "hook 1 0 broadcast 1", kT0 + seconds(100)));
  EXPECT_EQ(*tracker.NextDeadline(), kT0 + seconds(103));
  auto hung = tracker.CheckHangs(kT0 + seconds(103));
  ASSERT_EQ(hung.size(), 1u);
  EXPECT_EQ(hung[0].rule(), "steady");
}

TEST(HookProgressTest, RanksThatNeverReportAreNamedOnceWhenAStepRuleIsSet) {
  ProgressTracker tracker(Steady(5));
  tracker.AddRank(0, kT0);
  tracker.AddRank(1, kT0);
  tracker.OnDatagram(1, "hook 1 0 barrier 0", kT0 + seconds(1));
  EXPECT_EQ(*tracker.NextSilentRank(), kT0 + seconds(5));
  EXPECT_TRUE(tracker.TakeSilentRanks(kT0 + seconds(4)).empty());
  EXPECT_EQ(tracker.TakeSilentRanks(kT0 + seconds(5)), std::vector<int>{0});
  EXPECT_TRUE(tracker.TakeSilentRanks(kT0 + seconds(50)).empty());  // once
  EXPECT_FALSE(tracker.NextSilentRank().has_value());
  // A rank whose process has the hook gets longer: the script may still be importing torch.
  ProgressTracker hooked(Steady(5));
  hooked.AddRank(0, kT0);
  ASSERT_TRUE(hooked.OnDatagram(0, "hook", kT0));
  EXPECT_EQ(hooked.TakeChanges(kT0).size(), 0u);  // not a report
  EXPECT_EQ(*hooked.NextSilentRank(), kT0 + kHookedSilence);
  EXPECT_TRUE(hooked.TakeSilentRanks(kT0 + seconds(59)).empty());
  EXPECT_EQ(hooked.TakeSilentRanks(kT0 + seconds(60)), std::vector<int>{0});
  // No rule that needs reports: nothing to say.
  ProgressTracker quiet(v1::ProgressRules{});
  quiet.AddRank(0, kT0);
  EXPECT_TRUE(quiet.TakeSilentRanks(kT0 + seconds(1000)).empty());
  EXPECT_FALSE(quiet.NextSilentRank().has_value());
}

TEST(StackWhereTest, NativeFramesHaveFileAndLineWhereEuStackHasTheSource) {
  const std::string stack =
      "PID 7 - process\n"
      "TID 7:\n"
      "#0  0x00007f4b64cbcdd0 pause - /usr/lib/x86_64-linux-gnu/libc.so.6\n"
      "    ../sysdeps/unix/sysv/linux/pause.c:29:10\n"
      "#1  0x0000561f7117f149 load_batch - /opt/app/worker\n"
      "    /src/app/data.c:41:7\n"
      "#2  0x0000561f7117f159 main - /opt/app/worker\n";
  EXPECT_EQ(NativeWhere(stack), "load_batch (data.c:41)");
  // Without debug information: the module, as before.
  EXPECT_EQ(NativeWhere("TID 7:\n#0  0x1 load_batch - /opt/app/worker\n#1  0x2 main - "
                        "/opt/app/worker\n    not a source line\n"),
            "load_batch (worker)");
}

bool Has(const std::vector<std::string>& env, const std::string& entry) {
  return std::find(env.begin(), env.end(), entry) != env.end();
}

TEST(FlightRecorderTest, ArmsEveryWorkerUnlessTheUserDid) {
  testing::TempDir dir;
  boost::asio::io_context io;
  auto recorder = FlightRecorder::Create(io, dir.path());
  ASSERT_TRUE(recorder.ok()) << recorder.status();
  std::vector<std::string> env = {"PATH=/bin"};
  (*recorder)->AddWorkerEnv(env);
  EXPECT_TRUE(Has(env, "TORCH_NCCL_TRACE_BUFFER_SIZE=2000"));
  EXPECT_TRUE(Has(env, "TORCH_FR_BUFFER_SIZE=2000"));
  EXPECT_TRUE(Has(env, "TORCH_NCCL_DEBUG_INFO_PIPE_FILE=" + dir.path() + "/flight/trigger_"));
  auto target = FlightRecorder::TargetOf(env, 3, "/logs/worker_3.log");
  ASSERT_TRUE(target.has_value());
  EXPECT_EQ(target->pipe, dir.path() + "/flight/trigger_3.pipe");
  EXPECT_EQ(target->dump, dir.path() + "/flight/dump_3");
  EXPECT_EQ(target->destination, "/logs/worker_3.flight_recorder");
  // The user's own settings stay (either name), and are where the dump is looked for.
  std::vector<std::string> mine = {"TORCH_NCCL_TRACE_BUFFER_SIZE=0",
                                   "TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/mine/pipe_"};
  (*recorder)->AddWorkerEnv(mine);
  EXPECT_FALSE(Has(mine, "TORCH_FR_BUFFER_SIZE=2000"));
  EXPECT_FALSE(Has(mine, "TORCH_FR_DEBUG_INFO_PIPE_FILE=" + dir.path() + "/flight/trigger_"));
  EXPECT_EQ(FlightRecorder::TargetOf(mine, 1, "/l/w.log")->pipe, "/mine/pipe_1.pipe");
  EXPECT_FALSE(FlightRecorder::TargetOf({"PATH=/bin"}, 1, "/l/w.log").has_value());
  EXPECT_FALSE(FlightRecorder::TargetOf(env, 1, "").has_value());
}

// A stand-in for torch: reads the rank's pipe and, when poked, writes the dump.
TEST(FlightRecorderTest, TriggersEveryRanksDumpAndKeepsItBesideTheLog) {
  testing::TempDir dir;
  boost::asio::io_context io;
  auto recorder = FlightRecorder::Create(io, dir.path());
  ASSERT_TRUE(recorder.ok());
  std::vector<std::string> env;
  (*recorder)->AddWorkerEnv(env);
  auto armed = *FlightRecorder::TargetOf(env, 0, dir.File("worker_0.log"));
  auto absent = *FlightRecorder::TargetOf(env, 1, dir.File("worker_1.log"));  // no reader
  ASSERT_EQ(mkfifo(armed.pipe.c_str(), 0600), 0);
  // Read and write, as a reader that is always there: a read waits for the trigger instead of
  // seeing the end of a pipe that has no writer yet.
  const int reader = open(armed.pipe.c_str(), O_RDWR);
  ASSERT_GE(reader, 0);
  std::thread torch([&] {
    char byte;
    if (read(reader, &byte, 1) == 1) std::ofstream(armed.dump) << "flight recorder of rank 0";
    close(reader);
  });
  std::map<int, std::string> collected;
  bool done = false;
  (*recorder)->Collect({armed, absent}, seconds(20), [&](std::map<int, std::string> dumps) {
    collected = std::move(dumps);
    done = true;
  });
  io.run();
  torch.join();
  ASSERT_TRUE(done);
  ASSERT_EQ(collected.size(), 1u);
  EXPECT_EQ(collected[0], dir.File("worker_0.flight_recorder"));
  std::ifstream kept(collected[0]);
  std::string text((std::istreambuf_iterator<char>(kept)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "flight recorder of rank 0");
}

}  // namespace
}  // namespace gangrun::node

namespace gangrun::scheduler {
namespace {

v1::RankStack Counted(int rank, int64_t collectives, const std::string& op, bool inside,
                      const std::string& where) {
  v1::RankStack stack;
  stack.set_rank(rank);
  stack.set_where(where);
  stack.set_collectives(collectives);
  stack.set_last_op(op);
  stack.set_in_collective(inside);
  return stack;
}

TEST(HangReportTest, ARankBehindInCollectivesIsTheOddOneOutEvenWithTheSameStack) {
  std::vector<v1::RankStack> stacks;
  for (int rank : {0, 1, 2})
    stacks.push_back(Counted(rank, 42, "all_reduce", true, "step (t.py:8)"));
  stacks.push_back(Counted(3, 41, "all_reduce", false, "step (t.py:8)"));
  auto groups = GroupStacks(stacks);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_FALSE(groups[0].odd_one_out());
  EXPECT_TRUE(groups[1].odd_one_out());
  EXPECT_TRUE(groups[1].behind());
  EXPECT_EQ(DescribeGroups(groups),
            "ranks 0-2: all_reduce #42 in step (t.py:8); rank 3: collective #41, in step "
            "(t.py:8) <- look here first");
  // Even when the ranks behind are the majority.
  stacks = {Counted(0, 7, "barrier", true, "a (t.py:1)"), Counted(1, 6, "barrier", false, "b"),
            Counted(2, 6, "barrier", false, "b")};
  groups = GroupStacks(stacks);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].ranks_size(), 2);
  EXPECT_TRUE(groups[0].behind());
  EXPECT_FALSE(groups[1].odd_one_out());
}

TEST(HangReportTest, EqualCountsFallBackToWhereTheStacksAre) {
  std::vector<v1::RankStack> stacks;
  for (int rank : {0, 1, 2}) stacks.push_back(Counted(rank, 5, "all_reduce", true, "f (t.py:2)"));
  stacks.push_back(Counted(3, 5, "all_reduce", false, "loader (d.py:4)"));
  auto groups = GroupStacks(stacks);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_TRUE(groups[1].odd_one_out());
  EXPECT_FALSE(groups[1].behind());
  EXPECT_EQ(GroupPlace(groups[1]), "collective #5, in loader (d.py:4)");
  // Ranks without the hook's counts are not compared by them.
  v1::RankStack plain;
  plain.set_rank(4);
  plain.set_where("f (t.py:2)");
  stacks.push_back(plain);
  groups = GroupStacks(stacks);
  for (const auto& group : groups) {
    if (!group.has_collectives()) {
      EXPECT_FALSE(group.behind());
    }
  }
}

}  // namespace
}  // namespace gangrun::scheduler
