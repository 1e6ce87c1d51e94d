// Daemon mode (gangrun scheduler / agent / submit), systemd readiness, and gangrun as PID 1.

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "common/net.h"
#include "tests/integration/daemon_fixture.h"

namespace gangrun::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A unix datagram socket standing in for systemd's NOTIFY_SOCKET.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
    bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  }
  ~NotifySocket() { close(fd_); }
  const std::string& path() const { return path_; }
  // The next message, or "" after `timeout`.
  std::string Next(milliseconds timeout) {
    timeval tv{static_cast<time_t>(timeout.count() / 1000),
               static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[4096];
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }

 private:
  std::string path_;
  int fd_ = -1;
};

TEST_F(DaemonTest, TwoAgentsRunTwoConsecutiveJobsWithoutNewDaemons) {
  const std::string master = "127.0.0.1:" + FreePort();
  NotifySocket notify(dir_.File("notify"));
  auto scheduler = Gangrun({"scheduler", "--listen", master, "--token", "s3cret"},
                           {"NOTIFY_SOCKET=" + notify.path()});
  // Ready only once it listens.
  EXPECT_EQ(notify.Next(seconds(10)).rfind("READY=1", 0), 0u);
  auto agent_a = Gangrun({"agent", "--master", master, "--slots", "2", "--name", "agent-a"},
                         {"GANGRUN_TOKEN=s3cret"});
  auto agent_b = Gangrun({"agent", "--master", master, "--slots", "2", "--name", "agent-b"},
                         {"GANGRUN_TOKEN=s3cret"});

  // Job 1 succeeds on both agents, and every rank's output comes back to the submitter.
  auto first = Gangrun({"submit", "--master", master, "--token", "s3cret", "--worker_num", "4",
                        TestWorkerBinary(), "--lines", "1", "--env", dir_.File("env")});
  EXPECT_EQ(RunToEnd(first).code, 0) << first.Stderr();
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(first.Stdout().find("line 0 of rank " + std::to_string(rank)), std::string::npos)
        << first.Stdout();
    std::string env = ReadFile(dir_.File("env." + std::to_string(rank)));
    EXPECT_NE(env.find("\nWORLD_SIZE=4\n"), std::string::npos);
  }
  std::set<std::string> agents;
  for (const char* name : {"agent-a", "agent-b"}) {
    if (first.Stderr().find(name) != std::string::npos) agents.insert(name);
  }
  EXPECT_EQ(agents.size(), 2u) << first.Stderr();

  // Job 2 fails on rank 1: the submitter exits with its code; the agents stay up.
  auto second =
      Gangrun({"submit", "--master", master, "--token", "s3cret", "--worker_num", "4",
               "--local_worker_num", "2", TestWorkerBinary(), "--fail-rank", "1", "--exit", "9"});
  EXPECT_EQ(RunToEnd(second).code, 9) << second.Stderr();
  EXPECT_NE(second.Stderr().find("Root cause: rank 1"), std::string::npos) << second.Stderr();
  EXPECT_EQ(kill(agent_a.pid, 0), 0);
  EXPECT_EQ(kill(agent_b.pid, 0), 0);

  // The daemon's status lists both agents, idle again.
  auto status = Gangrun({"status", "--master", master, "--token", "s3cret"});
  EXPECT_EQ(RunToEnd(status).code, 0);
  EXPECT_NE(status.Stdout().find("agents 2  jobs 0 running or waiting  2 submitted"),
            std::string::npos)
      << status.Stdout();
  // A wrong token is refused with exit code 3.
  auto refused = Gangrun(
      {"submit", "--master", master, "--token", "wrong", "--worker_num", "1", TestWorkerBinary()});
  EXPECT_EQ(RunToEnd(refused).code, 3) << refused.Stderr();

  StopDaemon(agent_a);
  StopDaemon(agent_b);
  StopDaemon(scheduler);
}

