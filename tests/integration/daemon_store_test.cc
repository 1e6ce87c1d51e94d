// The daemon on a store (README "The daemon on a store"), against a real etcd member on a
// loopback port: two daemons, one active and one standing by; the active one is killed while
// a job runs, and the standby adopts it with the same worker processes.

#include "store/daemon_store.h"

#include <signal.h>

#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "tests/integration/daemon_fixture.h"
#include "tests/testing/etcd_cluster.h"

namespace gangrun::testing {
namespace {

using std::chrono::seconds;

class DaemonStoreTest : public DaemonTest {
 protected:
  void TearDown() override {
    etcd_.reset();
    DaemonTest::TearDown();
  }
  void StartStore() {
    etcd_ = std::make_unique<EtcdCluster>(dir_.File("etcd"), 1, nullptr);
    ASSERT_TRUE(etcd_->started()) << etcd_->error();
  }
  std::unique_ptr<store::DaemonStore> Store() {
    auto config = store::ParseStoreUrl(etcd_->Url());
    EXPECT_TRUE(config.ok());
    auto client = store::EtcdClient::Connect(*config);
    EXPECT_TRUE(client.ok());
    return std::make_unique<store::DaemonStore>(std::move(*client));
  }
  // The store, a daemon at a_ that is active, and one at b_ that stands by.
  void StartDaemons() {
    ASSERT_NO_FATAL_FAILURE(StartStore());
    a_ = "127.0.0.1:" + FreePort();
    b_ = "127.0.0.1:" + FreePort();
    masters_ = a_ + "," + b_;
    first_ = Scheduler({"--listen", a_, "--store", etcd_->Url()});
    ASSERT_TRUE(WaitForStderr(first_, "is now the active one", seconds(10))) << first_.Stderr();
    second_ = Scheduler({"--listen", b_, "--store", etcd_->Url()});
    ASSERT_TRUE(WaitForStderr(second_, "the active daemon is at " + a_, seconds(10)))
        << second_.Stderr();
  }
  // The ids of the finished jobs whose records the store holds, once they are `count` (the
  // deletions are written after the job's end is answered), or as they are after 30 s.
  std::set<std::string> FinishedRecords(size_t count) {
    const auto deadline = std::chrono::steady_clock::now() + seconds(30);
    std::set<std::string> ids;
    do {
      ids.clear();
      auto jobs = Store()->Jobs();
      if (!jobs.ok()) break;
      for (const auto& job : *jobs) {
        if (job.contains("outcome")) ids.insert(job.value("id", ""));
      }
    } while (ids.size() != count && std::chrono::steady_clock::now() < deadline);
    return ids;
  }
  // A daemon at a_ on the store, active, and an agent with one slot.
  void StartOne(std::vector<std::string> flags) {
    ASSERT_NO_FATAL_FAILURE(StartStore());
    a_ = "127.0.0.1:" + FreePort();
    flags.insert(flags.begin(), {"--listen", a_, "--store", etcd_->Url()});
    first_ = Scheduler(flags);
    ASSERT_TRUE(WaitForStderr(first_, "is now the active one", seconds(10))) << first_.Stderr();
    agent_ = Gangrun({"agent", "--master", a_, "--slots", "1", "--name", "agent-a"});
  }
  // Submits a one-worker job (the test worker's `args`) and waits for its end; its id.
  std::string RunJob(std::vector<std::string> args, int code) {
    std::vector<std::string> command = {"submit",       "--master", a_,
                                        "--worker_num", "1",        TestWorkerBinary()};
    command.insert(command.end(), args.begin(), args.end());
    auto submit = Gangrun(command);
    EXPECT_EQ(RunToEnd(submit).code, code) << submit.Stderr();
    return SubmittedJobId(submit.Stderr());
  }
  std::unique_ptr<EtcdCluster> etcd_;
  std::string a_, b_, masters_;
  Launched agent_;
  Launched first_, second_;
};

TEST_F(DaemonStoreTest, AStandbyAdoptsTheRunningJobWithItsWorkersAndTheSubmitGetsItsOutcome) {
  ASSERT_NO_FATAL_FAILURE(StartDaemons());
  const std::string &b = b_, &masters = masters_;
  Launched &first = first_, &second = second_;
  // The standby answers status naming the active one, and places nothing.
  auto standby = Gangrun({"status", "--master", b, "--json"});
  EXPECT_EQ(RunToEnd(standby).code, 0) << standby.Stderr();
  EXPECT_NE(standby.Stdout().find("\"standby\": true"), std::string::npos) << standby.Stdout();
  auto agent_a = Gangrun({"agent", "--master", masters, "--slots", "2", "--name", "agent-a"});
  auto agent_b = Gangrun({"agent", "--master", masters, "--slots", "2", "--name", "agent-b"});
  const std::string go = dir_.File("go");
  auto submit =
      Gangrun({"submit", "--master", masters, "--worker_num", "4", "--local_worker_num", "2",
               "--node_timeout", "2", TestWorkerBinary(), "--wait-file", go, "--then-exit", "7"});
  const auto before = WaitReady(4);
  std::vector<pid_t> launchers;
  for (const auto& ready : before) launchers.push_back(LauncherOf(ready.pid));

  ASSERT_EQ(kill(first.pid, SIGKILL), 0);
  EXPECT_EQ(RunToEnd(first).signal, SIGKILL);
  ASSERT_TRUE(
      WaitForStderr(second, "goes on under this scheduler: 4 of 4 worker(s) back", seconds(30)))
      << second.Stderr();
  // The same processes: every worker and launcher of before lives on, and none started anew.
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(kill(before[i].pid, 0), 0) << "rank " << before[i].rank << " was restarted";
    EXPECT_EQ(LauncherOf(before[i].pid), launchers[i]);
  }
  auto status = Gangrun({"status", "--master", b, "--json"});
  EXPECT_EQ(RunToEnd(status).code, 0) << status.Stderr();
  for (const auto& ready : before) {
    EXPECT_NE(status.Stdout().find(std::to_string(ready.pid)), std::string::npos)
        << status.Stdout();
  }
  std::ofstream(go) << "go\n";
  // The submit followed its job to the new daemon and exits with the job's own code.
  EXPECT_EQ(RunToEnd(submit).code, 7) << submit.Stderr();
  EXPECT_NE(submit.Stderr().find("following job"), std::string::npos) << submit.Stderr();
  EXPECT_NE(submit.Stderr().find("Root cause: rank 0"), std::string::npos) << submit.Stderr();
  // The job's record: ended, with that outcome.
  auto jobs = Store()->Jobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0]["state"], "ended") << (*jobs)[0].dump();
  EXPECT_EQ((*jobs)[0]["outcome"]["kind"], "worker_failed") << (*jobs)[0].dump();
  for (auto* agent : {&agent_a, &agent_b}) StopDaemon(*agent);
  StopDaemon(second);
}

