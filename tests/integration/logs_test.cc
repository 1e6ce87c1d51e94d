// `gangrun logs` against real launchers: every rank's lines from both hosts of a two-launcher
// job through the scheduler, prefixed and in order; the last lines of one rank; --follow to
// the job's end; a rank that wrote 100 MB, read whole, with the launchers' memory flat; and
// bad requests.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "tests/integration/launcher_fixture.h"

namespace gangrun::testing {
namespace {

using std::chrono::seconds;

// LINES lines per rank ("rank R line I"), then "ready" on the report FIFO, then wait for GO;
// after GO, AFTER more lines. BIG_RANK writes BIG_MB megabytes of 100-byte lines instead.
constexpr char kWriter[] = R"PY(
import os, sys
rank = int(os.environ["RANK"])
out = sys.stdout
if rank == int(os.environ.get("BIG_RANK", "-1")):
    block = ("x" * 99 + "\n") * 10000  # 1 MB a write: the test is the read, not the writing
    for i in range(int(os.environ["BIG_MB"])):
        out.write(block)
else:
    for i in range(int(os.environ.get("LINES", "3"))):
        out.write("rank %d line %d\n" % (rank, i))
out.flush()
with open(os.environ["GANGRUN_TEST_READY"], "w") as fifo:
    fifo.write("ready %d %d 0\n" % (rank, os.getpid()))
open(os.environ["GO"]).read()
for i in range(int(os.environ.get("AFTER", "0"))):
    out.write("rank %d after %d\n" % (rank, i))
)PY";

class LogsTest : public LauncherTest {
 protected:
  void SetUp() override {
    std::ofstream(dir_.File("writer.py")) << kWriter;
    ASSERT_EQ(mkfifo(go_.c_str(), 0600), 0);
  }
  // Two launchers of two ranks each on port_, every rank waiting for GO once written.
  void StartJob(const std::vector<std::string>& env) {
    for (const std::string node_rank : {"0", "1"}) {
      std::vector<std::string> full_env = {"GANGRUN_TEST_READY=" + fifo_.path(), "GO=" + go_};
      full_env.insert(full_env.end(), env.begin(), env.end());
      launchers_.push_back(Launch({GangrunBinary(), "--worker_num", "4", "--local_worker_num", "2",
                                   "--master_port", port_, "--node_rank", node_rank, "--token",
                                   "l0gs", "--log_dir", "logs" + node_rank, "python3", "writer.py"},
                                  full_env, dir_.path(), dir_.path()));
    }
    ASSERT_EQ(WaitReady(4).size(), 4u) << launchers_[0].Stderr() << launchers_[1].Stderr();
  }
  Launched Logs(std::vector<std::string> args) {
    args.insert(args.begin(),
                {GangrunBinary(), "logs", "--master", "127.0.0.1:" + port_, "--token", "l0gs"});
    return Launch(args, {}, dir_.path(), dir_.path());
  }
  // Releases every rank waiting on the GO fifo, also one that opens it late (a write and
  // close at once would leave it blocked in open() for ever): the fifo is written to each
  // time a reader has it open, until every launcher has ended.
  void EndJob() {
    const auto deadline = std::chrono::steady_clock::now() + seconds(60);
    size_t ended = 0;
    std::vector<common::ExitStatus> ends;
    while (ended < launchers_.size() && std::chrono::steady_clock::now() < deadline) {
      const int fd = open(go_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) {
        (void)!write(fd, "go\n", 3);
        close(fd);
      }
      if (auto end = WaitExit(launchers_[ended].pid, std::chrono::milliseconds(100))) {
        ends.push_back(*end);
        ++ended;
      }
    }
    ASSERT_EQ(ended, launchers_.size()) << "the job did not end";
    for (size_t i = 0; i < ends.size(); ++i) {
      EXPECT_EQ(ends[i].code, 0) << launchers_[i].Stderr();
    }
  }
  std::string port_ = FreePort();
  std::string go_ = dir_.File("go");
  std::vector<Launched> launchers_;
};

std::vector<std::string> LinesOf(const std::string& text, const std::string& prefix) {
  std::vector<std::string> lines;
  for (const auto& line : Split(text, '\n')) {
    if (line.rfind(prefix, 0) == 0) lines.push_back(line.substr(prefix.size()));
  }
  return lines;
}

TEST_F(LogsTest, EveryRanksLinesFromEveryHostPrefixedAndInOrder) {
  StartJob({"LINES=50"});
  auto all = Logs({});
  ASSERT_EQ(RunToEnd(all).code, 0) << all.Stderr();
  const std::string host = Split(Split(all.Stdout(), ':')[0], '[').back();
  for (int rank = 0; rank < 4; ++rank) {
    auto lines = LinesOf(all.Stdout(), "[" + host + ":" + std::to_string(rank) + "] ");
    ASSERT_EQ(lines.size(), 50u) << all.Stdout();
    for (int i = 0; i < 50; ++i) {
      EXPECT_EQ(lines[i], "rank " + std::to_string(rank) + " line " + std::to_string(i));
    }
  }
  // The last lines of some ranks.
  auto tail = Logs({"--rank", "1,3", "--tail", "2"});
  ASSERT_EQ(RunToEnd(tail).code, 0) << tail.Stderr();
  EXPECT_EQ(LinesOf(tail.Stdout(), "[" + host + ":3] "),
            (std::vector<std::string>{"rank 3 line 48", "rank 3 line 49"}));
  EXPECT_EQ(LinesOf(tail.Stdout(), "[" + host + ":1] ").size(), 2u);
  EXPECT_TRUE(LinesOf(tail.Stdout(), "[" + host + ":0] ").empty());
  // A range of ranks, as `gangrun status` prints them.
  auto range = Logs({"--rank", "1-3", "--tail", "1"});
  ASSERT_EQ(RunToEnd(range).code, 0) << range.Stderr();
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(LinesOf(range.Stdout(), "[" + host + ":" + std::to_string(rank) + "] ").size(),
              rank == 0 ? 0u : 1u)
        << range.Stdout();
  }
  // Bad requests: one line each, exit 2.
  auto no_rank = Logs({"--rank", "7"});
  EXPECT_EQ(RunToEnd(no_rank).code, 2);
  EXPECT_NE(no_rank.Stderr().find("there is no rank 7"), std::string::npos) << no_rank.Stderr();
  auto bad = Logs({"--rank", "x"});
  EXPECT_EQ(RunToEnd(bad).code, 2);
  // Without the token: refused.
  auto refused = Launch({GangrunBinary(), "logs", "--master", "127.0.0.1:" + port_}, {},
                        dir_.path(), dir_.path());
  EXPECT_NE(RunToEnd(refused).code, 0);
  EndJob();
}