TEST_F(DaemonTest, TheExportedEnvironmentReachesTheWorkersButNeverTheLauncher) {
  const std::string master = "127.0.0.1:" + FreePort();
  auto scheduler = Scheduler({"--listen", master});
  auto agent = Gangrun({"agent", "--master", master, "--slots", "1"});
  auto job = Gangrun({"submit", "--master", master, "--worker_num", "1", TestWorkerBinary(),
                      "--env", dir_.File("env"), "--hang"},
                     {"LD_PRELOAD=/nonexistent/gangrun-test.so", "SUBMITTER_MARK=1"});
  auto ready = WaitReady(1);
  ASSERT_EQ(ready.size(), 1u);
  const std::string worker_env = ReadFile(dir_.File("env.0"));
  EXPECT_NE(worker_env.find("\nSUBMITTER_MARK=1\n"), std::string::npos) << worker_env;
  EXPECT_NE(worker_env.find("\nLD_PRELOAD=/nonexistent/gangrun-test.so\n"), std::string::npos);
  std::string launcher_env =
      ReadFile("/proc/" + std::to_string(LauncherOf(ready[0].pid)) + "/environ");
  std::replace(launcher_env.begin(), launcher_env.end(), '\0', '\n');
  EXPECT_EQ(launcher_env.find("SUBMITTER_MARK"), std::string::npos) << launcher_env;
  EXPECT_EQ(launcher_env.find("LD_PRELOAD"), std::string::npos) << launcher_env;
  kill(job.pid, SIGTERM);
  RunToEnd(job);
  StopDaemon(agent);
  StopDaemon(scheduler);
}

TEST_F(DaemonTest, JobsRunAsTheUserTheAgentIsGiven) {
  ASSERT_EQ(geteuid(), 0u) << "run as root, as CI does";
  const std::string master = "127.0.0.1:" + FreePort();
  // The other user reaches the test's directory, its FIFO and a directory of its own.
  chmod(dir_.path().c_str(), 0755);
  chmod(fifo_.path().c_str(), 0666);
  const std::string out = dir_.File("out");
  ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
  ASSERT_EQ(chown(out.c_str(), 65534, 65534), 0);  // nobody
  auto scheduler = Scheduler({"--listen", master});
  auto agent = Gangrun({"agent", "--master", master, "--slots", "1", "--run_as", "nobody",
                        "--log_root", dir_.File("logs")});
  ASSERT_TRUE(WaitForStderr(agent, "jobs run as nobody (uid 65534)", seconds(10)))
      << agent.Stderr();
  auto job = Gangrun({"submit", "--master", master, "--worker_num", "1", TestWorkerBinary(),
                      "--env", out + "/env", "--hang"});
  auto ready = WaitReady(1);
  ASSERT_EQ(ready.size(), 1u) << job.Stderr();
  for (pid_t pid : {ready[0].pid, LauncherOf(ready[0].pid)}) {
    const std::string status = ReadFile("/proc/" + std::to_string(pid) + "/status");
    EXPECT_NE(status.find("\nUid:\t65534\t65534\t65534\t65534\n"), std::string::npos) << status;
  }
  EXPECT_NE(ReadFile(out + "/env.0").find("\nUSER=nobody\n"), std::string::npos);
  kill(job.pid, SIGTERM);
  RunToEnd(job);
  StopDaemon(agent);
  StopDaemon(scheduler);
  // A user that does not exist is one clear line.
  auto bad = Gangrun({"agent", "--master", master, "--run_as", "no-such-user-here"});
  EXPECT_EQ(RunToEnd(bad).code, 2) << bad.Stderr();
  EXPECT_NE(bad.Stderr().find("--run_as: no user 'no-such-user-here'"), std::string::npos);
}

TEST_F(DaemonTest, ASecondAgentWithTheSameNameIsRefused) {
  const std::string master = "127.0.0.1:" + FreePort();
  auto scheduler = Scheduler({"--listen", master});
  auto first = Gangrun({"agent", "--master", master, "--name", "twin"});
  ASSERT_TRUE(WaitForStderr(scheduler, "agent 1 'twin'", seconds(10))) << scheduler.Stderr();
  auto second = Gangrun({"agent", "--master", master, "--name", "twin"});
  EXPECT_EQ(RunToEnd(second).code, 3) << second.Stderr();
  EXPECT_NE(second.Stderr().find("an agent named 'twin' is already registered"), std::string::npos)
      << second.Stderr();
  StopDaemon(first);
  StopDaemon(scheduler);
}