TEST_F(DaemonStoreTest, AnUnreachableStoreAtStartIsOneLineNamingIt) {
  const std::string url = "etcd://127.0.0.1:" + FreePort();  // nobody listens there
  auto daemon = Gangrun({"scheduler", "--listen", "127.0.0.1:" + FreePort(), "--store", url});
  EXPECT_EQ(RunToEnd(daemon).code, 3) << daemon.Stderr();
  EXPECT_NE(daemon.Stderr().find(url), std::string::npos) << daemon.Stderr();
  auto bad = Gangrun({"scheduler", "--listen", "127.0.0.1:" + FreePort(), "--store", "http://x"});
  EXPECT_EQ(RunToEnd(bad).code, 2) << bad.Stderr();
}

// A daemon paused past its lease (a VM pause, a swap storm) is replaced; when it resumes it
// steps down without touching the job, which goes on under the other with the same workers.
TEST_F(DaemonStoreTest, ADaemonPausedPastItsLeaseStepsDownTouchingNothing) {
  ASSERT_NO_FATAL_FAILURE(StartDaemons());
  const std::string& masters = masters_;
  Launched &first = first_, &second = second_;
  auto agent = Gangrun({"agent", "--master", masters, "--slots", "2", "--name", "agent-a"});
  const std::string go = dir_.File("go");
  auto submit = Gangrun({"submit", "--master", masters, "--worker_num", "2", "--node_timeout", "2",
                         TestWorkerBinary(), "--wait-file", go});
  const auto before = WaitReady(2);
  ASSERT_EQ(kill(first.pid, SIGSTOP), 0);
  ASSERT_TRUE(
      WaitForStderr(second, "goes on under this scheduler: 2 of 2 worker(s) back", seconds(30)))
      << second.Stderr();
  ASSERT_EQ(kill(first.pid, SIGCONT), 0);
  EXPECT_EQ(RunToEnd(first).code, 3) << first.Stderr();
  EXPECT_NE(first.Stderr().find("this daemon steps down, touching no job"), std::string::npos)
      << first.Stderr();
  for (const auto& ready : before) EXPECT_EQ(kill(ready.pid, 0), 0);
  // `status` finds the active daemon among the two (the one that stepped down is gone).
  auto status = Gangrun({"status", "--master", masters});
  EXPECT_EQ(RunToEnd(status).code, 0) << status.Stderr();
  EXPECT_NE(status.Stdout().find("jobs 1 running"), std::string::npos) << status.Stdout();
  std::ofstream(go) << "go\n";
  EXPECT_EQ(RunToEnd(submit).code, 0) << submit.Stderr() << "\nthe daemon:\n"
                                      << second.Stderr() << "\nthe agent:\n"
                                      << agent.Stderr();
  StopDaemon(agent);
  StopDaemon(second);
}

