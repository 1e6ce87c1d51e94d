#include "node/log_files.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <functional>

#include "tests/testing/run_until.h"
#include "tests/testing/test_util.h"

namespace gangrun::node {
namespace {

// The inotify marks this process holds, from /proc/self/fdinfo of its inotify descriptors.
int InotifyMarks() {
  int marks = 0;
  DIR* fds = opendir("/proc/self/fd");
  while (dirent* entry = fds != nullptr ? readdir(fds) : nullptr) {
    char target[256] = {};
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    if (readlink(link.c_str(), target, sizeof(target) - 1) <= 0) continue;
    if (std::string(target) != "anon_inode:inotify") continue;
    std::ifstream info(std::string("/proc/self/fdinfo/") + entry->d_name);
    for (std::string line; std::getline(info, line);) marks += line.rfind("inotify wd:", 0) == 0;
  }
  if (fds != nullptr) closedir(fds);
  return marks;
}

// Runs `io` until `done` or 5 s.
bool RunUntil(boost::asio::io_context& io, const std::function<bool()>& done) {
  return testing::RunUntil(io, done, std::chrono::seconds(5));
}

TEST(ReadLastLinesTest, ReturnsTheTail) {
  testing::TempDir dir;
  std::ofstream(dir.File("a")) << "1\n2\n3\n4\n";
  EXPECT_EQ(ReadLastLines(dir.File("a"), 2), (std::vector<std::string>{"3", "4"}));
  EXPECT_EQ(ReadLastLines(dir.File("a"), 10), (std::vector<std::string>{"1", "2", "3", "4"}));
  EXPECT_TRUE(ReadLastLines(dir.File("missing"), 3).empty());
}

TEST(ReadLastLinesTest, KeepsAnUnterminatedLastLineAndWorksAcrossBlocks) {
  testing::TempDir dir;
  {
    std::ofstream out(dir.File("big"));
    for (int i = 0; i < 5000; ++i) out << "line " << i << "\n";
    out << "partial";
  }
  EXPECT_EQ(ReadLastLines(dir.File("big"), 3),
            (std::vector<std::string>{"line 4998", "line 4999", "partial"}));
}

// The lines go into messages as text: bytes that are not UTF-8 (and a character cut at the
// line limit) become U+FFFD.
TEST(ReadLastLinesTest, LinesAreTextWhateverTheLogHolds) {
  testing::TempDir dir;
  std::ofstream(dir.File("a")) << "caf\xE9\n"
                               << std::string(kMaxTailLineBytes - 1, 'x') << "\xC3\xA9\n";
  const auto lines = ReadLastLines(dir.File("a"), 2);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "caf\xEF\xBF\xBD");
  EXPECT_EQ(lines[1], std::string(kMaxTailLineBytes - 1, 'x') + "\xEF\xBF\xBD [... cut]");
}

TEST(LogFollowerTest, PrefixesWholeLinesAndFlushesThePartialOneAtTheEnd) {
  testing::TempDir dir;
  std::string path = dir.File("w.log");
  std::ofstream out(path);
  out << "one\ntw" << std::flush;
  boost::asio::io_context io;
  std::string console;
  LogFollower follower(io, [&](const std::string& text) { console += text; });
  follower.Follow(path, "[r0] ");
  EXPECT_EQ(console, "[r0] one\n");
  out << "o\nthree" << std::flush;
  // inotify delivers the change; run the loop until it is seen.
  RunUntil(io, [&] { return console.find("two") != std::string::npos; });
  EXPECT_EQ(console, "[r0] one\n[r0] two\n");
  follower.DrainAll();
  EXPECT_EQ(console, "[r0] one\n[r0] two\n[r0] three\n");
}

TEST(LogFollowerTest, ALongLineIsShownInTheSamePiecesHoweverItIsRead) {
  testing::TempDir dir;
  for (bool in_one_write : {true, false}) {
    std::string path = dir.File(in_one_write ? "one.log" : "two.log");
    std::ofstream out(path);
    const std::string line(40000, 'x');
    if (in_one_write) out << line << "\nend\n" << std::flush;
    boost::asio::io_context io;
    std::string console;
    LogFollower follower(io, [&](const std::string& text) { console += text; });
    if (!in_one_write) {
      out << line.substr(0, 20000) << std::flush;  // the follower reads it without its end
      follower.Follow(path, "> ");
      out << line.substr(20000) << "\nend\n" << std::flush;
    } else {
      follower.Follow(path, "> ");
    }
    follower.DrainAll();
    const std::string piece(LogFollower::kMaxLineBytes, 'x');
    EXPECT_EQ(console, "> " + piece + "\n> " + piece + "\n> " +
                           std::string(40000 - 2 * piece.size(), 'x') + "\n> end\n")
        << (in_one_write ? "one write" : "two writes");
  }
}

// A job that ends at once must not wait for the kernel to destroy inotify marks at exit
// (node/log_files.h): a writer that ends within the delay never gets one, and its log is
// still shown whole.
TEST(LogFollowerTest, AWriterThatEndsWithinTheWatchDelayGetsNoWatchAndIsShownWhole) {
  testing::TempDir dir;
  std::string path = dir.File("w.log");
  std::ofstream out(path);
  out << "a\nb" << std::flush;
  boost::asio::io_context io;
  std::string console;
  LogFollower follower(io, [&](const std::string& text) { console += text; });
  follower.Follow(path, "[r0] ");
  EXPECT_EQ(console, "[r0] a\n");
  EXPECT_EQ(InotifyMarks(), 0);
  out << "c\nd\n" << std::flush;
  follower.Finish(path);
  RunUntil(io, [&] { return console.find("d\n") != std::string::npos; });
  EXPECT_EQ(console, "[r0] a\n[r0] bc\n[r0] d\n");
  EXPECT_EQ(InotifyMarks(), 0);
}

TEST(LogFollowerTest, AWriterThatRunsOnIsWatchedAfterTheDelayAndStreamedLive) {
  testing::TempDir dir;
  std::string path = dir.File("w.log");
  std::ofstream out(path);
  boost::asio::io_context io;
  std::string console;
  LogFollower follower(io, [&](const std::string& text) { console += text; });
  follower.Follow(path, "> ");
  EXPECT_EQ(InotifyMarks(), 0);
  out << "early\n" << std::flush;  // before the watch: shown when the delay is over
  RunUntil(io, [&] { return InotifyMarks() == 1 && console == "> early\n"; });
  EXPECT_EQ(InotifyMarks(), 1);
  EXPECT_EQ(console, "> early\n");
  out << "late\n" << std::flush;  // through the watch
  RunUntil(io, [&] { return console.find("late") != std::string::npos; });
  EXPECT_EQ(console, "> early\n> late\n");
  follower.Finish(path);
  RunUntil(io, [&] { return InotifyMarks() == 0; });
  EXPECT_EQ(InotifyMarks(), 0);  // the watch goes with its writer
}

}  // namespace
}  // namespace gangrun::node
