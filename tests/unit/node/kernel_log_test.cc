// The kernel's log as a failure's evidence (node/kernel_log.h): /dev/kmsg's records, a text
// file's appended lines since the mark, the bounds, and a log that cannot be read.

#include "node/kernel_log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string_view>

#include "tests/testing/test_util.h"

namespace gangrun::node {
namespace {

void Append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::app) << text;
}

TEST(KernelLogTest, AKmsgRecordOfWarningOrWorseIsItsMessage) {
  EXPECT_EQ(
      KernelLog::KmsgMessage("3,1042,5591234,-;NVRM: Xid (PCI:0000:3b:00): 79, GPU has "
                             "fallen off the bus.\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n"),
      "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.");
  EXPECT_EQ(KernelLog::KmsgMessage("4,7,1,-;warning\n"), "warning");
  EXPECT_EQ(KernelLog::KmsgMessage("12,7,1,-;a user's warning\n"), "a user's warning")
      << "facility 1 (user), level 4";
  EXPECT_EQ(KernelLog::KmsgMessage("6,8,1,-;eth0: link up\n"), "") << "info is noise here";
  EXPECT_EQ(KernelLog::KmsgMessage("no header"), "");
  EXPECT_EQ(KernelLog::KmsgMessage(";no priority"), "");
  EXPECT_EQ(KernelLog::KmsgMessage("x,1;bad priority"), "");
}

TEST(KernelLogTest, ATextLogGivesOnlyTheLinesSinceTheMark) {
  testing::TempDir dir;
  const std::string path = dir.File("kern.log");
  Append(path, "before the generation\n");
  KernelLog log(path);
  log.Mark();
  EXPECT_TRUE(log.Since().empty());
  Append(path, "NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error\nhalf a li");
  EXPECT_EQ(log.Since(), (std::vector<std::string>{
                             "NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error"}));
  Append(path, "ne\n");
  EXPECT_EQ(log.Since().back(), "half a line") << "a line is kept once its newline came";
  EXPECT_EQ(log.Since().size(), 2u) << "asked again, the same lines";
  log.Mark();  // the next generation
  EXPECT_TRUE(log.Since().empty());
}

TEST(KernelLogTest, OnlyTheLastLinesAreKeptEachCut) {
  testing::TempDir dir;
  const std::string path = dir.File("kern.log");
  Append(path, "");
  KernelLog log(path);
  log.Mark();
  for (size_t i = 0; i < KernelLog::kMaxLines + 5; ++i)
    Append(path, "line " + std::to_string(i) + "\n");
  Append(path, std::string(KernelLog::kMaxLineBytes * 3, 'x') + "\n");
  const std::vector<std::string> lines = log.Since();
  ASSERT_EQ(lines.size(), KernelLog::kMaxLines);
  EXPECT_EQ(lines.front(), "line 6");
  EXPECT_EQ(lines.back(), std::string(KernelLog::kMaxLineBytes, 'x'));
}

TEST(KernelLogTest, ALogThatCannotBeReadGivesNothing) {
  KernelLog none("");
  none.Mark();
  EXPECT_TRUE(none.Since().empty());
  KernelLog missing("/nonexistent/kern.log");
  missing.Mark();
  EXPECT_TRUE(missing.Since().empty());
}

// The real /dev/kmsg (readable as root, or where kernel.dmesg_restrict is 0): its records have
// the form KmsgMessage reads, marking goes past what the kernel holds and reading never blocks.
// Nothing is written to it: a fake device error in a real host's log would alarm its
// monitoring.
TEST(KernelLogTest, TheRealKmsgHasTheFormReadAndIsReadWithoutBlocking) {
  const int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(fd, 0) << "/dev/kmsg cannot be read here: " << std::strerror(errno);
  char record[8192];
  size_t records = 0;
  for (ssize_t n; records < 10000 && (n = read(fd, record, sizeof(record))) > 0; ++records) {
    const std::string_view text(record, static_cast<size_t>(n));
    const size_t semicolon = text.find(';');
    ASSERT_NE(semicolon, std::string_view::npos) << text;
    const int level = std::atoi(std::string(text.substr(0, text.find(','))).c_str()) & 7;
    const std::string message(text.substr(semicolon + 1, text.find('\n') - semicolon - 1));
    EXPECT_EQ(KernelLog::KmsgMessage(text), level <= 4 ? message : "") << text;
  }
  close(fd);
  EXPECT_GT(records, 0u) << "the kernel holds no record at all";
  KernelLog log("/dev/kmsg");
  log.Mark();
  for (const std::string& line : log.Since()) EXPECT_LE(line.size(), KernelLog::kMaxLineBytes);
  EXPECT_LE(log.Since().size(), KernelLog::kMaxLines);
}

}  // namespace
}  // namespace gangrun::node