// One daemon on a store, no standby (the shipped unit's Restart=on-failure): it is killed
// while a job runs and started again on the same address; it adopts the job, and the submit,
// which has that one address, follows the job there and exits with the job's own code.
TEST_F(DaemonStoreTest, ADaemonStartedAgainOnItsAddressAdoptsTheJobAndTheSubmitGetsItsOutcome) {
  ASSERT_NO_FATAL_FAILURE(StartStore());
  a_ = "127.0.0.1:" + FreePort();
  first_ = Scheduler({"--listen", a_, "--store", etcd_->Url()});
  ASSERT_TRUE(WaitForStderr(first_, "is now the active one", seconds(10))) << first_.Stderr();
  auto agent = Gangrun({"agent", "--master", a_, "--slots", "2", "--name", "agent-a"});
  const std::string go = dir_.File("go");
  auto submit = Gangrun({"submit", "--master", a_, "--worker_num", "2", "--node_timeout", "2",
                         TestWorkerBinary(), "--wait-file", go, "--then-exit", "5"});
  const auto before = WaitReady(2);
  ASSERT_EQ(kill(first_.pid, SIGKILL), 0);
  EXPECT_EQ(RunToEnd(first_).signal, SIGKILL);
  second_ = Scheduler({"--listen", a_, "--store", etcd_->Url()});
  ASSERT_TRUE(
      WaitForStderr(second_, "goes on under this scheduler: 2 of 2 worker(s) back", seconds(30)))
      << second_.Stderr();
  for (const auto& ready : before) EXPECT_EQ(kill(ready.pid, 0), 0);
  std::ofstream(go) << "go\n";
  EXPECT_EQ(RunToEnd(submit).code, 5) << submit.Stderr() << "\nthe daemon:\n" << second_.Stderr();
  EXPECT_NE(submit.Stderr().find("to the daemon that adopts it there"), std::string::npos)
      << submit.Stderr();
  StopDaemon(agent);
  StopDaemon(second_);
}