TEST_F(DaemonTest, APauseOfTheDaemonShorterThanTheNodeTimeoutCostsNothing) {
  const std::string master = "127.0.0.1:" + FreePort();
  auto scheduler = Scheduler({"--listen", master});
  auto agent = Gangrun({"agent", "--master", master, "--slots", "2"});
  auto job = Gangrun({"submit", "--master", master, "--worker_num", "2", "--node_timeout", "3",
                      "--heartbeat_interval", "0.5", TestWorkerBinary(), "--run-ms", "5000"});
  ASSERT_EQ(WaitReady(2).size(), 2u);
  // What a VM pause or a swap storm looks like, for 90% of the node timeout (launchers used
  // to give up at node_timeout - heartbeat_interval, 2.5 s here).
  kill(scheduler.pid, SIGSTOP);
  EXPECT_FALSE(WaitExit(job.pid, milliseconds(2700)).has_value()) << job.Stderr();
  kill(scheduler.pid, SIGCONT);
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr();
  StopDaemon(agent);
  StopDaemon(scheduler);
}

TEST_F(DaemonTest, StopEndsASubmittedJobAndAgentStopKillsItsWorkers) {
  const std::string master = "127.0.0.1:" + FreePort();
  auto scheduler = Scheduler({"--listen", master});
  NotifySocket notify(dir_.File("notify"));
  // Options from the environment, as a systemd EnvironmentFile gives them.
  auto agent = Gangrun(
      {"agent"}, {"NOTIFY_SOCKET=" + notify.path(), "GANGRUN_MASTER=" + master, "GANGRUN_SLOTS=2"});
  // Ready only once registered.
  EXPECT_EQ(notify.Next(seconds(10)).rfind("READY=1", 0), 0u);
  auto job =
      Gangrun({"submit", "--master", master, "--worker_num", "2", TestWorkerBinary(), "--hang"});
  auto ready = WaitReady(2);
  ASSERT_EQ(ready.size(), 2u);
  auto stop = Gangrun({"stop", "--master", master});
  EXPECT_EQ(RunToEnd(stop).code, 0) << stop.Stderr();
  EXPECT_EQ(RunToEnd(job).code, 128 + SIGTERM) << job.Stderr();
  for (const auto& r : ready) EXPECT_TRUE(WaitGone(r.pid, seconds(5)));

  // SIGINT to the submitter stops its job (exit 130 as a one-shot launch would).
  auto interrupted =
      Gangrun({"submit", "--master", master, "--worker_num", "2", TestWorkerBinary(), "--hang"});
  ready = WaitReady(2);
  ASSERT_EQ(ready.size(), 2u);
  kill(interrupted.pid, SIGINT);
  EXPECT_EQ(RunToEnd(interrupted).code, 128 + SIGINT) << interrupted.Stderr();
  for (const auto& r : ready) EXPECT_TRUE(WaitGone(r.pid, seconds(5)));

  // A job running when its agent is told to stop: the agent stops it and exits; no worker
  // outlives the agent.
  auto doomed =
      Gangrun({"submit", "--master", master, "--worker_num", "2", TestWorkerBinary(), "--hang"});
  ready = WaitReady(2);
  ASSERT_EQ(ready.size(), 2u);
  StopDaemon(agent);
  for (const auto& r : ready) EXPECT_TRUE(WaitGone(r.pid, seconds(5)));
  EXPECT_NE(RunToEnd(doomed).code, 0);
  StopDaemon(scheduler);
}

