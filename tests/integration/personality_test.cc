// The msrun personality: same binary under the name msrun.

#include <sys/stat.h>

#include "tests/integration/launcher_fixture.h"

namespace gangrun::testing {
namespace {

using std::chrono::seconds;

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

TEST_F(LauncherTest, MsrunRunsTheMindSporeSchedulerProcessAndPrintsItsLines) {
  const int port = FreePortPair();
  auto run = Start({"--worker_num", "2", "--local_worker_num", "2", "--join", "True",
                    "--master_port", std::to_string(port), "--log_dir", "msrun_log"},
                   {"--env", dir_.File("env")}, MsrunBinary());
  EXPECT_EQ(RunToEnd(run).code, 0) << run.Stderr();
  EXPECT_TRUE(Exists(dir_.File("msrun_log/scheduler.log")));
  std::string sched_env = ReadFile(dir_.File("env.-1"));
  EXPECT_NE(sched_env.find("MS_ROLE=MS_SCHED\n"), std::string::npos);
  EXPECT_NE(sched_env.find("RANK_ID=0\n"), std::string::npos);
  std::string worker_env = ReadFile(dir_.File("env.1"));
  EXPECT_NE(worker_env.find("MS_SCHED_PORT=" + std::to_string(port) + "\n"), std::string::npos);
  // gangrun's own scheduler moves to master_port + 1 under msrun.
  EXPECT_NE(worker_env.find("GANGRUN_SCHEDULER=127.0.0.1:" + std::to_string(port + 1) + "\n"),
            std::string::npos);
  EXPECT_NE(run.Stdout().find("Start worker process with rank id:1, log file:msrun_log/"
                              "worker_1.log. Environment variable [RANK_ID=1] is exported.\n"),
            std::string::npos)
      << run.Stdout();
}

TEST_F(LauncherTest, APersonalitysErrorCarriesItsName) {
  for (const auto& [binary, name] :
       {std::pair{GangrunBinary(), "gangrun"}, std::pair{MsrunBinary(), "msrun"},
        std::pair{TorchrunBinary(), "torchrun"}}) {
    auto run = Launch({binary, "--bogus_option", "1", "x"}, {}, dir_.path(), dir_.path());
    EXPECT_EQ(RunToEnd(run).code, 2);
    EXPECT_EQ(run.Stderr().rfind(std::string(name) + ": error: unknown option --bogus_option", 0),
              0u)
        << run.Stderr();
  }
}

TEST_F(LauncherTest, GangrunDoesNotRunTheMindSporeScheduler) {
  auto run = Start({"--worker_num", "1", "--local_worker_num", "1"}, {});
  EXPECT_EQ(RunToEnd(run).code, 0);
  EXPECT_FALSE(Exists(dir_.File("scheduler.log")));
}

TEST_F(LauncherTest, MsrunJoinsFalseByDefault) {
  auto run = Start({"--worker_num", "1", "--local_worker_num", "1"}, {"--hang"}, MsrunBinary());
  EXPECT_EQ(RunToEnd(run).code, 0) << run.Stderr();
  std::string out = run.Stdout();
  size_t at = out.find("supervised by pid ");
  ASSERT_NE(at, std::string::npos) << out;
  pid_t supervisor = std::stoi(out.substr(at + 18));
  auto ready = WaitReady(1);
  ASSERT_EQ(ready.size(), 1u);
  kill(supervisor, SIGKILL);  // even kill -9 of the detached supervisor leaves nothing
  EXPECT_TRUE(WaitGone(ready[0].pid, std::chrono::milliseconds(1000)));
}

TEST_F(LauncherTest, SimulationRunsOneProcessWithoutNetworkVariables) {
  auto run = Start({"--worker_num", "8", "--local_worker_num", "8", "--join", "True", "--sim_level",
                    "1", "--sim_rank_id", "3"},
                   {"--env", dir_.File("env")}, MsrunBinary());
  EXPECT_EQ(RunToEnd(run).code, 0) << run.Stderr();
  std::string env = ReadFile(dir_.File("env.3"));
  EXPECT_NE(env.find("RANK_ID=3\n"), std::string::npos) << env;
  EXPECT_NE(env.find("MS_SIMULATION_LEVEL=1\n"), std::string::npos);
  EXPECT_NE(env.find("RANK_SIZE=8\n"), std::string::npos);
  EXPECT_EQ(env.find("MS_SCHED_HOST"), std::string::npos);
  EXPECT_FALSE(Exists(dir_.File("scheduler.log")));
  EXPECT_FALSE(Exists(dir_.File("worker_0.log")));
}

}  // namespace
}  // namespace gangrun::testing