// The history survives a failover: a job that ended under the first daemon is listed by the
// second once it is the active one (the store keeps the record).
TEST_F(DaemonStoreTest, FinishedJobsAreListedAfterAFailover) {
  ASSERT_NO_FATAL_FAILURE(StartDaemons());
  auto agent = Gangrun({"agent", "--master", masters_, "--slots", "1", "--name", "agent-a"});
  auto submit = Gangrun({"submit", "--master", masters_, "--worker_num", "1", TestWorkerBinary(),
                         "--lines", "2", "--exit", "4"});
  EXPECT_EQ(RunToEnd(submit).code, 4) << submit.Stderr();
  const std::string id = SubmittedJobId(submit.Stderr());
  ASSERT_FALSE(id.empty()) << submit.Stderr();
  // Its record keeps each failed generation's verdict, with the failure's fingerprint.
  ASSERT_EQ(FinishedRecords(1), (std::set<std::string>{id}));
  auto jobs = Store()->Jobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  const nlohmann::json verdicts = (*jobs)[0].value("verdicts", nlohmann::json::array());
  ASSERT_EQ(verdicts.size(), 1u) << (*jobs)[0].dump();
  EXPECT_EQ(verdicts[0]["generation"], 1);
  EXPECT_EQ(verdicts[0]["fingerprint"], "exit code 4; last line: line # of rank #");
  EXPECT_EQ(verdicts[0]["verdict"], "stop: all 0 restart(s) of --max_restarts are used");
  ASSERT_EQ(kill(first_.pid, SIGKILL), 0);
  EXPECT_EQ(RunToEnd(first_).signal, SIGKILL);
  ASSERT_TRUE(WaitForStderr(second_, "is now the active one", seconds(30))) << second_.Stderr();
  auto status = Gangrun({"status", "--master", b_, "--json"});
  EXPECT_EQ(RunToEnd(status).code, 0) << status.Stderr();
  EXPECT_NE(status.Stdout().find("\"finished\""), std::string::npos) << status.Stdout();
  EXPECT_NE(status.Stdout().find("KIND_WORKER_FAILED"), std::string::npos) << status.Stdout();
  EXPECT_NE(status.Stdout().find("--exit"), std::string::npos) << status.Stdout();
  // Why its generation ended, as the first daemon's record keeps it.
  auto story = Gangrun({"status", "--master", b_, "--job", id});
  EXPECT_EQ(RunToEnd(story).code, 0) << story.Stderr();
  EXPECT_NE(story.Stdout().find("\n  generation 1 ended: rank 0 on "), std::string::npos)
      << story.Stdout();
  // Its logs too, from the agent that ran it, once the agent is back with this daemon.
  ASSERT_TRUE(WaitForStderr(second_, "'agent-a' (127.0.0.1) registered", seconds(30)))
      << second_.Stderr();
  auto logs = Gangrun({"logs", "--master", b_, "--job", id});
  EXPECT_EQ(RunToEnd(logs).code, 0) << logs.Stderr();
  EXPECT_NE(logs.Stdout().find("[agent-a:0] line 1 of rank 0"), std::string::npos)
      << logs.Stdout() << logs.Stderr();
  StopDaemon(agent);
  StopDaemon(second_);
}

// The store keeps the newest --history_count finished jobs' records; the daemon's status lists
// no more than that.
TEST_F(DaemonStoreTest, TheStoreKeepsTheNewestFinishedJobsItIsToldTo) {
  ASSERT_NO_FATAL_FAILURE(StartOne({"--history_count", "2"}));
  std::vector<std::string> ids;
  for (int code : {1, 2, 3}) ids.push_back(RunJob({"--exit", std::to_string(code)}, code));
  ASSERT_FALSE(ids[2].empty());
  EXPECT_EQ(FinishedRecords(2), (std::set<std::string>{ids[1], ids[2]})) << first_.Stderr();
  EXPECT_TRUE(
      WaitForStderr(first_, "deleting 1 finished job record(s) from the store", seconds(10)))
      << first_.Stderr();
  auto status = Gangrun({"status", "--master", a_, "--json"});
  EXPECT_EQ(RunToEnd(status).code, 0) << status.Stderr();
  EXPECT_EQ(status.Stdout().find(ids[0]), std::string::npos) << status.Stdout();
  EXPECT_NE(status.Stdout().find(ids[2]), std::string::npos) << status.Stdout();
  StopDaemon(agent_);
  StopDaemon(first_);
}