TEST_F(DaemonTest, StacksAndLogsOfASubmittedJobComeThroughTheDaemon) {
  const std::string master = "127.0.0.1:" + FreePort();
  auto scheduler = Scheduler({"--listen", master});
  auto agent = Gangrun({"agent", "--master", master, "--slots", "2"});
  auto job = Gangrun({"submit", "--master", master, "--worker_num", "2", TestWorkerBinary(),
                      "--lines", "3", "--hang"});
  ASSERT_EQ(WaitReady(2).size(), 2u);
  // Its logs through the daemon: every rank's lines, prefixed.
  auto logs = Gangrun({"logs", "--master", master, "--rank", "1"});
  ASSERT_EQ(RunToEnd(logs).code, 0) << logs.Stderr();
  EXPECT_NE(logs.Stdout().find(":1] line 2 of rank 1"), std::string::npos) << logs.Stdout();
  // Its only job, then by its id; an unknown id is named.
  auto stacks = Gangrun({"stacks", "--master", master});
  ASSERT_EQ(RunToEnd(stacks).code, 0) << stacks.Stderr();
  EXPECT_NE(stacks.Stdout().find("--- rank 0 (pid "), std::string::npos) << stacks.Stdout();
  EXPECT_NE(stacks.Stdout().find("--- rank 1 (pid "), std::string::npos) << stacks.Stdout();
  auto status = Gangrun({"status", "--master", master, "--json"});
  ASSERT_EQ(RunToEnd(status).code, 0);
  const std::string text = status.Stdout();
  const size_t at = text.find("\"job_id\": \"");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string id = text.substr(at + 11, text.find('"', at + 11) - at - 11);
  auto by_id = Gangrun({"stacks", "--master", master, "--job", id, "--rank", "1", "--json"});
  ASSERT_EQ(RunToEnd(by_id).code, 0) << by_id.Stderr();
  EXPECT_NE(by_id.Stdout().find("\"rank\": 1"), std::string::npos) << by_id.Stdout();
  auto unknown = Gangrun({"stacks", "--master", master, "--job", "nosuch"});
  EXPECT_NE(RunToEnd(unknown).code, 0);
  EXPECT_NE(unknown.Stderr().find("no running job 'nosuch'"), std::string::npos)
      << unknown.Stderr();
  // The job went on: it is still there to be stopped.
  auto stop = Gangrun({"stop", "--master", master});
  EXPECT_EQ(RunToEnd(stop).code, 0) << stop.Stderr();
  EXPECT_EQ(RunToEnd(job).code, 128 + SIGTERM) << job.Stderr();
  StopDaemon(agent);
  StopDaemon(scheduler);
}

TEST_F(DaemonTest, SubmitWaitsForSlotsAndGivesUpAfterTheClusterTimeout) {
  const std::string master = "127.0.0.1:" + FreePort();
  auto scheduler = Scheduler({"--listen", master});
  auto job = Gangrun({"submit", "--master", master, "--worker_num", "2", "--cluster_time_out", "1",
                      TestWorkerBinary()});
  EXPECT_EQ(RunToEnd(job).code, 3) << job.Stderr();
  EXPECT_NE(job.Stderr().find("waiting for agents: the job needs 2 worker slots, more than the "
                              "0 that the 0 registered agent(s) have in all"),
            std::string::npos)
      << job.Stderr();
  auto bad = Gangrun(
      {"submit", "--master", master, "--worker_num", "2", "--node_rank", "1", TestWorkerBinary()});
  EXPECT_EQ(RunToEnd(bad).code, 2);
  EXPECT_NE(bad.Stderr().find("--node_rank is chosen by the daemon"), std::string::npos);
  StopDaemon(scheduler);
}

TEST_F(DaemonTest, AgentsRegisterAgainWhenTheDaemonRestarts) {
  const std::string master = "127.0.0.1:" + FreePort();
  auto first = Scheduler({"--listen", master});
  auto agent = Gangrun({"agent", "--master", master, "--slots", "2"});
  ASSERT_TRUE(WaitForStderr(agent, "as agent", seconds(10))) << agent.Stderr();
  StopDaemon(first);
  ASSERT_TRUE(WaitForStderr(agent, "lost the daemon", seconds(10))) << agent.Stderr();
  auto second = Scheduler({"--listen", master});
  // The same agent, registered again, runs the next job.
  auto job = Gangrun({"submit", "--master", master, "--worker_num", "2", "--cluster_time_out", "20",
                      TestWorkerBinary(), "--lines", "1"});
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr() << agent.Stderr();
  EXPECT_NE(job.Stdout().find("line 0 of rank 1"), std::string::npos) << job.Stdout();
  StopDaemon(agent);
  StopDaemon(second);
}

