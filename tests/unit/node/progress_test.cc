// Progress supervision's rules, each on its own: the datagram grammar, every hang bound
// (initial, steady, section, learned), step rates, torch's FileTimer table, where a stack
// is, and how a hang's stacks are grouped.

#include "node/progress.h"

#include <gtest/gtest.h>

#include <limits>

#include "node/file_timer.h"
#include "node/stacks.h"
#include "scheduler/hang_report.h"

namespace gangrun::node {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const common::TimePoint kT0 = common::TimePoint() + seconds(1000);

v1::ProgressRules Rules(double steady, double initial = 0) {
  v1::ProgressRules rules;
  rules.set_hang_timeout_seconds(steady);
  rules.set_initial_timeout_seconds(initial);
  return rules;
}

std::vector<int> HungRanks(ProgressTracker& tracker, common::TimePoint at) {
  std::vector<int> ranks;
  for (const auto& hung : tracker.CheckHangs(at)) ranks.push_back(hung.rank());
  return ranks;
}

TEST(ProgressDatagramTest, AcceptsTheGrammarAndNamesWhatIsWrong) {
  EXPECT_EQ(ParseProgress("step 12")->step, 12);
  EXPECT_EQ(ParseProgress("step\n")->step, -1);
  EXPECT_EQ(ParseProgress("  step   7  ")->step, 7);
  EXPECT_EQ(ParseProgress("begin checkpoint")->kind, ProgressDatagram::Kind::kBegin);
  EXPECT_EQ(ParseProgress("end data/load:1")->name, "data/load:1");
  EXPECT_EQ(ParseProgress("checkpoint 40")->kind, ProgressDatagram::Kind::kCheckpoint);
  EXPECT_EQ(ParseProgress("checkpoint 40")->step, 40);
  EXPECT_EQ(ParseProgress("checkpoint")->step, -1);
  for (const char* bad :
       {"", "step -1", "step x", "step 1 2", "walk", "begin", "begin a b", "begin bad!name", "end",
        "checkpoint -2", "checkpoint a", "checkpoint 1 2"}) {
    EXPECT_FALSE(ParseProgress(bad).ok()) << bad;
  }
  EXPECT_FALSE(ParseProgress("begin " + std::string(65, 'a')).ok());
  EXPECT_FALSE(ParseProgress("step " + std::string(300, '1')).ok());
}

// A checkpoint is the step it names, or without one the rank's last step; it travels with the
// rank's progress, with its age.
TEST(ProgressTrackerTest, ACheckpointTravelsWithTheRanksProgress) {
  ProgressTracker tracker{v1::ProgressRules()};
  tracker.AddRank(0, kT0);
  ASSERT_TRUE(tracker.OnDatagram(0, "step 7", kT0 + seconds(1)));
  ASSERT_TRUE(tracker.OnDatagram(0, "checkpoint", kT0 + seconds(2)));
  auto changes = tracker.TakeChanges(kT0 + seconds(3));
  ASSERT_EQ(changes.size(), 1u);
  ASSERT_TRUE(changes[0].has_checkpoint());
  EXPECT_EQ(changes[0].checkpoint(), 7);
  EXPECT_DOUBLE_EQ(changes[0].checkpoint_age_seconds(), 1.0);
  ASSERT_TRUE(tracker.OnDatagram(0, "checkpoint 5", kT0 + seconds(4)));
  changes = tracker.TakeChanges(kT0 + seconds(4));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].checkpoint(), 5);
}

TEST(ProgressTrackerTest, NoRulesNeverHang) {
  ProgressTracker tracker(v1::ProgressRules{});
  EXPECT_FALSE(tracker.Enabled());
  tracker.AddRank(0, kT0);
  EXPECT_TRUE(HungRanks(tracker, kT0 + seconds(100000)).empty());
  EXPECT_FALSE(tracker.NextDeadline().has_value());
}

