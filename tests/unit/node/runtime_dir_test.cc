#include "node/runtime_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace gangrun::node {
namespace {

class RuntimeDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/runtime-dir-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    missing = dir_ + "/missing";
    missing_run = missing + "/run";
  }
  void TearDown() override { rmdir(dir_.c_str()); }
  std::string dir_;
  // Paths under the test's own directory that do not exist (never one outside it).
  std::string missing;
  std::string missing_run;
};

TEST_F(RuntimeDirTest, TheUsersTmpdirComesFirst) {
  EXPECT_EQ(RuntimeDir::BaseFor(dir_.c_str(), "/run/user/0", "/dev/shm"), dir_);
}

TEST_F(RuntimeDirTest, WithoutTmpdirTheUsersRuntimeDirectoryIsUsed) {
  EXPECT_EQ(RuntimeDir::BaseFor(nullptr, dir_.c_str(), missing.c_str()), dir_);
  // One that does not exist (a login session's, gone) is skipped.
  EXPECT_EQ(RuntimeDir::BaseFor(nullptr, missing_run.c_str(), missing.c_str()), "/tmp");
}

TEST_F(RuntimeDirTest, SharedMemoryOnlyWhenItIsATmpfs) {
  // /proc is a directory, but not a tmpfs (nor writable).
  EXPECT_EQ(RuntimeDir::BaseFor(nullptr, nullptr, "/proc"), "/tmp");
  EXPECT_EQ(RuntimeDir::BaseFor(nullptr, nullptr, missing.c_str()), "/tmp");
}

TEST_F(RuntimeDirTest, BasesTooLongForASocketPathOrRelativeAreSkipped) {
  const std::string long_base = "/" + std::string(100, 'x');
  EXPECT_EQ(RuntimeDir::BaseFor(long_base.c_str(), nullptr, missing.c_str()), "/tmp");
  EXPECT_EQ(RuntimeDir::BaseFor("relative", long_base.c_str(), missing.c_str()), "/tmp");
}

TEST_F(RuntimeDirTest, ADirectoryOfItsOwnIsPrivateAndGoesWithEverythingInIt) {
  std::string path;
  {
    auto dir = RuntimeDir::Create();
    ASSERT_TRUE(dir.ok()) << dir.status();
    path = (*dir)->path();
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0700u);
    ASSERT_EQ(mkdir((path + "/flight").c_str(), 0700), 0);
  }
  EXPECT_NE(access(path.c_str(), F_OK), 0) << path << " is still there";
}

}  // namespace
}  // namespace gangrun::node