TEST_F(DaemonTest, AJobLargerThanEverySlotDoesNotBlockSmallerOnes) {
  const std::string master = "127.0.0.1:" + FreePort();
  auto scheduler = Scheduler({"--listen", master});
  auto agent = Gangrun({"agent", "--master", master, "--slots", "2"});
  ASSERT_TRUE(WaitForStderr(agent, "registered with the daemon", seconds(10))) << agent.Stderr();
  auto big = Gangrun({"submit", "--master", master, "--worker_num", "8", "--cluster_time_out", "60",
                      TestWorkerBinary()});
  ASSERT_TRUE(
      WaitForStderr(big, "more than the 2 that the 1 registered agent(s) have in all", seconds(10)))
      << big.Stderr();
  auto small = Gangrun({"submit", "--master", master, "--worker_num", "2", TestWorkerBinary()});
  EXPECT_EQ(RunToEnd(small).code, 0) << small.Stderr();
  kill(big.pid, SIGTERM);
  EXPECT_EQ(RunToEnd(big).code, 128 + SIGTERM) << big.Stderr();
  kill(agent.pid, SIGTERM);
  EXPECT_EQ(RunToEnd(agent).code, 0) << agent.Stderr();
  StopDaemon(scheduler);
}

TEST_F(DaemonTest, ASubmittedJobRunsInTheSubmittersDirectoryAndEnvironment) {
  const std::string master = "127.0.0.1:" + FreePort();
  auto scheduler = Scheduler({"--listen", master});
  auto agent = Gangrun({"agent", "--master", master, "--slots", "2"}, {"AGENT_ONLY=agent"});
  ASSERT_TRUE(WaitForStderr(agent, "registered with the daemon", seconds(10))) << agent.Stderr();
  const std::string work = dir_.File("work");
  ASSERT_EQ(mkdir(work.c_str(), 0700), 0);
  auto submit = [&](const std::vector<std::string>& options, const std::string& env_file) {
    std::vector<std::string> argv = {GangrunBinary(), "submit", "--master", master};
    argv.insert(argv.end(), options.begin(), options.end());
    for (const char* arg : {"--worker_num", "1"}) argv.push_back(arg);
    argv.push_back(TestWorkerBinary());
    argv.push_back("--env");
    argv.push_back(env_file);  // relative: lands in the job's working directory
    auto job = Launch(argv, {"MY_SETTING=42", "GANGRUN_SUBMITTER_ONLY=1"}, work, dir_.path());
    EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr() << agent.Stderr();
    return ReadFile(work + "/" + env_file + ".0");
  };
  // By default (--export ALL) the submitter's environment and directory, not the agent's.
  std::string env = submit({}, "all");
  EXPECT_NE(env.find("\nMY_SETTING=42\n"), std::string::npos) << env;
  EXPECT_NE(env.find("\nPWD=" + work + "\n"), std::string::npos) << env;
  EXPECT_EQ(env.find("AGENT_ONLY="), std::string::npos) << env;
  EXPECT_EQ(env.find("GANGRUN_SUBMITTER_ONLY"), std::string::npos) << env;  // never carried
  // NONE: the agent's environment (still the submitter's directory).
  env = submit({"--export", "NONE"}, "none");
  EXPECT_EQ(env.find("MY_SETTING="), std::string::npos) << env;
  EXPECT_NE(env.find("\nAGENT_ONLY=agent\n"), std::string::npos) << env;
  // A list: those variables over the agent's.
  env = submit({"--export=MY_SETTING"}, "list");
  EXPECT_NE(env.find("\nMY_SETTING=42\n"), std::string::npos) << env;
  EXPECT_NE(env.find("\nAGENT_ONLY=agent\n"), std::string::npos) << env;
  auto bad = Launch({GangrunBinary(), "submit", "--master", master, "--export", "A-B",
                     "--worker_num", "1", TestWorkerBinary()},
                    {}, work, dir_.path());
  EXPECT_EQ(RunToEnd(bad).code, 2);
  EXPECT_NE(bad.Stderr().find("--export: expected ALL, NONE or VAR[,VAR...], got 'A-B'"),
            std::string::npos)
      << bad.Stderr();
  StopDaemon(agent);
  StopDaemon(scheduler);
}