TEST(ProgressTrackerTest, ABareStepAfterTheLargestStepSaturatesInsteadOfOverflowing) {
  ProgressTracker tracker(Rules(10));
  tracker.AddRank(0, kT0);
  tracker.OnDatagram(0, "step 9223372036854775807", kT0);
  tracker.OnDatagram(0, "step", kT0 + seconds(1));
  auto hung = tracker.CheckHangs(kT0 + seconds(20));
  ASSERT_EQ(hung.size(), 1u);
  EXPECT_EQ(hung[0].step(), std::numeric_limits<int64_t>::max());
}

TEST(ProgressTrackerTest, SteadyBoundCountsFromTheLastReportAndOnlyAfterTheFirst) {
  ProgressTracker tracker(Rules(10));
  tracker.AddRank(0, kT0);
  tracker.AddRank(1, kT0);
  // Never reported: the steady bound does not apply (no initial bound set).
  EXPECT_TRUE(HungRanks(tracker, kT0 + seconds(60)).empty());
  ASSERT_TRUE(tracker.OnDatagram(0, "step 1", kT0 + seconds(60)));
  EXPECT_EQ(*tracker.NextDeadline(), kT0 + seconds(70));
  EXPECT_TRUE(HungRanks(tracker, kT0 + seconds(69)).empty());
  tracker.OnDatagram(0, "step 2", kT0 + seconds(69));
  EXPECT_TRUE(HungRanks(tracker, kT0 + seconds(78)).empty());
  auto hung = tracker.CheckHangs(kT0 + seconds(79));
  ASSERT_EQ(hung.size(), 1u);
  EXPECT_EQ(hung[0].rank(), 0);
  EXPECT_EQ(hung[0].rule(), "steady");
  EXPECT_EQ(hung[0].step(), 2);
  EXPECT_DOUBLE_EQ(hung[0].silent_seconds(), 10);
  // Once per generation.
  EXPECT_TRUE(HungRanks(tracker, kT0 + seconds(1000)).empty());
}

TEST(ProgressTrackerTest, InitialBoundCountsFromTheStart) {
  ProgressTracker tracker(Rules(0, 30));
  tracker.AddRank(3, kT0);
  EXPECT_TRUE(HungRanks(tracker, kT0 + seconds(29)).empty());
  auto hung = tracker.CheckHangs(kT0 + seconds(30));
  ASSERT_EQ(hung.size(), 1u);
  EXPECT_EQ(hung[0].rule(), "initial");
  // A rank that reported in time is then free of the initial bound (no steady one set).
  ProgressTracker other(Rules(0, 30));
  other.AddRank(3, kT0);
  other.OnDatagram(3, "step", kT0 + seconds(29));
  EXPECT_TRUE(HungRanks(other, kT0 + seconds(10000)).empty());
}

TEST(ProgressTrackerTest, InsideASectionOnlyItsBoundApplies) {
  v1::ProgressRules rules = Rules(10);
  (*rules.mutable_section_timeout_seconds())["checkpoint"] = 600;
  (*rules.mutable_section_timeout_seconds())["allreduce"] = 2;
  ProgressTracker tracker(rules);
  tracker.AddRank(0, kT0);
  tracker.OnDatagram(0, "step 7", kT0);
  tracker.OnDatagram(0, "begin checkpoint", kT0 + seconds(5));
  EXPECT_TRUE(HungRanks(tracker, kT0 + seconds(300)).empty());  // not the steady 10 s
  // A nested section without a bound keeps the outer section's.
  tracker.OnDatagram(0, "begin write", kT0 + seconds(300));
  EXPECT_TRUE(HungRanks(tracker, kT0 + seconds(899)).empty());
  tracker.OnDatagram(0, "end checkpoint", kT0 + seconds(899));  // closes "write" too
  EXPECT_TRUE(HungRanks(tracker, kT0 + seconds(908)).empty());
  // A shorter section bound brings the deadline forward.
  tracker.OnDatagram(0, "begin allreduce", kT0 + seconds(908));
  EXPECT_EQ(*tracker.NextDeadline(), kT0 + seconds(910));
  auto hung = tracker.CheckHangs(kT0 + seconds(910));
  ASSERT_EQ(hung.size(), 1u);
  EXPECT_EQ(hung[0].rule(), "section");
  EXPECT_EQ(hung[0].section(), "allreduce");
}

