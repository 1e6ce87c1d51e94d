// What a daemon job's owner and workers see: a worker's token reaches its own job only, `ps`
// shows a launcher's job, the submit console says why each generation ended, and finished jobs
// stay listed.

#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/integration/daemon_fixture.h"

namespace gangrun::testing {
namespace {

using std::chrono::seconds;

// Workers are not the daemon: a submitted job's workers (and launchers) hold a token of
// their own job, which reaches that job's store and nothing of the daemon's.
TEST_F(DaemonTest, AWorkersTokenReachesItsOwnJobAndNothingOfTheDaemon) {
  const std::string master = "127.0.0.1:" + FreePort();
  const std::string token = "a-daemon-token-of-forty-characters-long!";
  const std::vector<std::string> with_token = {"GANGRUN_TOKEN=" + token};
  auto scheduler = Scheduler({"--listen", master}, with_token);
  auto agent = Gangrun({"agent", "--master", master, "--slots", "1"}, with_token);
  auto job = Gangrun({"submit", "--master", master, "--worker_num", "1", TestWorkerBinary(),
                      "--env", dir_.File("env"), "--hang"},
                     with_token);
  auto ready = WaitReady(1);
  ASSERT_EQ(ready.size(), 1u);
  std::map<std::string, std::string> worker_env;
  for (const auto& line : Split(ReadFile(dir_.File("env.0")), '\n')) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) worker_env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  const std::string job_token = worker_env["GANGRUN_TOKEN"];
  ASSERT_FALSE(job_token.empty());
  EXPECT_EQ(ReadFile(dir_.File("env.0")).find(token), std::string::npos)
      << "the daemon's token reached a worker";
  std::string launcher_env =
      ReadFile("/proc/" + std::to_string(LauncherOf(ready[0].pid)) + "/environ");
  EXPECT_EQ(launcher_env.find(token), std::string::npos) << "the daemon's token reached a launcher";
  // With the worker's token: its job's store answers, the daemon refuses.
  const std::vector<std::string> as_worker = {
      "GANGRUN_TOKEN=" + job_token, "GANGRUN_SCHEDULER=" + worker_env["GANGRUN_SCHEDULER"]};
  auto put = Gangrun({"kv", "put", "k", "v"}, as_worker);
  EXPECT_EQ(RunToEnd(put).code, 0) << put.Stderr();
  auto status = Gangrun({"status", "--master", master}, as_worker);
  EXPECT_EQ(RunToEnd(status).code, 3) << status.Stdout() << status.Stderr();
  auto stop = Gangrun({"stop", "--master", master}, as_worker);
  EXPECT_EQ(RunToEnd(stop).code, 3) << stop.Stderr();
  auto owner = Gangrun({"status", "--master", master}, with_token);
  EXPECT_EQ(RunToEnd(owner).code, 0) << owner.Stderr();
  EXPECT_NE(owner.Stdout().find("jobs 1 running"), std::string::npos) << owner.Stdout();
  kill(job.pid, SIGTERM);
  RunToEnd(job);
  StopDaemon(agent);
  StopDaemon(scheduler);
}

// `ps` on an agent's host shows each job's launcher as its run id and its task, not every
// option spelled out (the options travel in a memory file; ~1,500 characters before).
TEST_F(DaemonTest, AnAgentsLauncherShowsItsJobNotEveryOption) {
  const std::string master = "127.0.0.1:" + FreePort();
  auto scheduler = Scheduler({"--listen", master});
  auto agent = Gangrun({"agent", "--master", master, "--slots", "1"});
  auto job = Gangrun({"submit", "--master", master, "--worker_num", "1", "--max_restarts", "0",
                      TestWorkerBinary(), "--env", dir_.File("env"), "--hang"});
  auto ready = WaitReady(1);
  ASSERT_EQ(ready.size(), 1u);
  const std::vector<std::string> argv =
      Split(ReadFile("/proc/" + std::to_string(LauncherOf(ready[0].pid)) + "/cmdline"), '\0');
  ASSERT_EQ(argv.size(), 8u) << ReadFile("/proc/" + std::to_string(ready[0].pid) + "/cmdline");
  EXPECT_EQ(argv[1], "--run_id");
  EXPECT_EQ(
      std::vector<std::string>(argv.begin() + 3, argv.end()),
      (std::vector<std::string>{"--", TestWorkerBinary(), "--env", dir_.File("env"), "--hang"}));
  // The options did travel: --max_restarts 0, not the default 3, and the label's run id.
  auto status = Gangrun({"status", "--master", master, "--json"});
  EXPECT_EQ(RunToEnd(status).code, 0) << status.Stderr();
  EXPECT_NE(status.Stdout().find(argv[2]), std::string::npos) << status.Stdout();
  kill(ready[0].pid, SIGKILL);
  EXPECT_EQ(RunToEnd(job).code, 137) << job.Stderr();
  EXPECT_NE(job.Stderr().find("not restarted"), std::string::npos) << job.Stderr();
  const std::string worker_env = ReadFile(dir_.File("env.0"));
  EXPECT_EQ(worker_env.find("GANGRUN_INTERNAL_"), std::string::npos) << worker_env;
  StopDaemon(agent);
  StopDaemon(scheduler);
}

// The job's owner reads on their own console why each generation ended and what follows:
// the failing rank, its host, its exit code and log, then the restart or why there is none.
TEST_F(DaemonTest, SubmitSaysWhyEachGenerationEndedAndWhetherItRestarts) {
  const std::string master = "127.0.0.1:" + FreePort();
  auto scheduler = Scheduler({"--listen", master});
  auto agent = Gangrun({"agent", "--master", master, "--slots", "1", "--name", "agent-a"});
  auto submit = Gangrun({"submit", "--master", master, "--worker_num", "1", "--max_restarts", "1",
                         TestWorkerBinary(), "--exit", "3"});
  EXPECT_EQ(RunToEnd(submit).code, 3) << submit.Stderr();
  const std::string err = submit.Stderr();
  const size_t first = err.find(": generation 1 ended: rank 0 on ");
  ASSERT_NE(first, std::string::npos) << err;
  const std::string line = err.substr(first, err.find('\n', first) - first);
  EXPECT_NE(line.find("exited with code 3 (log: "), std::string::npos) << line;
  EXPECT_NE(line.find("; restarting in 1 s (restart 1 of 1)"), std::string::npos) << line;
  EXPECT_NE(err.find(": generation 2 ended: rank 0 on "), std::string::npos) << err;
  EXPECT_NE(err.find("not restarted: all 1 restart(s) of --max_restarts are used"),
            std::string::npos)
      << err;
  // Once each.
  EXPECT_EQ(err.find(": generation 1 ended:", first + 1), std::string::npos) << err;
  // At the end, where the job's time went, as a one-shot launcher says it.
  EXPECT_NE(err.find("gangrun: the job's time: "), std::string::npos) << err;
  EXPECT_NE(err.find("backoff"), std::string::npos) << err;
  // The same story stays with the finished job: `status --job ID`.
  auto story = Gangrun({"status", "--master", master, "--job", SubmittedJobId(err)});
  EXPECT_EQ(RunToEnd(story).code, 0) << story.Stderr();
  EXPECT_NE(story.Stdout().find("\n  generation 1 ended: rank 0 on "), std::string::npos)
      << story.Stdout();
  EXPECT_NE(story.Stdout().find("\n  generation 2 ended: rank 0 on "), std::string::npos)
      << story.Stdout();
  StopDaemon(agent);
  StopDaemon(scheduler);
}

// Finished jobs stay visible: `status` lists them after the running ones, newest first, with
// their outcome, exit code, restarts, wall time and command.
TEST_F(DaemonTest, StatusListsFinishedJobsNewestFirst) {
  const std::string master = "127.0.0.1:" + FreePort();
  auto scheduler = Scheduler({"--listen", master});
  auto agent = Gangrun({"agent", "--master", master, "--slots", "1", "--name", "agent-a"});
  auto good = Gangrun({"submit", "--master", master, "--worker_num", "1", TestWorkerBinary()});
  EXPECT_EQ(RunToEnd(good).code, 0) << good.Stderr();
  auto bad = Gangrun(
      {"submit", "--master", master, "--worker_num", "1", TestWorkerBinary(), "--exit", "3"});
  EXPECT_EQ(RunToEnd(bad).code, 3) << bad.Stderr();
  auto status = Gangrun({"status", "--master", master});
  EXPECT_EQ(RunToEnd(status).code, 0) << status.Stderr();
  const std::string text = status.Stdout();
  const size_t listed = text.find("finished, newest first");
  ASSERT_NE(listed, std::string::npos) << text;
  const size_t failed = text.find("worker_failed", listed);
  const size_t succeeded = text.find("succeeded", listed);
  ASSERT_NE(failed, std::string::npos) << text;
  ASSERT_NE(succeeded, std::string::npos) << text;
  EXPECT_LT(failed, succeeded) << "newest first: " << text;
  const std::string failed_line = text.substr(failed, text.find('\n', failed) - failed);
  EXPECT_NE(failed_line.find(" 3 "), std::string::npos) << failed_line;
  EXPECT_NE(failed_line.find("--exit 3"), std::string::npos) << failed_line;
  auto json = Gangrun({"status", "--master", master, "--json"});
  EXPECT_EQ(RunToEnd(json).code, 0) << json.Stderr();
  const auto parsed = nlohmann::json::parse(json.Stdout());
  ASSERT_EQ(parsed["finished"].size(), 2u) << json.Stdout();
  EXPECT_EQ(parsed["finished"][1]["outcome"]["kind"], "KIND_SUCCEEDED") << json.Stdout();
  EXPECT_GT(parsed["finished"][0]["ended_unix"].get<double>(),
            parsed["finished"][0]["submitted_unix"].get<double>());
  // One job, finished: `status --job ID`; an unknown one is exit 1 (not there).
  const std::string id = parsed["finished"][0]["job_id"];
  auto one = Gangrun({"status", "--master", master, "--job", id});
  EXPECT_EQ(RunToEnd(one).code, 0) << one.Stderr();
  EXPECT_NE(one.Stdout().find("job " + id + "  finished: worker_failed"), std::string::npos)
      << one.Stdout();
  EXPECT_NE(one.Stdout().find("exited with code 3"), std::string::npos) << one.Stdout();
  // Where its time went, as its launchers said at its end.
  EXPECT_NE(one.Stdout().find("\ntime: "), std::string::npos) << one.Stdout();
  EXPECT_NE(one.Stdout().find(" in all, ETTR "), std::string::npos) << one.Stdout();
  EXPECT_NE(text.find("ETTR"), std::string::npos) << text;
  // Who submitted it (as the submitting host says) and when.
  const passwd* me = getpwuid(geteuid());
  ASSERT_NE(me, nullptr);
  EXPECT_EQ(parsed["finished"][0]["user"], me->pw_name) << json.Stdout();
  const size_t line_start = text.rfind('\n', failed) + 1;
  EXPECT_NE(text.substr(line_start, failed - line_start).find(std::string(" ") + me->pw_name + " "),
            std::string::npos)
      << text.substr(line_start, failed - line_start);
  EXPECT_NE(one.Stdout().find(std::string("submitted 20")), std::string::npos) << one.Stdout();
  EXPECT_NE(one.Stdout().find(std::string(" by ") + me->pw_name), std::string::npos)
      << one.Stdout();
  auto unknown = Gangrun({"status", "--master", master, "--job", "no-such-job"});
  EXPECT_EQ(RunToEnd(unknown).code, 1) << unknown.Stderr();
  EXPECT_NE(unknown.Stderr().find("has no job no-such-job"), std::string::npos) << unknown.Stderr();
  StopDaemon(agent);
  StopDaemon(scheduler);
}

// A daemon's job with --agent_store True: its ranks meet in the store the daemon serves for it.
TEST_F(DaemonTest, ASubmittedTorchJobsRanksMeetInTheStoreTheDaemonServesForIt) {
  ASSERT_TRUE(HasTorch()) << "python3-torch is not installed (deploy/install-deps.sh installs it)";
  std::ofstream(dir_.File("ddp.py")) << R"PY(
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
print("rank %d sum %.1f agent %s" % (dist.get_rank(), t.item(),
      os.environ["TORCHELASTIC_USE_AGENT_STORE"]), flush=True)
dist.destroy_process_group()
)PY";
  const std::string master = "127.0.0.1:" + FreePort();
  auto scheduler = Scheduler({"--listen", master});
  auto agent = Gangrun({"agent", "--master", master, "--slots", "2", "--name", "agent-a"});
  auto submit = Gangrun({"submit", "--master", master, "--worker_num", "2", "--agent_store", "True",
                         "/usr/bin/python3", dir_.File("ddp.py")});
  EXPECT_EQ(RunToEnd(submit).code, 0) << submit.Stderr();
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(submit.Stdout().find("rank " + std::to_string(rank) + " sum 3.0 agent True"),
              std::string::npos)
        << submit.Stdout() << submit.Stderr();
  }
  StopDaemon(agent);
  StopDaemon(scheduler);
}