TEST_F(DaemonTest, AWorkingDirectoryMissingOnTheAgentsHostFailsTheJobClearly) {
  // The agent runs in a mount namespace of its own where a tmpfs hides the directory.
  if (system("unshare -m true 2>/dev/null") != 0) GTEST_SKIP() << "no mount namespaces here";
  const std::string hidden = dir_.File("hidden"), work = dir_.File("hidden/work");
  ASSERT_EQ(mkdir(hidden.c_str(), 0700), 0);
  ASSERT_EQ(mkdir(work.c_str(), 0700), 0);
  const std::string master = "127.0.0.1:" + FreePort();
  auto scheduler = Scheduler({"--listen", master});
  auto agent = Launch({"/usr/bin/unshare", "-m", "/bin/sh", "-c",
                       "mount -t tmpfs none " + hidden + " && exec " + GangrunBinary() +
                           " agent --master " + master + " --slots 1"},
                      {}, dir_.path(), dir_.path());
  ASSERT_TRUE(WaitForStderr(agent, "registered with the daemon", seconds(10))) << agent.Stderr();
  auto job = Launch(
      {GangrunBinary(), "submit", "--master", master, "--worker_num", "1", TestWorkerBinary()}, {},
      work, dir_.path());
  EXPECT_NE(RunToEnd(job).code, 0) << job.Stderr();
  EXPECT_NE(job.Stderr().find("the working directory " + work + " does not exist on"),
            std::string::npos)
      << job.Stderr();
  StopDaemon(agent);
  StopDaemon(scheduler);
}

TEST_F(DaemonTest, ANonLoopbackDaemonNeedsAuthenticationOrInsecure) {
  const std::string port = FreePort();
  auto refused = Gangrun({"scheduler", "--listen", "0.0.0.0:" + port});
  EXPECT_EQ(RunToEnd(refused).code, 2);
  EXPECT_NE(refused.Stderr().find("without authentication"), std::string::npos) << refused.Stderr();
  std::ofstream(dir_.File("token")) << "s3cret\n";
  chmod(dir_.File("token").c_str(), 0644);
  auto with_token = Scheduler({"--listen", "0.0.0.0:" + port, "--token_file", dir_.File("token")});
  EXPECT_NE(with_token.Stderr().find("can be read by other users"), std::string::npos)
      << with_token.Stderr();
  StopDaemon(with_token);
  auto insecure = Scheduler({"--listen", "0.0.0.0:" + port, "--insecure"});
  EXPECT_NE(insecure.Stderr().find("without a token or client certificates"), std::string::npos);
  StopDaemon(insecure);
}

TEST_F(DaemonTest, BadDaemonOptionsAreOneClearError) {
  // A path under the test's own directory that does not exist (never one outside it).
  const std::string missing = dir_.File("missing/e.jsonl");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"scheduler", "--listen", "nonsense"}, "--listen 'nonsense' is not HOST:PORT"},
      {{"scheduler", "--listen", "0.0.0.0:0"},
       "refusing to listen on 0.0.0.0:0 without "
       "authentication"},
      {{"status", "--master", "127.0.0.1:99999"}, "the port must be in 1..65535"},
      {{"status", "--master", "bad host:80"}, "is not a host name or address"},
      {{"scheduler", "--listen", "127.0.0.1:0", "--event_log", missing},
       "--event_log: cannot open " + missing},
      {{"scheduler", "--listen", "127.0.0.1:0", "--metrics_port", "70000"}, "--metrics_port"},
      {{"agent"}, "--master is required"},
      {{"agent", "--master", "127.0.0.1:1", "--slots", "0"}, "--slots must be at least 1"},
      {{"agent", "--master", "127.0.0.1:1", "--slots", "1000000000"}, "--slots must be at most"},
      {{"submit", "--master", "127.0.0.1:1", "--worker_num", "2:4", "/bin/true"}, "MIN:MAX"},
  };
  for (const auto& [args, message] : cases) {
    auto run = Gangrun(args);
    EXPECT_EQ(RunToEnd(run).code, 2) << args[0];
    const std::string err = run.Stderr();
    EXPECT_NE(err.find(message), std::string::npos) << err;
    EXPECT_LE(std::count(err.begin(), err.end(), '\n'), 2) << err;  // one message (+ usage)
  }
}