TEST(ProgressTrackerTest, LearnedBoundIsFiveTimesTheLongestIntervalWithAFloor) {
  v1::ProgressRules rules;
  rules.set_learn(true);
  rules.set_initial_timeout_seconds(100);
  ProgressTracker tracker(rules);
  tracker.AddRank(0, kT0);
  tracker.OnDatagram(0, "step", kT0);
  tracker.OnDatagram(0, "step", kT0 + seconds(4));
  tracker.OnDatagram(0, "step", kT0 + seconds(6));
  // Two intervals seen: not learned yet, the initial bound applies from the last report.
  EXPECT_EQ(*tracker.NextDeadline(), kT0 + seconds(106));
  tracker.OnDatagram(0, "step", kT0 + seconds(8));
  // Learned: 5 x 4 s = 20 s.
  EXPECT_EQ(*tracker.NextDeadline(), kT0 + seconds(28));
  auto hung = tracker.CheckHangs(kT0 + seconds(28));
  ASSERT_EQ(hung.size(), 1u);
  EXPECT_EQ(hung[0].rule(), "learned");
  EXPECT_DOUBLE_EQ(hung[0].bound_seconds(), 20);
  // Fast steps learn the floor, not 5 x 10 ms.
  ProgressTracker fast(rules);
  fast.AddRank(1, kT0);
  for (int i = 0; i < 5; ++i) fast.OnDatagram(1, "step", kT0 + milliseconds(10 * i));
  EXPECT_EQ(*fast.NextDeadline(), kT0 + milliseconds(40) + kLearnFloor);
}

TEST(ProgressTrackerTest, IntervalsInsideSectionsAreNotLearned) {
  v1::ProgressRules rules;
  rules.set_learn(true);
  ProgressTracker tracker(rules);
  tracker.AddRank(0, kT0);
  tracker.OnDatagram(0, "step", kT0);
  tracker.OnDatagram(0, "begin checkpoint", kT0 + seconds(1));
  tracker.OnDatagram(0, "end checkpoint", kT0 + seconds(500));  // inside: not learned
  tracker.OnDatagram(0, "step", kT0 + seconds(501));
  tracker.OnDatagram(0, "step", kT0 + seconds(502));
  EXPECT_EQ(*tracker.NextDeadline(), kT0 + seconds(502) + kLearnFloor);
}

TEST(ProgressTrackerTest, ReportsStepRatesAndOnlyWhatChanged) {
  ProgressTracker tracker(Rules(60));
  tracker.AddRank(0, kT0);
  tracker.AddRank(1, kT0);
  EXPECT_TRUE(tracker.TakeChanges(kT0).empty());
  for (int i = 0; i <= 20; ++i)
    tracker.OnDatagram(0, "step " + std::to_string(i), kT0 + seconds(i));
  EXPECT_FALSE(tracker.OnDatagram(1, "nonsense", kT0));
  auto changes = tracker.TakeChanges(kT0 + seconds(22));
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].step(), 20);
  EXPECT_EQ(changes[0].reports(), 21u);
  EXPECT_DOUBLE_EQ(changes[0].step_seconds(), 1.0);
  EXPECT_DOUBLE_EQ(changes[0].age_seconds(), 2.0);
  EXPECT_EQ(changes[1].rejected(), 1u);
  EXPECT_EQ(changes[1].reports(), 0u);
  EXPECT_TRUE(tracker.TakeChanges(kT0 + seconds(23)).empty());
  tracker.RemoveRank(0);
  EXPECT_TRUE(HungRanks(tracker, kT0 + seconds(10000)).empty());
}

TEST(FileTimerTest, ParsesTorchsRequestsAndRefusesOthers) {
  auto request = ParseTimerRequest(
      R"({"version": 1, "pid": 42, "scope_id": "step", "expiration_time": 17.5, "signal": 9})");
  ASSERT_TRUE(request.ok());
  EXPECT_EQ(request->pid, 42);
  EXPECT_EQ(request->scope, "step");
  EXPECT_DOUBLE_EQ(request->expiration, 17.5);
  EXPECT_EQ(request->signal, 9);
  for (const char* bad :
       {"", "[]", "{", R"({"pid": 0, "scope_id": "a", "expiration_time": 1})",
        R"({"pid": 1, "scope_id": 3, "expiration_time": 1})", R"({"pid": 1, "scope_id": "a"})",
        R"({"pid": 1, "scope_id": "a", "expiration_time": 1, "signal": 99})"}) {
    EXPECT_FALSE(ParseTimerRequest(bad).ok()) << bad;
  }
}