TEST_F(LogsTest, FollowPrintsWhatTheRanksWriteUntilTheJobEnds) {
  StartJob({"LINES=2", "AFTER=20"});
  auto follow = Logs({"--follow", "--rank", "0,2"});
  // It has the lines written so far, then goes on with what comes after GO.
  EXPECT_TRUE(WaitForStdout(follow, "rank 2 line 1", seconds(20)));
  EndJob();
  ASSERT_EQ(RunToEnd(follow).code, 0) << follow.Stderr() << launchers_[0].Stderr();
  for (const int rank : {0, 2}) {
    const auto lines = LinesOf(follow.Stdout(), "[");
    int after = 0;
    for (const auto& line : lines) {
      after += line.find(":" + std::to_string(rank) + "] rank " + std::to_string(rank) +
                         " after ") != std::string::npos;
    }
    EXPECT_EQ(after, 20) << follow.Stdout();
  }
}

TEST_F(LogsTest, FollowFromTailZeroPrintsOnlyWhatIsWrittenFromThenOn) {
  // Debug lines: the scheduler says when the stream is open, so that the job ends after it.
  StartJob({"LINES=5", "AFTER=20", "GANGRUN_LOG_LEVEL=debug"});
  auto follow = Logs({"--follow", "--tail", "0"});
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (!WaitForStderr(launchers_[0], "gangrun logs: stream", std::chrono::milliseconds(100)) &&
         !WaitForStderr(launchers_[1], "gangrun logs: stream", std::chrono::milliseconds(100))) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the follow never reached the job";
  }
  EndJob();
  ASSERT_EQ(RunToEnd(follow).code, 0) << follow.Stderr();
  // As `tail -n 0 -f`: nothing written before it started (what it shows after is whatever
  // the ranks wrote once it was reading).
  EXPECT_EQ(follow.Stdout().find(" line "), std::string::npos) << follow.Stdout();
}

// 100 MB is read in ~1.2 s in the Release build and ~4 s under AddressSanitizer, but in 35 to
// 47 s under ThreadSanitizer (its range checks of every copy), past ctest's 120 s beside
// another test. Memory is measured in the Release build only (kMemoryIsMeasurable), so under
// ThreadSanitizer 20 MB checks the same path: every line there, in order, nothing added.
#if defined(__SANITIZE_THREAD__)
constexpr int kBigMegabytes = 20;
#else
constexpr int kBigMegabytes = 100;
#endif

TEST_F(LogsTest, ARankThatWrote100MegabytesIsReadWholeWithBoundedMemory) {
  // rank 3: on the second launcher
  StartJob({"BIG_RANK=3", "BIG_MB=" + std::to_string(kBigMegabytes)});
  const long before0 = ProcStatusKiB(launchers_[0].pid, "VmHWM"),
             before1 = ProcStatusKiB(launchers_[1].pid, "VmHWM");
  const auto read_at = std::chrono::steady_clock::now();
  auto big = Logs({"--rank", "3"});
  ASSERT_EQ(RunToEnd(big, seconds(60)).code, 0)
      << big.Stderr() << launchers_[0].Stderr() << launchers_[1].Stderr();
  std::printf("%d MB read in %.1f s\n", kBigMegabytes,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - read_at).count());
  struct stat st;
  ASSERT_EQ(stat(big.stdout_path.c_str(), &st), 0);
  // 10,000 lines of 100 bytes a megabyte, each with its prefix: nothing dropped, nothing added.
  const std::string head = big.Stdout().substr(0, 200);
  const size_t prefix = head.find(']') + 2;
  EXPECT_EQ(st.st_size, static_cast<off_t>(kBigMegabytes * 10000 * (prefix + 100))) << head;
  const long after0 = ProcStatusKiB(launchers_[0].pid, "VmHWM"),
             after1 = ProcStatusKiB(launchers_[1].pid, "VmHWM");
  std::printf("peak RSS, scheduler's launcher %ld -> %ld KiB, rank 3's %ld -> %ld KiB\n", before0,
              after0, before1, after1);
  if (kMemoryIsMeasurable) {
    EXPECT_LT(after0 - before0, 32 * 1024);
    EXPECT_LT(after1 - before1, 32 * 1024);
  }
  EndJob();
}

}  // namespace
}  // namespace gangrun::testing
