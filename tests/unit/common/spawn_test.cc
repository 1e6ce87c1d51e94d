#include "common/spawn.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/testing/process_test.h"

namespace gangrun::common {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WaitExit;

class SpawnTest : public testing::ProcessTest {
 protected:
  // Runs `script` under /bin/sh with stdout to a file; returns (exit status, output).
  std::pair<ExitStatus, std::string> Run(const std::string& script, SpawnOptions options = {}) {
    std::string out_path = dir.File("out");
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    options.exec_path = "/bin/sh";
    options.argv = {"sh", "-c", script};
    if (options.env.empty()) options.env = {"PATH=/usr/bin:/bin"};
    options.fds[1] = out;
    auto pid = Spawn(options);
    close(out);
    EXPECT_TRUE(pid.ok()) << pid.status();
    auto status = WaitExit(*pid, std::chrono::seconds(10));
    EXPECT_TRUE(status.has_value());
    return {*status, ReadFile(out_path)};
  }
  TempDir dir;
};

TEST_F(SpawnTest, ChildLeadsItsOwnProcessGroup) {
  auto [status, out] = Run("echo $$ $(ps -o pgid= -p $$)");
  ASSERT_TRUE(status.success());
  auto fields = testing::Split(out, ' ');
  ASSERT_EQ(fields.size(), 2u);
  EXPECT_EQ(std::stoi(fields[0]), std::stoi(fields[1]));
}

TEST_F(SpawnTest, EnvironmentIsExactlyTheGivenOne) {
  SpawnOptions options;
  options.env = {"PATH=/usr/bin:/bin", "ONLY=this"};
  auto [status, out] = Run("echo $ONLY-${HOME:-unset}", options);
  EXPECT_EQ(out, "this-unset\n");
}

// An ignored signal survives exec: the child sets every action back to the default unless the
// caller says they already are (the process keeper's spawns).
TEST_F(SpawnTest, IgnoredSignalsAreResetUnlessTheCallerSaysTheyAreDefault) {
  struct sigaction ignore = {}, old = {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGUSR2, &ignore, &old);
  const std::string script = "grep SigIgn /proc/self/status";
  auto [reset_status, reset] = Run(script);
  SpawnOptions trusted;
  trusted.signal_actions_are_default = true;
  auto [kept_status, kept] = Run(script, trusted);
  sigaction(SIGUSR2, &old, nullptr);
  auto ignored = [](const std::string& line) {
    const uint64_t mask = std::stoull(line.substr(line.find(':') + 1), nullptr, 16);
    return (mask >> (SIGUSR2 - 1)) & 1;
  };
  ASSERT_TRUE(reset_status.success() && kept_status.success()) << reset << kept;
  EXPECT_EQ(ignored(reset), 0u) << reset;
  EXPECT_EQ(ignored(kept), 1u) << kept;
}

TEST_F(SpawnTest, OnlyStandardDescriptorsAreInherited) {
  int leaked = open("/dev/null", O_RDONLY);  // deliberately without O_CLOEXEC
  auto [status, out] = Run("ls /proc/self/fd | wc -l");
  close(leaked);
  // 0, 1, 2 and the fd ls itself opens for the directory.
  EXPECT_EQ(std::stoi(out), 4);
}

TEST_F(SpawnTest, WorkingDirectoryAndAffinityAreApplied) {
  SpawnOptions options;
  options.cwd = dir.path();
  options.cpus = {0};
  auto [status, out] = Run("pwd; grep Cpus_allowed_list /proc/self/status | cut -f2", options);
  EXPECT_EQ(out, dir.path() + "\n0\n");
}

TEST_F(SpawnTest, MemoryIsBoundToTheGivenNumaNodes) {
  SpawnOptions options;
  options.memory_nodes = {0};
  // numa_maps names each mapping's policy: "bind:0" under MPOL_BIND to node 0.
  auto [status, out] = Run("grep -c ' bind:0 ' /proc/self/numa_maps", options);
  EXPECT_GT(std::stoi(out), 0) << out;
  auto [plain_status, plain] = Run("grep -c ' bind:' /proc/self/numa_maps");
  EXPECT_EQ(std::stoi(plain), 0) << plain;
  options.memory_nodes = {5000};
  options.exec_path = "/bin/true";
  EXPECT_FALSE(Spawn(options).ok());
}

TEST_F(SpawnTest, ExitCodesAndSignalsAreDistinct) {
  EXPECT_EQ(Run("exit 3").first.code, 3);
  ExitStatus killed = Run("kill -9 $$").first;
  EXPECT_TRUE(killed.signaled);
  EXPECT_EQ(killed.signal, 9);
  EXPECT_EQ(killed.ShellCode(), 137);
}

TEST_F(SpawnTest, MissingProgramIsAnErrorAndLeavesNoZombie) {
  SpawnOptions options;
  options.exec_path = dir.File("does-not-exist");
  options.argv = {"x"};
  auto pid = Spawn(options);
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(std::string(pid.status().message()).find("execve"), std::string::npos);
}

TEST(FindExecutableTest, SearchesPath) {
  TempDir dir;  // an empty directory first in the path: skipped
  auto sh = FindExecutable("sh", dir.File("missing") + ":" + dir.path() + ":/bin");
  ASSERT_TRUE(sh.ok());
  EXPECT_EQ(*sh, "/bin/sh");
  EXPECT_FALSE(FindExecutable("no-such-program-xyz", "/bin").ok());
}

}  // namespace
}  // namespace gangrun::common