// Timers whose processes all started at time 1 (FileTimers::StartTimeOf).
FileTimers TestTimers() {
  return FileTimers([](pid_t) -> std::optional<uint64_t> { return 1; });
}

TEST(FileTimerTest, ExpiresPerPidWithTheEarliestSignalledTimerAndClearsThePid) {
  FileTimers timers = TestTimers();
  timers.Apply({10, "a", 5.0, 0});
  timers.Apply({10, "b", 6.0, 9});
  timers.Apply({10, "c", 50.0, 15});
  timers.Apply({11, "a", 7.0, 15});
  timers.Apply({11, "a", -1, 0});  // released
  timers.Apply({12, "x", 100.0, 9});
  EXPECT_DOUBLE_EQ(*timers.NextExpiration(), 5.0);
  auto expired = timers.TakeExpired(10.0);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].pid, 10);
  EXPECT_EQ(expired[0].scope, "b");  // the earliest expired one that has a signal
  EXPECT_EQ(expired[0].signal, 9);
  EXPECT_EQ(timers.size(), 1u);  // pid 10's "c" went with it; pid 12 stays
  EXPECT_TRUE(timers.TakeExpired(99.0).empty());
}

TEST(FileTimerTest, ClearingAPidOrEverythingLeavesNoTrace) {
  FileTimers timers = TestTimers();
  timers.Apply({10, "a", 5.0, 9});
  timers.Apply({11, "a", 6.0, 9});
  timers.Apply({11, "b", 1e300, 9});
  timers.ClearPid(11);
  EXPECT_EQ(timers.size(), 1u);
  EXPECT_DOUBLE_EQ(*timers.NextExpiration(), 5.0);
  timers.Clear();
  EXPECT_EQ(timers.size(), 0u);
  EXPECT_FALSE(timers.NextExpiration());
  EXPECT_TRUE(timers.TakeExpired(1e301).empty());
}

TEST(FileTimerTest, AProcessThatIsGoneOrReplacedGetsNoSignal) {
  std::map<pid_t, std::optional<uint64_t>> start = {{10, 100}, {11, std::nullopt}};
  FileTimers timers([&start](pid_t pid) { return start[pid]; });
  EXPECT_FALSE(timers.Apply({11, "a", 5.0, 9}));  // already gone
  ASSERT_TRUE(timers.Apply({10, "a", 5.0, 9}));
  start[10] = 200;  // pid 10 went to another process
  EXPECT_TRUE(timers.TakeExpired(10.0).empty());
  EXPECT_EQ(timers.size(), 0u);
}

TEST(FileTimerTest, ManyTimersCostLogarithmicTime) {
  FileTimers timers = TestTimers();
  // 100,000 requests on 1,000 scopes, each renewed 100 times: the next expiration is always
  // the first in order, however many there are.
  for (int i = 0; i < 100000; ++i) {
    ASSERT_TRUE(timers.Apply({10, std::to_string(i % 1000), 1000.0 + i, 9}));
  }
  EXPECT_EQ(timers.size(), 1000u);
  EXPECT_DOUBLE_EQ(*timers.NextExpiration(), 1000.0 + 99000);
}

TEST(FileTimerTest, TheTableIsBounded) {
  FileTimers timers = TestTimers();
  for (size_t i = 0; i < FileTimers::kMaxTimers; ++i) {
    ASSERT_TRUE(timers.Apply({1, std::to_string(i), 1.0, 9}));
  }
  EXPECT_FALSE(timers.Apply({2, "more", 1.0, 9}));
  EXPECT_TRUE(timers.Apply({1, "0", 2.0, 9}));  // renewing an existing timer is fine
}