// A job that waits for a slot has that wait in its ledger: queued, from its submission.
TEST_F(DaemonTest, AJobThatWaitedForASlotWasQueued) {
  const std::string master = "127.0.0.1:" + FreePort();
  auto scheduler = Scheduler({"--listen", master});
  auto agent = Gangrun({"agent", "--master", master, "--slots", "1", "--name", "agent-a"});
  const std::string go = dir_.File("go");
  auto first = Gangrun(
      {"submit", "--master", master, "--worker_num", "1", TestWorkerBinary(), "--wait-file", go});
  ASSERT_TRUE(fifo_.ReadLine(std::chrono::seconds(30)).has_value());  // its worker is running
  auto second = Gangrun({"submit", "--master", master, "--worker_num", "1", TestWorkerBinary()});
  EXPECT_TRUE(WaitForStderr(second, "waiting", std::chrono::seconds(30))) << second.Stderr();
  std::ofstream(go) << "go\n";
  EXPECT_EQ(RunToEnd(first).code, 0) << first.Stderr();
  EXPECT_EQ(RunToEnd(second).code, 0) << second.Stderr();
  auto json = Gangrun({"status", "--master", master, "--json"});
  EXPECT_EQ(RunToEnd(json).code, 0) << json.Stderr();
  const auto parsed = nlohmann::json::parse(json.Stdout());
  ASSERT_EQ(parsed["finished"].size(), 2u) << json.Stdout();
  const auto& ledger = parsed["finished"][0]["outcome"]["ledger"];  // the second, newest first
  ASSERT_TRUE(ledger["seconds"].contains("queued")) << ledger.dump();
  EXPECT_GT(ledger["seconds"]["queued"].get<double>(), 0) << ledger.dump();
  double sum = 0;
  for (const auto& [phase, seconds] : ledger["seconds"].items()) sum += seconds.get<double>();
  EXPECT_NEAR(sum, ledger["wall_seconds"].get<double>(), 0.01 * sum + 1e-3) << ledger.dump();
  // It was queued at least until the first job ended and gave its slot back (the two clocks
  // differ by the daemon's own bookkeeping: 50 ms allowed). Comparing it with the first job's
  // queued time instead was not a property: under ThreadSanitizer the daemon's own work of
  // placing the first (0.30 s) outlasted the second's wait (0.04 s).
  const double first_ended = parsed["finished"][1]["ended_unix"].get<double>();
  const double second_submitted = parsed["finished"][0]["submitted_unix"].get<double>();
  ASSERT_GT(first_ended, second_submitted) << json.Stdout();
  EXPECT_GE(ledger["seconds"]["queued"].get<double>(), first_ended - second_submitted - 0.05)
      << json.Stdout();
  StopDaemon(agent);
  StopDaemon(scheduler);
}

