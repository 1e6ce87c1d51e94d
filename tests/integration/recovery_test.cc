// Recovery without a person, with real launchers on 127.0.0.1: a spare takes a killed node's
// place, a failing health check keeps a node out, a node that keeps failing is excluded,
// exit codes that must not be retried, job-wide signals and the time limit.

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <regex>
#include <set>

#include "tests/integration/daemon_fixture.h"
#include "tests/testing/http.h"

namespace gangrun::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class RecoveryTest : public LauncherTest {
 protected:
  RecoveryTest() : port_(FreePort()) {}

  // One launcher of a `world`-worker job of one-worker nodes.
  Launched Node(int world, std::vector<std::string> extra,
                const std::vector<std::string>& worker_args) {
    std::vector<std::string> args = {"--worker_num",         std::to_string(world),
                                     "--local_worker_num",   "1",
                                     "--master_port",        port_,
                                     "--node_timeout",       "5",
                                     "--heartbeat_interval", "0.2"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Start(args, worker_args);
  }
  static bool Joined(const Launched& l) {
    return l.Stderr().find("joining the scheduler") != std::string::npos;
  }
  // Generation 1 hangs (bystanders of a rank that never fails); generation 2 exits 0.
  static inline const std::vector<std::string> kHangsOnce = {"--fail-rank", "99",
                                                             "--only-generation", "1"};
  // A two-node job of kHangsOnce workers and a spare, all with `opts`; node rank 1's launcher
  // is killed once the spare waits. The master and the spare.
  std::pair<Launched, Launched> KillANodeOfAJobWithASpare(const std::vector<std::string>& opts) {
    auto master = Node(2, opts, kHangsOnce);
    EXPECT_TRUE(WaitForStderr(master, "waiting for", seconds(20))) << master.Stderr();
    auto node = Node(2, opts, kHangsOnce);
    WaitReady(2);
    auto spare = Node(2, opts, kHangsOnce);
    WaitSpare(spare);
    kill(node.pid, SIGKILL);
    RunToEnd(node);
    return {master, spare};
  }
  // Waits until `spare` has been told it waits as a spare.
  static void WaitSpare(const Launched& spare) {
    ASSERT_TRUE(WaitForStderr(spare, "waiting as a spare", seconds(20))) << spare.Stderr();
  }

  std::string port_;
};

TEST_F(RecoveryTest, ASpareTakesTheKilledNodesPlaceAndTheJobSucceeds) {
  // Generation 1 hangs (bystanders of a rank that never fails); generation 2 exits 0.
  const std::vector<std::string> worker = {"--fail-rank", "99", "--only-generation", "1"};
  const std::vector<std::string> opts = {"--spare_nodes", "1", "--max_restarts", "1"};
  const std::string metrics = FreePort();
  std::vector<std::string> master_opts = opts;
  master_opts.insert(master_opts.end(), {"--metrics_port", metrics});
  auto master = Node(2, master_opts, worker);
  ASSERT_TRUE(WaitForStderr(master, "waiting for", seconds(20))) << master.Stderr();
  auto node = Node(2, opts, worker);
  WaitReady(2);
  auto spare = Node(2, opts, worker);
  WaitSpare(spare);
  ASSERT_TRUE(Joined(node)) << node.Stderr();
  // Both gangrun status and /metrics show it waiting.
  auto status = Launch({GangrunBinary(), "status", "--master", "127.0.0.1:" + port_}, {},
                       dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(status).code, 0) << status.Stderr();
  EXPECT_NE(status.Stdout().find("spares 1"), std::string::npos) << status.Stdout();
  EXPECT_NE(status.Stdout().find(" spare "), std::string::npos) << status.Stdout();
  auto [code, body] = HttpGet(metrics, "/metrics");
  EXPECT_EQ(code, 200);
  EXPECT_TRUE(std::regex_search(body, std::regex(R"(\ngangrun_spare_nodes\{job="[^"]+"\} 1\n)")))
      << body;
  kill(node.pid, SIGKILL);
  RunToEnd(node);
  EXPECT_EQ(RunToEnd(master).code, 0) << master.Stderr();
  EXPECT_EQ(RunToEnd(spare).code, 0) << spare.Stderr();
  EXPECT_NE(spare.Stderr().find("a spare no more: this node takes node rank 1"), std::string::npos)
      << spare.Stderr();
  EXPECT_EQ(master.Stderr().find("waiting for a node to take its place"), std::string::npos)
      << "a spare was there: nobody waits";
}

// --rejoin_window: the killed node's launcher, started again within the window, takes its own
// place back (node rank 1) and the spare stays a spare.
TEST_F(RecoveryTest, ALauncherBackWithinTheRejoinWindowKeepsItsPlaceAndTheSpareWaits) {
  const std::vector<std::string> opts = {"--spare_nodes",   "1",  "--max_restarts", "1",
                                         "--rejoin_window", "120"};
  auto [master, spare] = KillANodeOfAJobWithASpare(opts);
  ASSERT_TRUE(WaitForStderr(master, "waiting for a node to take its place", seconds(20)))
      << master.Stderr();
  EXPECT_NE(master.Stderr().find("(ranks 1..1) for 120 s for a launcher to come "
                                 "back (--rejoin_window); a spare takes it then"),
            std::string::npos)
      << master.Stderr();
  auto back = Node(2, opts, kHangsOnce);  // the host's launcher, started again
  EXPECT_EQ(RunToEnd(back).code, 0) << back.Stderr();
  EXPECT_NE(back.Stderr().find("generation 2: all 1 local process(es) running (rank 1"),
            std::string::npos)
      << back.Stderr();
  EXPECT_EQ(RunToEnd(master).code, 0) << master.Stderr();
  EXPECT_EQ(RunToEnd(spare).code, 0) << spare.Stderr();
  EXPECT_EQ(spare.Stderr().find("a spare no more"), std::string::npos) << spare.Stderr();
}

// Nobody comes back within the window: the spare takes the place when it ends.
TEST_F(RecoveryTest, NoLauncherBackWithinTheRejoinWindowTheSpareTakesThePlace) {
  const std::vector<std::string> opts = {"--spare_nodes",   "1",  "--max_restarts", "1",
                                         "--rejoin_window", "0.3"};
  auto [master, spare] = KillANodeOfAJobWithASpare(opts);
  EXPECT_EQ(RunToEnd(master).code, 0) << master.Stderr();
  EXPECT_EQ(RunToEnd(spare).code, 0) << spare.Stderr();
  EXPECT_NE(master.Stderr().find("for 0.3 s for a launcher to come back"), std::string::npos)
      << master.Stderr();
  EXPECT_NE(spare.Stderr().find("a spare no more: this node takes node rank 1"), std::string::npos)
      << spare.Stderr();
}

TEST_F(RecoveryTest, AFailingHealthCheckKeepsTheNodeOutAndTheSpareRuns) {
  const std::vector<std::string> opts = {"--spare_nodes", "1"};
  auto master = Node(2, opts, {});
  ASSERT_TRUE(WaitForStderr(master, "waiting for", seconds(20))) << master.Stderr();
  auto bad = Node(2, {"--spare_nodes", "1", "--health_check", "echo no GPU here; exit 3"}, {});
  EXPECT_EQ(RunToEnd(bad).code, 6) << bad.Stderr();
  EXPECT_NE(bad.Stderr().find("no GPU here"), std::string::npos) << bad.Stderr();
  EXPECT_EQ(bad.Stderr().find("local process(es) running"), std::string::npos)
      << "it never ran a worker";
  auto good = Node(2, opts, {});
  EXPECT_EQ(RunToEnd(master).code, 0) << master.Stderr();
  EXPECT_EQ(RunToEnd(good).code, 0) << good.Stderr();
}

TEST_F(RecoveryTest, AHealthCheckThatHangsIsKilledAtItsTimeoutAndExcludesTheNode) {
  auto launcher =
      Start({"--worker_num", "1", "--local_worker_num", "1", "--health_check",
             "echo checking the GPUs; exec tail -f /dev/null", "--health_check_timeout", "0.5"},
            {});
  EXPECT_EQ(RunToEnd(launcher).code, 6) << launcher.Stderr();
  EXPECT_NE(
      launcher.Stderr().find("took longer than --health_check_timeout 0.5 s: checking the GPUs"),
      std::string::npos)
      << launcher.Stderr();
  EXPECT_EQ(launcher.Stderr().find("local process(es) running"), std::string::npos)
      << launcher.Stderr();
  // Without --log_dir its log is in the current directory (it was once "/health_check.log",
  // shared by every job of the host).
  EXPECT_EQ(ReadFile(dir_.File("health_check.log")), "checking the GPUs\n");
}

TEST_F(RecoveryTest, ANodeThatFailsEveryGenerationIsExcludedAfterTwo) {
  const std::vector<std::string> opts = {"--spare_nodes",   "1", "--max_restarts",    "5",
                                         "--exclude_after", "2", "--restart_backoff", "0.1"};
  auto master = Node(2, opts, {});
  ASSERT_TRUE(WaitForStderr(master, "waiting for", seconds(20))) << master.Stderr();
  auto bad = Node(2, opts, {"--exit", "1"});  // every generation, its rank fails here
  ASSERT_TRUE(WaitForStderr(bad, "local process(es) running", seconds(20))) << bad.Stderr();
  auto spare = Node(2, opts, {});
  EXPECT_EQ(RunToEnd(bad).code, 6) << bad.Stderr();
  EXPECT_NE(bad.Stderr().find("root cause of 2 failed generations in a row"), std::string::npos)
      << bad.Stderr();
  EXPECT_EQ(RunToEnd(master).code, 0) << master.Stderr();
  EXPECT_EQ(RunToEnd(spare).code, 0) << spare.Stderr();
  EXPECT_NE(master.Stderr().find("generation 3"), std::string::npos) << master.Stderr();
}

// A failure that says the hardware failed (gangrun's signature of an uncorrectable ECC error):
// its node leaves, the spare takes its place, and with no restart in the budget the job still
// goes on: the restart is not the job's.
TEST_F(RecoveryTest, AHardwareSignatureExcludesTheNodeAndTheSpareTakesItsPlaceForFree) {
  const std::vector<std::string> opts = {"--spare_nodes",     "1",  "--max_restarts", "0",
                                         "--restart_backoff", "0.1"};
  auto master = Node(2, opts, {});
  ASSERT_TRUE(WaitForStderr(master, "waiting for", seconds(20))) << master.Stderr();
  auto bad = Node(
      2, opts,
      {"--say", "RuntimeError: CUDA error: uncorrectable ECC error encountered", "--exit", "1"});
  ASSERT_TRUE(WaitForStderr(bad, "local process(es) running", seconds(20))) << bad.Stderr();
  auto spare = Node(2, opts, {});
  EXPECT_EQ(RunToEnd(bad).code, 6) << bad.Stderr();
  EXPECT_NE(bad.Stderr().find("its failure matched gangrun's hardware signature (exclude "
                              "/(?i)uncorrectable ECC error/) matched \"RuntimeError: CUDA error: "
                              "uncorrectable ECC error encountered\""),
            std::string::npos)
      << bad.Stderr();
  EXPECT_EQ(RunToEnd(master).code, 0) << master.Stderr();
  EXPECT_EQ(RunToEnd(spare).code, 0) << spare.Stderr();
  EXPECT_NE(master.Stderr().find("generation 2"), std::string::npos) << master.Stderr();
  EXPECT_NE(master.Stderr().find("(restart 0 of 0; 1 more not counted: the hardware's)"),
            std::string::npos)
      << master.Stderr();
}

// The kernel's log says the device failed (node/kernel_log.h; a text file standing for
// /dev/kmsg, which a test must not write a fake device error to): the failure is the
// hardware's although the rank's own output says nothing of it.
TEST_F(RecoveryTest, AKernelReportedDeviceErrorExcludesTheNodeForFree) {
  const std::string kernel_log = dir_.File("kern.log");
  { std::ofstream(kernel_log) << "NVRM: Xid (PCI:0000:17:00): 79, an old one, before the job\n"; }
  const std::string xid =
      "NVRM: Xid (PCI:0000:3b:00): 48, pid=4242, name=python3, An uncorrectable double bit error "
      "(DBE) has been detected on GPU in the framebuffer at partition 1, subpartition 0.";
  const std::vector<std::string> opts = {"--spare_nodes",     "1",  "--max_restarts", "0",
                                         "--restart_backoff", "0.1"};
  auto master = Node(2, opts, {});
  ASSERT_TRUE(WaitForStderr(master, "waiting for", seconds(20))) << master.Stderr();
  std::vector<std::string> bad_opts = opts;
  bad_opts.insert(bad_opts.end(), {"--kernel_log", kernel_log});
  auto bad = Node(2, bad_opts, {"--say", xid, "--say-to", kernel_log, "--exit", "1"});
  ASSERT_TRUE(WaitForStderr(bad, "local process(es) running", seconds(20))) << bad.Stderr();
  auto spare = Node(2, opts, {});
  EXPECT_EQ(RunToEnd(bad).code, 6) << bad.Stderr();
  EXPECT_NE(bad.Stderr().find("its failure matched gangrun's hardware signature (exclude /NVRM: "
                              "Xid \\(PCI:/) matched \"" +
                              xid + "\""),
            std::string::npos)
      << bad.Stderr();
  EXPECT_EQ(RunToEnd(master).code, 0) << master.Stderr();
  EXPECT_EQ(RunToEnd(spare).code, 0) << spare.Stderr();
  EXPECT_NE(master.Stderr().find("(restart 0 of 0; 1 more not counted: the hardware's)"),
            std::string::npos)
      << master.Stderr();
  EXPECT_EQ(master.Stderr().find("an old one"), std::string::npos) << master.Stderr();
}

// What the kernel said is in the report under the root cause, whatever it was.
TEST_F(RecoveryTest, TheReportShowsWhatTheKernelSaidSinceTheGenerationStarted) {
  const std::string kernel_log = dir_.File("kern.log");
  { std::ofstream(kernel_log) << "an old line\n"; }
  auto job = Node(1, {"--kernel_log", kernel_log},
                  {"--say", "nvme nvme0: I/O 123 QID 4 timeout, aborting", "--say-to", kernel_log,
                   "--exit", "3"});
  EXPECT_EQ(RunToEnd(job).code, 3) << job.Stderr();
  EXPECT_NE(job.Stderr().find("since the generation started:\n    | nvme nvme0: I/O 123 QID 4 "
                              "timeout, aborting\n"),
            std::string::npos)
      << job.Stderr();
  EXPECT_EQ(job.Stderr().find("an old line"), std::string::npos) << job.Stderr();
}

// A process outside the job holds the host's "device" (a file standing for /dev/nvidia0): the
// failed rank's report names it, and a site's rule can act on it.
TEST_F(RecoveryTest, TheReportNamesAProcessOutsideTheJobHoldingTheDevice) {
  const std::string device = dir_.File("nvidia0");
  { std::ofstream(device) << ""; }
  const std::string rules = dir_.File("rules.txt");
  { std::ofstream(rules) << "stop holds .*/nvidia0$\n"; }
  const pid_t holder = HoldFileOpen(device);
  ASSERT_GT(holder, 0);
  auto job = Node(1,
                  {"--device_files", dir_.File("nvidia[0-9]*"), "--max_restarts", "3",
                   "--restart_rules", rules},
                  {"--exit", "3"});
  const auto end = RunToEnd(job);
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  EXPECT_EQ(end.code, 3) << job.Stderr();
  EXPECT_NE(job.Stderr().find("'s devices:\n    | pid " + std::to_string(holder) + " ("),
            std::string::npos)
      << job.Stderr();
  EXPECT_NE(job.Stderr().find("holds " + device + "\n"), std::string::npos) << job.Stderr();
  EXPECT_NE(job.Stderr().find("not restarted: the failure matched rule 1 of"), std::string::npos)
      << job.Stderr();
}

// The node a generation failed on then fails its health check: the failure was its hardware's.
// It is excluded, the spare takes its place, and the restart is not counted.
TEST_F(RecoveryTest, ANodeThatFailsItsHealthCheckAfterTheFailureOnItCostsNoRestart) {
  // Passes before generation 1 everywhere, then fails on node rank 1 only.
  const std::vector<std::string> opts = {
      "--spare_nodes",
      "1",
      "--max_restarts",
      "1",
      "--restart_backoff",
      "0.1",
      "--health_check",
      "test \"$GANGRUN_GENERATION\" = 1 || test \"$GANGRUN_NODE_RANK\" != 1 || "
      "{ echo 'ECC: 3 uncorrectable'; exit 1; }"};
  const std::vector<std::string> worker = {"--fail-rank",       "1", "--exit", "1",
                                           "--only-generation", "1"};
  auto master = Node(2, opts, worker);
  ASSERT_TRUE(WaitForStderr(master, "waiting for", seconds(20))) << master.Stderr();
  auto bad = Node(2, opts, worker);
  ASSERT_TRUE(WaitForStderr(bad, "local process(es) running", seconds(20))) << bad.Stderr();
  auto spare = Node(2, opts, worker);
  EXPECT_EQ(RunToEnd(bad).code, 6) << bad.Stderr();
  EXPECT_NE(bad.Stderr().find("its health check failed after the failure on it (the hardware's: "
                              "that restart is not counted)"),
            std::string::npos)
      << bad.Stderr();
  EXPECT_EQ(RunToEnd(master).code, 0) << master.Stderr();
  EXPECT_EQ(RunToEnd(spare).code, 0) << spare.Stderr();
  EXPECT_NE(master.Stderr().find("(restart 0 of 1; 1 more not counted: the hardware's)"),
            std::string::npos)
      << master.Stderr();
}

// A site's rule: an out-of-memory error is not worth a restart, whatever the budget.
TEST_F(RecoveryTest, ARulesStopEndsTheJobAtOnceAndABadRulesFileIsOneLine) {
  const std::string rules = dir_.File("rules.txt");
  { std::ofstream(rules) << "# ours\nstop   CUDA out of memory\n"; }
  const std::string events = dir_.File("events.jsonl");
  auto launcher = Start({"--worker_num", "1", "--local_worker_num", "1", "--max_restarts", "5",
                         "--restart_rules", rules, "--event_log", events},
                        {"--say",
                         "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                         "2.00 GiB",
                         "--exit", "1"});
  EXPECT_EQ(RunToEnd(launcher).code, 1) << launcher.Stderr();
  EXPECT_NE(launcher.Stderr().find("not restarted: the failure matched rule 1 of " + rules +
                                   " (stop /CUDA out of memory/)"),
            std::string::npos)
      << launcher.Stderr();
  EXPECT_EQ(launcher.Stderr().find("generation 2"), std::string::npos) << launcher.Stderr();
  // The verdict is in the event log, with the failure's fingerprint and the rule.
  const std::string log = ReadFile(events);
  const size_t verdict = log.find("\"event\":\"verdict\"");
  ASSERT_NE(verdict, std::string::npos) << log;
  const std::string line = log.substr(log.rfind('\n', verdict) + 1,
                                      log.find('\n', verdict) - log.rfind('\n', verdict) - 1);
  const auto parsed = nlohmann::json::parse(line);
  EXPECT_EQ(parsed["generation"], 1) << line;
  EXPECT_EQ(parsed["fingerprint"],
            "exit code 1; last line: torch.OutOfMemoryError: CUDA out of memory. Tried to "
            "allocate #.## GiB")
      << line;
  EXPECT_EQ(parsed["verdict"].get<std::string>().rfind("stop: the failure matched rule 1", 0), 0u)
      << line;
  EXPECT_EQ(parsed["rule"].get<std::string>().rfind("rule 1 of " + rules, 0), 0u) << line;
  // A file that is not rules: one line naming its line, exit 2.
  { std::ofstream(rules) << "stop ok\nretry everything\n"; }
  auto refused =
      Start({"--worker_num", "1", "--local_worker_num", "1", "--restart_rules", rules}, {});
  EXPECT_EQ(RunToEnd(refused).code, 2) << refused.Stderr();
  EXPECT_NE(refused.Stderr().find(rules + " line 2: 'retry' is not an action"), std::string::npos)
      << refused.Stderr();
}

TEST_F(RecoveryTest, AnExitCodeOfTheListIsNotRestarted) {
  auto launcher = Start({"--worker_num", "2", "--local_worker_num", "2", "--max_restarts", "3",
                         "--no_restart_exit_codes", "93"},
                        {"--fail-rank", "1", "--exit", "93"});
  EXPECT_EQ(RunToEnd(launcher).code, 93) << launcher.Stderr();
  EXPECT_NE(launcher.Stderr().find("is one of --no_restart_exit_codes"), std::string::npos)
      << launcher.Stderr();
  EXPECT_EQ(launcher.Stderr().find("generation 2"), std::string::npos) << launcher.Stderr();
}

TEST_F(RecoveryTest, RestartsThatMakeNoProgressStopTheJob) {
  // Every generation reports step 1 and fails: generation 1 made progress, 2 and 3 did not.
  const std::string worker =
      "'" + GangrunBinary() + "' progress step 1 && echo generation $GANGRUN_GENERATION; exit 1";
  std::vector<std::string> argv = {GangrunBinary(),
                                   "--worker_num",
                                   "1",
                                   "--local_worker_num",
                                   "1",
                                   "--max_restarts",
                                   "10",
                                   "--restart_backoff",
                                   "0.05",
                                   "--max_no_progress_restarts",
                                   "2",
                                   "/bin/sh",
                                   "-c",
                                   worker};
  auto launcher = Launch(argv, {}, dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(launcher).code, 1) << launcher.Stderr();
  EXPECT_NE(launcher.Stderr().find("2 failed generation(s) in a row made no progress"),
            std::string::npos)
      << launcher.Stderr();
  EXPECT_NE(launcher.Stderr().find("generation 3"), std::string::npos) << launcher.Stderr();
  EXPECT_EQ(launcher.Stderr().find("generation 4"), std::string::npos) << launcher.Stderr();
}

// A deterministic failure is not retried until the budget is spent: the same exit and last
// log line in three generations in a row with no step gained stops the job, saying why, with
// the rank's own exit code.
TEST_F(RecoveryTest, TheSameFailureThreeTimesStopsTheJobWithItsReason) {
  const std::string worker = "echo 'loading shard 7 failed: no such file'; exit 3";
  auto launcher =
      Launch({GangrunBinary(), "--worker_num", "1", "--local_worker_num", "1", "--max_restarts",
              "10", "--restart_backoff", "0.05", "/bin/sh", "-c", worker},
             {}, dir_.path(), dir_.path());
  EXPECT_EQ(RunToEnd(launcher).code, 3) << launcher.Stderr();
  EXPECT_NE(launcher.Stderr().find("not restarted: the same failure in 3 generations in a row, "
                                   "with no progress: exit code 3; last line: loading shard # "
                                   "failed: no such file"),
            std::string::npos)
      << launcher.Stderr();
  EXPECT_NE(launcher.Stderr().find("generation 3"), std::string::npos) << launcher.Stderr();
  EXPECT_EQ(launcher.Stderr().find("generation 4"), std::string::npos) << launcher.Stderr();
}

TEST_F(RecoveryTest, SigusrToOneLauncherReachesEveryRankOfTheJob) {
  const std::vector<std::string> worker = {"--usr1", "--hang"};
  auto master = Node(2, {}, worker);
  ASSERT_TRUE(WaitForStderr(master, "waiting for", seconds(20))) << master.Stderr();
  auto node = Node(2, {}, worker);
  WaitReady(2);
  ASSERT_TRUE(Joined(node)) << node.Stderr();
  // Each launcher knows its worker's pid (a signal reaches only started workers).
  for (const Launched* l : {&master, &node}) {
    ASSERT_TRUE(WaitForStderr(*l, "all 1 local process(es) running", seconds(20))) << l->Stderr();
  }
  kill(node.pid, SIGUSR1);  // the launcher that does not host the scheduler
  auto lines = fifo_.ReadLines(2, seconds(20));
  std::set<std::string> got(lines.begin(), lines.end());
  EXPECT_EQ(got, (std::set<std::string>{"usr1 0", "usr1 1"})) << master.Stderr() << node.Stderr();
  kill(master.pid, SIGTERM);
  RunToEnd(master);
  RunToEnd(node);
}

TEST_F(RecoveryTest, TheTimeLimitSignalsFirstThenEndsTheJobWithSeven) {
  auto launcher = Start({"--worker_num", "1", "--local_worker_num", "1", "--time_limit", "4",
                         "--time_limit_signal", "SIGUSR1@2"},
                        {"--usr1", "--hang"});
  WaitReady(1);
  EXPECT_EQ(fifo_.ReadLines(1, seconds(20)), std::vector<std::string>{"usr1 0"});
  EXPECT_EQ(RunToEnd(launcher).code, 7) << launcher.Stderr();
  EXPECT_NE(launcher.Stderr().find("time limit"), std::string::npos) << launcher.Stderr();
}

TEST_F(DaemonTest, ASubmittedJobsSpareOnAnotherAgentTakesAKilledLaunchersPlace) {
  const std::string master = "127.0.0.1:" + FreePort();
  auto daemon = Scheduler({"--listen", master});
  std::vector<Launched> agents;
  for (const char* name : {"agent-a", "agent-b", "agent-c"}) {
    agents.push_back(Gangrun({"agent", "--master", master, "--slots", "1", "--name", name}));
    ASSERT_TRUE(WaitForStderr(daemon, std::string("'") + name + "' (", seconds(10)))
        << daemon.Stderr();
  }
  // Generation 1 hangs; generation 2 (after the spare took the killed launcher's place) exits 0.
  auto job = Gangrun({"submit", "--master", master, "--worker_num", "2", "--local_worker_num", "1",
                      "--spare_nodes", "1", "--max_restarts", "1", TestWorkerBinary(),
                      "--fail-rank", "99", "--only-generation", "1"});
  auto ready = WaitReady(2);
  ASSERT_EQ(ready.size(), 2u);
  ASSERT_TRUE(WaitForStderr(daemon, "waits as a spare", seconds(20))) << daemon.Stderr();
  auto status = Gangrun({"status", "--master", master});
  EXPECT_EQ(RunToEnd(status).code, 0);
  EXPECT_NE(status.Stdout().find("agents 3  jobs 1"), std::string::npos) << status.Stdout();
  kill(LauncherOf(ready[1].pid), SIGKILL);
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr() << daemon.Stderr();
  EXPECT_NE(daemon.Stderr().find("takes the place of"), std::string::npos) << daemon.Stderr();
  for (auto& agent : agents) StopDaemon(agent);
  StopDaemon(daemon);
}

// Agents pass their --topology_domain to their jobs' launchers: the lost node's place goes to
// the spare of its domain, not to the spare that was placed first.
TEST_F(DaemonTest, ASubmittedJobsLostNodeGoesToTheSpareOfItsAgentsDomain) {
  const std::string master = "127.0.0.1:" + FreePort();
  auto daemon = Scheduler({"--listen", master});
  std::vector<Launched> agents;
  for (const auto& [name, domain] : std::vector<std::pair<std::string, std::string>>{
           {"agent-a", "nvl-1"}, {"agent-b", "nvl-2"}, {"agent-c", "nvl-1"}}) {
    agents.push_back(Gangrun({"agent", "--master", master, "--slots", "1", "--name", name,
                              "--topology_domain", domain}));
    ASSERT_TRUE(WaitForStderr(daemon, "'" + name + "' (", seconds(10))) << daemon.Stderr();
  }
  // The job runs on agent-a; agent-b's spare (nvl-2) was placed before agent-c's (nvl-1).
  auto job = Gangrun({"submit", "--master", master, "--worker_num", "1", "--local_worker_num", "1",
                      "--spare_nodes", "2", "--max_restarts", "1", TestWorkerBinary(),
                      "--fail-rank", "99", "--only-generation", "1"});
  auto ready = WaitReady(1);
  ASSERT_EQ(ready.size(), 1u);
  ASSERT_TRUE(WaitForStderr(daemon, "(2 of 2 spares)", seconds(20))) << daemon.Stderr();
  kill(LauncherOf(ready[0].pid), SIGKILL);
  EXPECT_EQ(RunToEnd(job).code, 0) << job.Stderr() << daemon.Stderr();
  const std::string err = daemon.Stderr();
  const size_t took = err.find("takes the place of");
  ASSERT_NE(took, std::string::npos) << err;
  EXPECT_NE(err.substr(took, err.find('\n', took) - took).find(", domain nvl-1)"),
            std::string::npos)
      << err;
  for (auto& agent : agents) StopDaemon(agent);
  StopDaemon(daemon);
}

}  // namespace
}  // namespace gangrun::testing