TEST(StackWhereTest, PythonMainThreadsInnermostUserFrame) {
  const std::string dump =
      "Thread 0x00007f0000000001 (most recent call first):\n"
      "  File \"/usr/lib/python3.11/threading.py\", line 320 in wait\n"
      "  File \"/work/loader.py\", line 12 in worker_loop\n"
      "\n"
      "Current thread 0x00007f0000000002 (most recent call first):\n"
      "  File \"/usr/lib/python3/dist-packages/torch/distributed/c10d.py\", line 1500 in "
      "all_reduce\n"
      "  File \"/work/train.py\", line 88 in all_reduce_wait\n"
      "  File \"/work/train.py\", line 120 in <module>\n";
  EXPECT_EQ(PythonWhere(dump), "all_reduce_wait (train.py:88)");
  EXPECT_EQ(PythonWhere("Current thread 0x1 (most recent call first):\n"
                        "  File \"<frozen importlib._bootstrap>\", line 1 in _find\n"),
            "_find (<frozen importlib._bootstrap>:1)");
  EXPECT_EQ(PythonWhere("garbage"), "");
}

TEST(StackWhereTest, NativeFirstThreadsInnermostFrameOutsideSystemLibraries) {
  const std::string stack =
      "PID 7 - process\n"
      "TID 7:\n"
      "#0  0x00007f43b321f503 clock_nanosleep@GLIBC_2.2.5 - /usr/lib/x86_64-linux-gnu/libc.so.6\n"
      "#1  0x00005594077da4af - /opt/app/worker\n"
      "#2  0x00005594077da4b0 load_batch - /opt/app/worker\n"
      "TID 8:\n"
      "#0  0x0000000000000001 other_thread - /opt/app/worker\n";
  EXPECT_EQ(NativeWhere(stack), "load_batch (worker)");
  EXPECT_EQ(NativeWhere("TID 1:\n#0  0x1 poll - /lib/x86_64-linux-gnu/libc.so.6\n"),
            "poll (libc.so.6)");
}

}  // namespace
}  // namespace gangrun::node

namespace gangrun::scheduler {
namespace {

v1::RankStack Stack(int rank, const std::string& where, const std::string& error = "") {
  v1::RankStack stack;
  stack.set_rank(rank);
  stack.set_where(where);
  stack.set_error(error);
  return stack;
}

TEST(HangReportTest, TheMinorityIsTheOddOneOut) {
  std::vector<v1::RankStack> stacks;
  for (int rank : {0, 1, 3, 4, 5, 6, 7})
    stacks.push_back(Stack(rank, "all_reduce_wait (train.py:88)"));
  stacks.push_back(Stack(2, "load_batch (data.py:41)"));
  auto groups = GroupStacks(stacks);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].ranks_size(), 7);
  EXPECT_FALSE(groups[0].odd_one_out());
  EXPECT_TRUE(groups[1].odd_one_out());
  EXPECT_EQ(DescribeGroups(groups),
            "7 ranks (0-1,3-7) in all_reduce_wait (train.py:88); rank 2 in load_batch "
            "(data.py:41) — the odd one out");
}

TEST(HangReportTest, NoMajorityNoOddOneOutAndUnsampledRanksAreNamed) {
  auto groups =
      GroupStacks({Stack(0, "a"), Stack(1, "b"), Stack(2, "", "not sampled within 10 s")});
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_FALSE(groups[0].odd_one_out());
  EXPECT_FALSE(groups[1].odd_one_out());
  EXPECT_EQ(groups[2].where(), "");
  EXPECT_EQ(DescribeGroups(groups), "rank 0 in a; rank 1 in b; rank 2 not sampled");
  EXPECT_EQ(DescribeGroups(GroupStacks({Stack(0, "x"), Stack(1, "x")})), "2 ranks (0-1) in x");
}

TEST(HangReportTest, RankListsCompressRunsAndStayShort) {
  EXPECT_EQ(RankList({5, 1, 2, 3, 9}), "1-3,5,9");
  std::vector<int> many;
  for (int i = 0; i < 100; i += 2) many.push_back(i);
  EXPECT_EQ(RankList(many, 3), "0,2,4,...");
}

}  // namespace
}  // namespace gangrun::scheduler
