// A root launcher and another local user (a uid of its own, acting through setpriv): log
// directories and files, $TMPDIR, and the runtime directory after kill -9.

#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "tests/integration/launcher_fixture.h"

namespace gangrun::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kOtherUser = 54321;  // no passwd entry needed: a uid is a user

// A directory of the other user's with `mode`, made (as root) as they would have made it.
void MakeTheirDirectory(const std::string& path, mode_t mode) {
  ASSERT_EQ(mkdir(path.c_str(), 0700), 0) << path;
  ASSERT_EQ(chown(path.c_str(), kOtherUser, kOtherUser), 0);
  ASSERT_EQ(chmod(path.c_str(), mode), 0);
}

// Runs `command` with /bin/sh as the other user; true on exit status 0.
bool AsOtherUser(const std::string& command) {
  const std::string line = "setpriv --reuid " + std::to_string(kOtherUser) + " --regid " +
                           std::to_string(kOtherUser) + " --clear-groups sh -c '" + command +
                           "' >/dev/null 2>&1";
  return std::system(line.c_str()) == 0;
}

// Waits until `path` is removed (inotify); true if it is gone within `timeout`.
bool WaitRemoved(const std::string& path, milliseconds timeout) {
  int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  inotify_add_watch(fd, path.c_str(), IN_DELETE_SELF);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (access(path.c_str(), F_OK) == 0) {
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd pfd{fd, POLLIN, 0};
    poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 100)));
  }
  close(fd);
  return access(path.c_str(), F_OK) != 0;
}

class LocalFilesTest : public LauncherTest {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "these tests play a root launcher against another user: run "
                                "them as root (as CI does)";
    // The other user reaches the test's directory.
    chmod(dir_.path().c_str(), 0755);
  }
  Launched Job(const std::vector<std::string>& extra, const std::vector<std::string>& env = {}) {
    std::vector<std::string> argv = {
        GangrunBinary(), "--worker_num", "1", "--local_worker_num", "1",
        "--master_port", FreePort()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), {TestWorkerBinary(), "--lines", "2"});
    std::vector<std::string> all_env = {"GANGRUN_TEST_READY=" + fifo_.path()};
    all_env.insert(all_env.end(), env.begin(), env.end());
    return Launch(argv, all_env, dir_.path(), dir_.path());
  }
};

TEST_F(LocalFilesTest, ALogDirectoryOtherUsersCanWriteIsRefused) {
  const std::string shared = dir_.File("shared_logs");
  MakeTheirDirectory(shared, 0777);
  auto job = Job({"--log_dir", shared});
  EXPECT_EQ(RunToEnd(job).code, 2) << job.Stderr();
  EXPECT_NE(job.Stderr().find("--log_dir " + shared + " is writable by other users"),
            std::string::npos)
      << job.Stderr();
  const std::string err = job.Stderr();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  // Nor inside it: a log directory to be made there could be swapped.
  auto nested = Job({"--log_dir", shared + "/mine"});
  EXPECT_EQ(RunToEnd(nested).code, 2) << nested.Stderr();
  EXPECT_EQ(access((shared + "/mine").c_str(), F_OK), -1);
}

TEST_F(LocalFilesTest, APlantedLinkOrForeignLogFileIsNeverWrittenThrough) {
  // A directory of root's that the other user's group may write (a team's shared logs): the
  // kernel's protections for sticky directories do not apply, gangrun's own checks do.
  const std::string logs = dir_.File("logs");
  ASSERT_EQ(mkdir(logs.c_str(), 0775), 0);
  ASSERT_EQ(chown(logs.c_str(), 0, kOtherUser), 0);
  ASSERT_EQ(chmod(logs.c_str(), 0775), 0);
  const std::string secret = dir_.File("secret");
  std::ofstream(secret) << "root's own\n";
  chmod(secret.c_str(), 0600);
  ASSERT_TRUE(AsOtherUser("ln -s " + secret + " " + logs + "/worker_0.log"));
  auto linked = Job({"--log_dir", logs});
  EXPECT_NE(RunToEnd(linked).code, 0) << linked.Stderr();
  EXPECT_NE(linked.Stderr().find("is a symbolic link: refusing to write through it"),
            std::string::npos)
      << linked.Stderr();
  EXPECT_EQ(ReadFile(secret), "root's own\n");
  // A regular file the other user made there is not ours either.
  unlink((logs + "/worker_0.log").c_str());
  ASSERT_TRUE(AsOtherUser("echo theirs > " + logs + "/worker_0.log && chmod 666 " + logs +
                          "/worker_0.log"));
  auto foreign = Job({"--log_dir", logs});
  EXPECT_NE(RunToEnd(foreign).code, 0) << foreign.Stderr();
  EXPECT_NE(foreign.Stderr().find("is not a file of this user's"), std::string::npos)
      << foreign.Stderr();
  EXPECT_EQ(ReadFile(logs + "/worker_0.log"), "theirs\n");
}

TEST_F(LocalFilesTest, AnUnsafeTmpdirIsRefused) {
  const std::string evil = dir_.File("evil_tmp");
  MakeTheirDirectory(evil, 0777);
  auto job = Job({}, {"TMPDIR=" + evil});
  EXPECT_EQ(RunToEnd(job).code, 2) << job.Stderr();
  EXPECT_NE(job.Stderr().find("$TMPDIR " + evil + " is not safe"), std::string::npos)
      << job.Stderr();
  // A directory of the other user's, even one only they can write, is not safe for root.
  const std::string theirs = dir_.File("their_tmp");
  MakeTheirDirectory(theirs, 0700);
  auto other = Job({}, {"TMPDIR=" + theirs});
  EXPECT_EQ(RunToEnd(other).code, 2) << other.Stderr();
}

TEST_F(LocalFilesTest, TheRuntimeDirectoryGoesWithTheKeeperAfterKill9) {
  std::vector<std::string> argv = {
      GangrunBinary(), "--worker_num",     "1",     "--local_worker_num", "1",     "--master_port",
      FreePort(),      TestWorkerBinary(), "--env", dir_.File("env"),     "--hang"};
  auto job = Launch(argv, {"GANGRUN_TEST_READY=" + fifo_.path()}, dir_.path(), dir_.path());
  auto ready = WaitReady(1);
  ASSERT_EQ(ready.size(), 1u);
  const std::string env = ReadFile(dir_.File("env.0"));
  const size_t at = env.find("GANGRUN_PROGRESS=");
  ASSERT_NE(at, std::string::npos) << env;
  const std::string socket = env.substr(at + 17, env.find('\n', at) - at - 17);
  const std::string runtime = socket.substr(0, socket.rfind('/'));
  ASSERT_EQ(access(runtime.c_str(), F_OK), 0) << runtime;
  kill(job.pid, SIGKILL);
  RunToEnd(job);
  EXPECT_TRUE(WaitGone(ready[0].pid, seconds(10)));
  EXPECT_TRUE(WaitRemoved(runtime, seconds(10))) << runtime << " outlived the launcher";
}

}  // namespace
}  // namespace gangrun::testing
