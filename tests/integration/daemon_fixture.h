#pragma once
// Daemon mode's test fixture: `gangrun <command>` with the test's report FIFO, a daemon that
// listens, a clean stop, and the launcher behind a worker. Not in an anonymous namespace:
// daemon_test.cc and recovery_test.cc share the suite.

#include <signal.h>

#include <string>
#include <vector>

#include "tests/integration/launcher_fixture.h"

namespace gangrun::testing {

// The id `gangrun submit` named on its console ("gangrun submit: job ID running on ..."); ""
// if it named none.
inline std::string SubmittedJobId(const std::string& stderr_text) {
  const std::string said = "gangrun submit: job ";
  const size_t at = stderr_text.find(said);
  if (at == std::string::npos) return "";
  const size_t from = at + said.size();
  return stderr_text.substr(from, stderr_text.find_first_of(" :\n", from) - from);
}

class DaemonTest : public LauncherTest {
 protected:
  Launched Gangrun(const std::vector<std::string>& args, std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {GangrunBinary()};
    argv.insert(argv.end(), args.begin(), args.end());
    env.push_back("GANGRUN_TEST_READY=" + fifo_.path());
    return Launch(argv, env, dir_.path(), dir_.path());
  }
  // `gangrun scheduler <args>`, once it listens.
  Launched Scheduler(const std::vector<std::string>& args, std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {"scheduler"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto daemon = Gangrun(argv, std::move(env));
    EXPECT_TRUE(WaitForStderr(daemon, "waiting for agents and jobs", std::chrono::seconds(10)))
        << daemon.Stderr();
    return daemon;
  }
  // Stops a long-lived daemon and expects a clean exit.
  void StopDaemon(const Launched& daemon) {
    kill(daemon.pid, SIGTERM);
    EXPECT_EQ(RunToEnd(daemon).code, 0) << daemon.Stderr();
  }
};

// The launcher an agent starts, from one of its workers: worker -> keeper -> launcher.
inline pid_t LauncherOf(pid_t worker) {
  auto parent = [](pid_t pid) {
    const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
    return static_cast<pid_t>(std::stoi(Split(stat.substr(stat.rfind(')') + 2), ' ')[1]));
  };
  return parent(parent(worker));
}

}  // namespace gangrun::testing