// ... and none older than --history_days: 0.00001 days is 0.864 s, and the second job runs
// for 1.5 s after the first has ended, so at its end the first's record is past the bound.
TEST_F(DaemonStoreTest, TheStoreForgetsFinishedJobsPastTheirAge) {
  ASSERT_NO_FATAL_FAILURE(StartOne({"--history_days", "0.00001"}));
  const std::string first = RunJob({"--exit", "0"}, 0);
  const std::string second = RunJob({"--run-ms", "1500"}, 0);
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(FinishedRecords(1), (std::set<std::string>{second})) << first_.Stderr();
  StopDaemon(agent_);
  StopDaemon(first_);
}

// An agent's standing is in the store: the daemon that takes over keeps a drained agent out,
// and says so, before the agent is back.
TEST_F(DaemonStoreTest, ADrainedAgentStaysDrainedAfterAFailover) {
  ASSERT_NO_FATAL_FAILURE(StartDaemons());
  auto agent = Gangrun({"agent", "--master", masters_, "--slots", "1", "--name", "agent-a"});
  ASSERT_TRUE(WaitForStderr(first_, "'agent-a' (127.0.0.1) registered", seconds(10)))
      << first_.Stderr();
  auto drain = Gangrun({"drain", "--master", a_, "agent-a", "--reason", "bad fan"});
  EXPECT_EQ(RunToEnd(drain).code, 0) << drain.Stderr();
  // Written once the store has it (the daemon's store thread writes it after answering).
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  bool stored = false;
  while (!stored && std::chrono::steady_clock::now() < deadline) {
    auto agents = Store()->Agents();
    stored = agents.ok() && agents->size() == 1 && (*agents)[0].value("state", "") == "drained";
  }
  ASSERT_TRUE(stored);
  ASSERT_EQ(kill(first_.pid, SIGKILL), 0);
  EXPECT_EQ(RunToEnd(first_).signal, SIGKILL);
  ASSERT_TRUE(WaitForStderr(second_, "is now the active one", seconds(30))) << second_.Stderr();
  EXPECT_NE(second_.Stderr().find("1 agent record(s)"), std::string::npos) << second_.Stderr();
  auto status = Gangrun({"status", "--master", b_, "--json"});
  EXPECT_EQ(RunToEnd(status).code, 0) << status.Stderr();
  const auto parsed = nlohmann::json::parse(status.Stdout());
  ASSERT_EQ(parsed["agents"].size(), 1u) << status.Stdout();
  EXPECT_EQ(parsed["agents"][0]["name"], "agent-a") << status.Stdout();
  EXPECT_EQ(parsed["agents"][0]["state"], "drained") << status.Stdout();
  EXPECT_EQ(parsed["agents"][0]["reason"], "bad fan") << status.Stdout();
  // Back with this daemon, it takes no job until undrained here.
  ASSERT_TRUE(WaitForStderr(second_, "'agent-a' (127.0.0.1) registered", seconds(30)))
      << second_.Stderr();
  auto submit = Gangrun({"submit", "--master", b_, "--worker_num", "1", TestWorkerBinary()});
  ASSERT_TRUE(WaitForStderr(submit, "(1 more quarantined or drained", seconds(10)))
      << submit.Stderr();
  auto undrain = Gangrun({"undrain", "--master", b_, "agent-a"});
  EXPECT_EQ(RunToEnd(undrain).code, 0) << undrain.Stderr();
  EXPECT_EQ(RunToEnd(submit).code, 0) << submit.Stderr();
  StopDaemon(agent);
  StopDaemon(second_);
}

}  // namespace
}  // namespace gangrun::testing