TEST_F(DaemonTest, WatchdogPingsWhileTheLoopRuns) {
  const std::string master = "127.0.0.1:" + FreePort();
  NotifySocket notify(dir_.File("notify"));
  // Options from the environment, as a systemd EnvironmentFile gives them.
  auto scheduler = Gangrun({"scheduler"}, {"NOTIFY_SOCKET=" + notify.path(), "WATCHDOG_USEC=200000",
                                           "GANGRUN_LISTEN=" + master});
  std::set<std::string> seen;
  for (int i = 0; i < 4; ++i) seen.insert(notify.Next(seconds(5)).substr(0, 10));
  EXPECT_TRUE(seen.count("WATCHDOG=1")) << "no watchdog ping";
  EXPECT_TRUE(seen.count("READY=1\nST")) << "no READY";
  StopDaemon(scheduler);
}

// The pid of `parent`'s only child, from /proc (0 when there is none yet).
pid_t ChildOf(pid_t parent) {
  std::string children =
      ReadFile("/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) + "/children");
  return children.empty() ? 0 : std::stoi(children);
}

TEST_F(DaemonTest, AsPid1ItReapsOrphansAndForwardsSignals) {
  // gangrun as the first process of a new PID namespace, as in a container.
  auto job = Launch({"unshare", "--pid", "--fork", GangrunBinary(), "--worker_num", "2",
                     "--local_worker_num", "2", TestWorkerBinary(), "--hang", "--usr1"},
                    {"GANGRUN_TEST_READY=" + fifo_.path()}, dir_.path(), dir_.path());
  auto ready = WaitReady(2);
  if (ready.size() != 2 && job.Stderr().find("unshare failed") != std::string::npos) {
    RunToEnd(job);
    GTEST_SKIP() << "cannot create a PID namespace here: " << job.Stderr();
  }
  ASSERT_EQ(ready.size(), 2u) << job.Stderr();
  const pid_t init = ChildOf(job.pid);  // gangrun, PID 1 inside
  ASSERT_GT(init, 0);

  // An orphan in the namespace (its parent exits first) is re-parented to PID 1 and reaped.
  // It reports its pid and parent (as this namespace's /proc sees them) on the report FIFO.
  auto orphan = Launch({"nsenter", "--target", std::to_string(init), "--pid", "sh", "-c",
                        "p=$$; (while kill -0 $p 2>/dev/null; do :; done; "
                        "read pid comm state ppid rest < /proc/self/stat; "
                        "echo \"orphan $pid $ppid\" > " +
                            fifo_.path() + ") & exit 0"},
                       {}, dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(orphan).code, 0) << orphan.Stderr();
  auto report = fifo_.ReadLine(seconds(10));
  ASSERT_TRUE(report.has_value()) << "the orphan never reported";
  auto fields = Split(*report, ' ');
  ASSERT_EQ(fields.size(), 3u) << *report;
  ASSERT_EQ(fields[0], "orphan") << *report;
  const pid_t orphan_pid = std::stoi(fields[1]);
  EXPECT_EQ(std::stoi(fields[2]), init) << "not re-parented to PID 1";
  EXPECT_TRUE(WaitReaped(orphan_pid, seconds(5))) << "PID 1 left a zombie";

  // Signals to PID 1 reach the launcher: SIGUSR1 is passed on to the workers, SIGTERM stops.
  ASSERT_TRUE(WaitForStderr(job, "all 2 local process(es) running", seconds(10)));
  kill(init, SIGUSR1);
  auto usr1 = fifo_.ReadLines(2, seconds(10));
  EXPECT_EQ(usr1.size(), 2u);
  kill(init, SIGTERM);
  EXPECT_EQ(RunToEnd(job).code, 128 + SIGTERM) << job.Stderr();
}

}  // namespace
}  // namespace gangrun::testing