// A finished job's logs stay readable: `gangrun logs --job ID` after its end reads each rank's
// log from the agent that ran it (each agent here keeps its own log root); a rank whose agent
// is gone is named with it.
TEST_F(DaemonTest, AFinishedJobsLogsAreReadFromTheAgentsThatRanIt) {
  const std::string master = "127.0.0.1:" + FreePort();
  auto scheduler = Scheduler({"--listen", master});
  auto agent_a = Gangrun({"agent", "--master", master, "--slots", "1", "--name", "agent-a",
                          "--log_root", dir_.File("logs-a")});
  auto agent_b = Gangrun({"agent", "--master", master, "--slots", "1", "--name", "agent-b",
                          "--log_root", dir_.File("logs-b")});
  auto job = Gangrun({"submit", "--master", master, "--worker_num", "2", "--local_worker_num", "1",
                      TestWorkerBinary(), "--lines", "3"});
  ASSERT_EQ(RunToEnd(job).code, 0) << job.Stderr();
  const std::string id = SubmittedJobId(job.Stderr());
  ASSERT_FALSE(id.empty()) << job.Stderr();

  auto logs = Gangrun({"logs", "--master", master, "--job", id});
  ASSERT_EQ(RunToEnd(logs).code, 0) << logs.Stderr();
  const std::string& out = logs.Stdout();
  // Each rank's lines, from one agent each: the two agents hold one rank each.
  std::string holder_of_1;
  for (const std::string agent : {"agent-a", "agent-b"}) {
    if (out.find("[" + agent + ":1] line 2 of rank 1") != std::string::npos) holder_of_1 = agent;
  }
  ASSERT_FALSE(holder_of_1.empty()) << out;
  const std::string holder_of_0 = holder_of_1 == "agent-a" ? "agent-b" : "agent-a";
  EXPECT_NE(out.find("[" + holder_of_0 + ":0] line 2 of rank 0"), std::string::npos) << out;

  auto one = Gangrun({"logs", "--master", master, "--job", id, "--rank", "1"});
  ASSERT_EQ(RunToEnd(one).code, 0) << one.Stderr();
  EXPECT_NE(one.Stdout().find(":1] line 0 of rank 1"), std::string::npos) << one.Stdout();
  EXPECT_EQ(one.Stdout().find("of rank 0"), std::string::npos) << one.Stdout();
  auto none = Gangrun({"logs", "--master", master, "--job", id, "--rank", "5"});
  EXPECT_NE(RunToEnd(none).code, 0);
  EXPECT_NE(none.Stderr().find("there is no rank 5 in job " + id), std::string::npos)
      << none.Stderr();

  // A log replaced by a link after the job's end (to a file its user may not read, say) is
  // not followed.
  const std::string log_1 =
      dir_.File(holder_of_1 == "agent-a" ? "logs-a" : "logs-b") + "/" + id + "/worker_1.log";
  std::ofstream(dir_.File("secret")) << "not the job's\n";
  ASSERT_EQ(unlink(log_1.c_str()), 0);
  ASSERT_EQ(symlink(dir_.File("secret").c_str(), log_1.c_str()), 0);
  auto linked = Gangrun({"logs", "--master", master, "--job", id, "--rank", "1"});
  RunToEnd(linked);
  EXPECT_EQ(linked.Stdout().find("not the job's"), std::string::npos) << linked.Stdout();
  EXPECT_NE(linked.Stderr().find("is not a file of the job's user"), std::string::npos)
      << linked.Stderr();

  // Rank 1's agent goes: its log cannot be read, and the answer says why.
  StopDaemon(holder_of_1 == "agent-a" ? agent_a : agent_b);
  ASSERT_TRUE(WaitForStderr(scheduler, "'" + holder_of_1 + "' disconnected", seconds(10)));
  auto gone = Gangrun({"logs", "--master", master, "--job", id, "--rank", "1"});
  EXPECT_NE(RunToEnd(gone).code, 0);
  EXPECT_NE(gone.Stderr().find("no agent holds the log of rank 1 of job " + id), std::string::npos)
      << gone.Stderr();
  EXPECT_NE(gone.Stderr().find("not connected: " + holder_of_1), std::string::npos)
      << gone.Stderr();
  StopDaemon(holder_of_1 == "agent-a" ? agent_b : agent_a);
  StopDaemon(scheduler);
}

}  // namespace
}  // namespace gangrun::testing
