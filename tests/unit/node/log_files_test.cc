#include "node/log_files.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/testing/test_util.h"

namespace gangrun::node {
namespace {

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
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (console.find("two") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    io.run_one_for(std::chrono::milliseconds(100));
  }
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

}  // namespace
}  // namespace gangrun::node
