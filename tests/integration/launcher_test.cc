// The single-host job end to end: exit codes, failure stop, signals, logs, console.

#include <sys/stat.h>

#include <fstream>

#include "common/exit_status.h"
#include "common/net.h"
#include "tests/integration/launcher_fixture.h"

namespace gangrun::testing {
namespace {

using std::chrono::seconds;

int CountLines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

TEST_F(LauncherTest, AllWorkersSucceedingExitsZeroWithCompleteLogs) {
  auto run =
      Start({"--worker_num", "3", "--local_worker_num=3", "--log_dir", "logs"}, {"--lines", "4"});
  EXPECT_EQ(RunToEnd(run).code, 0) << run.Stderr();
  for (int rank = 0; rank < 3; ++rank) {
    std::string log = ReadFile(dir_.File("logs/worker_" + std::to_string(rank) + ".log"));
    EXPECT_EQ(CountLines(log), 4) << log;
    EXPECT_NE(log.find("line 3 of rank " + std::to_string(rank)), std::string::npos);
  }
  struct stat st;
  ASSERT_EQ(stat(dir_.File("logs").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(LauncherTest, FailingRankStopsTheOthersAndGivesItsExitCode) {
  auto run = Start({"--worker_num", "3", "--local_worker_num", "3"},
                   {"--fail-rank", "1", "--exit", "7", "--lines", "2"});
  EXPECT_EQ(RunToEnd(run).code, 7);
  std::string err = run.Stderr();
  EXPECT_NE(err.find("Root cause: rank 1 on host"), std::string::npos) << err;
  EXPECT_NE(err.find("exited with code 7"), std::string::npos) << err;
  EXPECT_NE(err.find("| line 1 of rank 1"), std::string::npos) << err;
}

TEST_F(LauncherTest, RankKilledBySignalGives128PlusSignal) {
  auto run = Start({"--worker_num", "2", "--local_worker_num", "2"},
                   {"--fail-rank", "0", "--signal", "9"});
  common::ExitStatus status = RunToEnd(run);
  EXPECT_EQ(status.code, 137);
  EXPECT_NE(run.Stderr().find("was killed by signal 9 (SIGKILL)"), std::string::npos);
}

class StopSignalTest : public LauncherTest, public ::testing::WithParamInterface<int> {};

TEST_P(StopSignalTest, SignalToTheLauncherStopsEveryWorker) {
  const int sig = GetParam();
  auto run = Start({"--worker_num", "2", "--local_worker_num", "2"}, {"--hang"});
  auto ready = WaitReady(2);
  kill(run.pid, sig);
  EXPECT_EQ(RunToEnd(run).code, 128 + sig);
  for (const auto& r : ready) EXPECT_FALSE(IsAlive(r.pid)) << "rank " << r.rank;
  EXPECT_NE(run.Stderr().find("job stopped: launcher on " + common::Hostname() + " received " +
                              common::SignalName(sig)),
            std::string::npos)
      << run.Stderr();
}

INSTANTIATE_TEST_SUITE_P(Signals, StopSignalTest, ::testing::Values(SIGTERM, SIGINT, SIGHUP));

TEST_F(LauncherTest, WorkerIgnoringSigtermIsKilledAfterTheGracePeriod) {
  auto run = Start({"--worker_num", "2", "--local_worker_num", "2", "--grace_period", "0.5"},
                   {"--ignore-term", "--hang"});
  auto ready = WaitReady(2);
  auto start = std::chrono::steady_clock::now();
  kill(run.pid, SIGTERM);
  EXPECT_EQ(RunToEnd(run).code, 128 + SIGTERM);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  EXPECT_NE(run.Stderr().find("grace period over: SIGKILL"), std::string::npos) << run.Stderr();
  for (const auto& r : ready) EXPECT_FALSE(IsAlive(r.pid));
}

TEST_F(LauncherTest, LogIsCompleteWhenAWorkerCrashes) {
  auto run = Start({"--worker_num", "1", "--local_worker_num", "1", "--tail_worker_log", "5"},
                   {"--lines", "20000", "--abort"});
  EXPECT_EQ(RunToEnd(run).code, 128 + SIGABRT);
  EXPECT_EQ(CountLines(ReadFile(dir_.File("worker_0.log"))), 20000);
  EXPECT_NE(run.Stderr().find("was killed by signal 6 (SIGABRT)"), std::string::npos);
}

TEST_F(LauncherTest, Sigusr1IsForwardedToTheWorkers) {
  auto run = Start({"--worker_num", "2", "--local_worker_num", "2"}, {"--usr1", "--hang"});
  WaitReady(2);
  // A worker can report ready before the launcher has heard of its pid from the keeper.
  ASSERT_TRUE(WaitForStderr(run, "all 2 local process(es) running", seconds(10)));
  kill(run.pid, SIGUSR1);
  auto lines = fifo_.ReadLines(2, seconds(10));
  ASSERT_EQ(lines.size(), 2u);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"usr1 0", "usr1 1"}));
  kill(run.pid, SIGTERM);
  EXPECT_EQ(RunToEnd(run).code, 128 + SIGTERM);
}

TEST_F(LauncherTest, TailWorkerLogShowsTheSelectedRanksWithAPrefix) {
  auto run = Start({"--worker_num", "3", "--local_worker_num", "3", "--tail_worker_log", "1,2",
                    "--log_prefix", "<{rank}/{local_rank}> "},
                   {"--lines", "2"});
  EXPECT_EQ(RunToEnd(run).code, 0);
  std::string out = run.Stdout();
  EXPECT_NE(out.find("<1/1> line 0 of rank 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("<2/2> line 1 of rank 2\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("rank 0"), std::string::npos) << out;
}

TEST_F(LauncherTest, WorkersGetTheirRankEnvironment) {
  const std::string port = std::to_string(FreePortPair());
  auto run = Start(
      {"--worker_num", "2", "--local_worker_num", "2", "--run_id", "job9", "--master_port", port},
      {"--env", dir_.File("env")});
  EXPECT_EQ(RunToEnd(run).code, 0);
  std::string env = ReadFile(dir_.File("env.1"));
  for (const std::string& expected :
       {std::string("RANK=1\n"), std::string("LOCAL_RANK=1\n"), std::string("WORLD_SIZE=2\n"),
        std::string("RANK_ID=1\n"), std::string("DEVICE_ID=1\n"),
        std::string("MS_ROLE=MS_WORKER\n"), "MS_SCHED_PORT=" + port + "\n",
        std::string("GANGRUN_RUN_ID=job9\n"), std::string("TORCHELASTIC_RUN_ID=job9\n"),
        std::string("GANGRUN_GENERATION=1\n"), "GANGRUN_SCHEDULER=127.0.0.1:" + port + "\n",
        std::string("MASTER_ADDR=127.0.0.1\n")}) {
    EXPECT_NE(env.find(expected), std::string::npos) << expected;
  }
  size_t at = env.find("MASTER_PORT=");
  ASSERT_NE(at, std::string::npos);
  int master_port = std::stoi(env.substr(at + 12));
  EXPECT_NE(std::to_string(master_port), port);
  EXPECT_GT(master_port, 0);
  EXPECT_NE(ReadFile(dir_.File("env.0")).find("MASTER_PORT=" + std::to_string(master_port)),
            std::string::npos);
  EXPECT_EQ(env.find("GANGRUN_INTERNAL"), std::string::npos);
}

TEST_F(LauncherTest, BindCoreTrueSetsEachWorkersAffinity) {
  const int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (cpus < 2) GTEST_SKIP() << "needs 2 CPUs";
  auto run = Start({"--worker_num", "2", "--local_worker_num", "2", "--bind_core", "True"},
                   {"--affinity"});
  EXPECT_EQ(RunToEnd(run).code, 0);
  const int avg = cpus / 2;
  auto range = [](int first, int last) {
    return first == last ? std::to_string(first)
                         : std::to_string(first) + "-" + std::to_string(last);
  };
  EXPECT_NE(ReadFile(dir_.File("worker_0.log")).find("cpus " + range(0, avg - 1)),
            std::string::npos);
  EXPECT_NE(ReadFile(dir_.File("worker_1.log")).find("cpus " + range(avg, 2 * avg - 1)),
            std::string::npos);
}

TEST_F(LauncherTest, DryRunPrintsThePlanAndStartsNothing) {
  auto run = Start(
      {"--worker_num", "2", "--local_worker_num", "2", "--dry_run", "True", "--log_dir", "logs"},
      {"--lines", "1"});
  EXPECT_EQ(RunToEnd(run).code, 0);
  std::string out = run.Stdout();
  EXPECT_NE(out.find("rank 1 (local 1)"), std::string::npos) << out;
  EXPECT_NE(out.find("    RANK=1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("log: logs/worker_1.log"), std::string::npos) << out;
  struct stat st;
  EXPECT_NE(stat(dir_.File("logs").c_str(), &st), 0) << "dry run created the log directory";
}

TEST_F(LauncherTest, InvalidInputExitsTwoWithOneLineAndStartsNothing) {
  // Paths under the test's own directory that do not exist (never one outside it).
  const std::string missing = dir_.File("missing");
  const std::vector<std::vector<std::string>> cases = {
      {"--worker_num", "0"},
      {"--worker_num", "2", "--local_worker_num", "3"},
      {"--master_port", "70000"},
      {"--bogus", "1"},
      {"--join", "maybe"},
      {"--worker_num", "x1"},
      {"--rank_table_file", missing + "/table.json"},
      {"--bind_core", "{\"device0\": 5}"},
      {"--master_addr", "no-such-host.invalid"},
      {"--grace_period", "1e10"},
      {"--heartbeat_interval", "1e-300"},
      {"--node_timeout", "1e300"},
      {"--restart_backoff", "1e308"},
      {"--worker_num", "2147483647", "--dry_run", "True"},
      {"--worker_num", "0:4"},
      {"--local_worker_num", "1000000", "--worker_num", "1000000"},
      {"--log_dir", "/proc/gangrun-logs"},
      {"--event_log", missing + "/events.jsonl"},
      {"--bind_core", "{\"device0\": [\"99999\"]}"},
      {"--kv_max_bytes", "10"},
      // A CPU this host does not have: refused at once, not at each rank's spawn.
      {"--bind_numa",
       R"({"bind_config": {"bind_cpu_mode": "cpu"}, "bind_cpu": {"device0": [60000]}})"},
  };
  for (const auto& args : cases) {
    auto run = Start(args, {"--lines", "1"});
    EXPECT_EQ(RunToEnd(run).code, 2) << args[0];
    std::string err = run.Stderr();
    EXPECT_EQ(CountLines(err), 1) << err;
    EXPECT_EQ(err.rfind("gangrun: error: ", 0), 0u) << err;
  }
  EXPECT_TRUE(fifo_.ReadLines(1, std::chrono::milliseconds(0)).empty());
  struct stat st;
  EXPECT_NE(stat(dir_.File("worker_0.log").c_str(), &st), 0);
}

TEST_F(LauncherTest, MsrunDefaultJoinFalseCreatesANestedLogDirectory) {
  auto run = Start({"--worker_num", "1", "--local_worker_num", "1", "--log_dir", "a/b/c"},
                   {"--lines", "1"}, MsrunBinary());
  EXPECT_EQ(RunToEnd(run).code, 0) << run.Stderr();
  EXPECT_EQ(WaitReady(1).size(), 1u);
  struct stat st;
  EXPECT_EQ(stat(dir_.File("a/b/c/gangrun.log").c_str(), &st), 0) << run.Stderr();
}

TEST_F(LauncherTest, TheKeepersEntryPointRefusesADescriptorThatIsNotALaunchersSocket) {
  // stdout is a file here, fd 99 is closed: one line, exit 2, no wait for ever.
  for (const char* fd : {"1", "99"}) {
    auto run = Launch({GangrunBinary(), "__keeper", fd}, {}, dir_.path(), dir_.path());
    EXPECT_EQ(RunToEnd(run).code, 2) << fd;
    EXPECT_EQ(
        run.Stderr().rfind("gangrun: error: the process keeper is started by the launcher", 0), 0u)
        << run.Stderr();
  }
}

TEST_F(LauncherTest, MissingTaskScriptExitsTwo) {
  auto run = Launch(
      {GangrunBinary(), "--worker_num", "1", "--local_worker_num", "1", dir_.File("absent.py")}, {},
      dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(run).code, 2);
  EXPECT_NE(run.Stderr().find("absent.py does not exist"), std::string::npos) << run.Stderr();
  auto none = Launch({GangrunBinary()}, {}, dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(none).code, 2);
  EXPECT_NE(none.Stderr().find("missing task script"), std::string::npos);
}

TEST_F(LauncherTest, PythonScriptRunsUnderPython) {
  std::ofstream(dir_.File("hello.py")) << "import os\nprint('hello from', os.environ['RANK'])\n";
  auto run = Launch({GangrunBinary(), "--worker_num", "2", "--local_worker_num", "2", "hello.py"},
                    {}, dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(run).code, 0) << run.Stderr();
  EXPECT_EQ(ReadFile(dir_.File("worker_1.log")), "hello from 1\n");
}

TEST_F(LauncherTest, FailedGenerationIsRestartedWithinTheBudget) {
  auto run = Start({"--worker_num", "2", "--local_worker_num", "2", "--max_restarts", "2",
                    "--restart_backoff", "0.05,0.2"},
                   {"--fail-rank", "1", "--exit", "3", "--only-generation", "1", "--lines", "1",
                    "--env", dir_.File("env")});
  EXPECT_EQ(RunToEnd(run).code, 0) << run.Stderr();
  std::string log = ReadFile(dir_.File("worker_1.log"));
  EXPECT_EQ(log,
            "line 0 of rank 1\n"
            "==== gangrun: generation 2 (restart 1 of 2) ====\n"
            "line 0 of rank 1\n");
  std::string env = ReadFile(dir_.File("env.0"));
  EXPECT_NE(env.find("TORCHELASTIC_RESTART_COUNT=1\n"), std::string::npos);
  EXPECT_NE(env.find("GANGRUN_GENERATION=2\n"), std::string::npos);
  EXPECT_NE(run.Stderr().find("restarting in 50 ms"), std::string::npos) << run.Stderr();
}

TEST_F(LauncherTest, SpentRestartBudgetEndsWithTheFailingRanksCode) {
  auto run = Start({"--worker_num", "2", "--local_worker_num", "2", "--max_restarts", "2",
                    "--restart_backoff", "0.01"},
                   {"--fail-rank", "0", "--exit", "6"});
  EXPECT_EQ(RunToEnd(run).code, 6) << run.Stderr();
  std::string err = run.Stderr();
  EXPECT_NE(err.find("generation 3: 1 node(s), 2 worker(s) (restart 2 of 2)"), std::string::npos)
      << err;
  EXPECT_EQ(err.find("generation 4"), std::string::npos);
  EXPECT_NE(err.find("Root cause: rank 0"), std::string::npos);
}

TEST_F(LauncherTest, JoinFalseReturnsOnceWorkersRunAndKeepsSupervising) {
  auto run = Start({"--worker_num", "2", "--local_worker_num", "2", "--join", "False"}, {"--hang"});
  EXPECT_EQ(RunToEnd(run).code, 0) << run.Stderr();
  std::string out = run.Stdout();
  size_t at = out.find("supervised by pid ");
  ASSERT_NE(at, std::string::npos) << out;
  pid_t supervisor = std::stoi(out.substr(at + 18));
  auto ready = WaitReady(2);
  EXPECT_TRUE(IsAlive(supervisor));
  // The supervisor keeps the guarantees: stopping it stops the job.
  kill(supervisor, SIGTERM);
  EXPECT_TRUE(WaitGone(supervisor, seconds(20)));
  for (const auto& r : ready) EXPECT_TRUE(WaitGone(r.pid, seconds(1)));
  EXPECT_NE(ReadFile(dir_.File("gangrun.log")).find("received SIGTERM"), std::string::npos);
}

}  // namespace
}  // namespace gangrun::testing

namespace gangrun::testing {
namespace {

// A TCP listener on a free loopback port that answers anything with an HTTP/1.1 error, as a
// web server on the master port would.
class ForeignListener {
 public:
  explicit ForeignListener(const std::string& dir) {
    port = FreePort();
    program = Launch({"/usr/bin/python3", "-c",
                      "import socket,sys\n"
                      "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
                      "s.bind(('127.0.0.1'," +
                          port +
                          ")); s.listen(16)\n"
                          "print('listening', flush=True)\n"
                          "while True:\n"
                          "  c,_=s.accept(); c.recv(64)\n"
                          "  c.sendall(b'HTTP/1.1 400 Bad Request\\r\\n\\r\\n'); c.close()\n"},
                     {}, dir, dir);
    EXPECT_TRUE(WaitForStdout(program, "listening", std::chrono::seconds(20)));
  }
  ~ForeignListener() {
    kill(program.pid, SIGKILL);
    WaitExit(program.pid, std::chrono::seconds(10));
  }
  std::string port;
  Launched program;
};

TEST_F(LauncherTest, AForeignProgramOnTheMasterPortIsNamedAtOnce) {
  ForeignListener foreign(dir_.path());
  // A job of two nodes: its master's port is the other program's.
  const auto started = std::chrono::steady_clock::now();
  auto run = Start({"--worker_num", "2", "--local_worker_num", "1", "--master_port", foreign.port,
                    "--node_rank", "0"},
                   {});
  EXPECT_EQ(RunToEnd(run).code, 3) << run.Stderr();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(6));
  EXPECT_NE(run.Stderr().find("another program, not a gangrun scheduler, listens on 127.0.0.1:" +
                              foreign.port),
            std::string::npos)
      << run.Stderr();
  EXPECT_EQ(run.Stderr().find("joining it as a node"), std::string::npos) << run.Stderr();
}

TEST_F(LauncherTest, ASingleHostJobOnATakenPortSaysWhichPortItTook) {
  ForeignListener foreign(dir_.path());
  auto run =
      Start({"--worker_num", "1", "--local_worker_num", "1", "--master_port", foreign.port}, {});
  EXPECT_EQ(RunToEnd(run).code, 0) << run.Stderr();
  EXPECT_NE(
      run.Stderr().find("port " + foreign.port + " is taken; the scheduler listens on 127.0.0.1:"),
      std::string::npos)
      << run.Stderr();
  EXPECT_NE(run.Stderr().find("instead (gangrun status --master 127.0.0.1:"), std::string::npos);
}

}  // namespace
}  // namespace gangrun::testing
