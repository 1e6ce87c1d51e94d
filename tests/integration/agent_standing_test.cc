// Agents' standing across a daemon's jobs (README "Agents' standing"): an agent that failed a
// job is kept out of the next one until its health check passes; an operator's drain and
// undrain. Real daemon, agents and launchers on loopback.

#include <fstream>
#include <string>

#include "tests/integration/daemon_fixture.h"

namespace gangrun::testing {
namespace {

using std::chrono::seconds;

TEST_F(DaemonTest, AnAgentAJobExcludedStaysOutOfTheNextJobUntilItsHealthCheckPasses) {
  const std::string master = "127.0.0.1:" + FreePort();
  auto scheduler =
      Scheduler({"--listen", master, "--quarantine_after", "1", "--probe_interval", "0.2"});
  auto a = Gangrun({"agent", "--master", master, "--slots", "1", "--name", "agent-a"});
  ASSERT_TRUE(WaitForStderr(scheduler, "'agent-a' (127.0.0.1) registered", seconds(10)))
      << scheduler.Stderr();
  // agent-b registers second: the job's node rank 1, where rank 1 fails.
  const std::string healthy = dir_.File("agent-b-healthy");
  auto b =
      Gangrun({"agent", "--master", master, "--slots", "1", "--name", "agent-b", "--health_check",
               "test -e '" + healthy + "' || { echo 'no " + "marker'; exit 1; }"});
  ASSERT_TRUE(WaitForStderr(scheduler, "'agent-b' (127.0.0.1) registered", seconds(10)))
      << scheduler.Stderr();
  auto first = Gangrun({"submit", "--master", master, "--worker_num", "2", "--exclude_after", "1",
                        "--max_restarts", "1", "--restart_backoff", "0.1", TestWorkerBinary(),
                        "--fail-rank", "1", "--exit", "3"});
  EXPECT_NE(RunToEnd(first).code, 0) << first.Stderr();
  ASSERT_TRUE(WaitForStderr(scheduler, "agent 'agent-b' is quarantined", seconds(10)))
      << scheduler.Stderr();
  EXPECT_NE(scheduler.Stderr().find("1 failures attributed to it within 86400 s "
                                    "(--quarantine_after 1), the last in job " +
                                    SubmittedJobId(first.Stderr()) + ": excluded: "),
            std::string::npos)
      << scheduler.Stderr();
  auto status = Gangrun({"status", "--master", master});
  EXPECT_EQ(RunToEnd(status).code, 0) << status.Stderr();
  EXPECT_NE(status.Stdout().find("quarantined since "), std::string::npos) << status.Stdout();
  EXPECT_NE(status.Stdout().find("1 failure(s) attributed to it; the last "), std::string::npos)
      << status.Stdout();
  // The next job needs both agents: it waits, saying why, while agent-b's probe fails.
  auto second = Gangrun({"submit", "--master", master, "--worker_num", "2", TestWorkerBinary()});
  ASSERT_TRUE(WaitForStderr(second, "1 more quarantined or drained", seconds(10)))
      << second.Stderr();
  // A bound, not a pace: a loaded machine under ThreadSanitizer once took longer than 10 s.
  ASSERT_TRUE(
      WaitForStderr(scheduler, "agent 'agent-b' stays quarantined: health check", seconds(30)))
      << scheduler.Stderr() << b.Stderr();
  EXPECT_NE(scheduler.Stderr().find("exited with code 1: no marker"), std::string::npos)
      << scheduler.Stderr();
  // Its check passes: it is placed again and the job runs there.
  { std::ofstream(healthy) << "ok\n"; }
  EXPECT_EQ(RunToEnd(second).code, 0) << second.Stderr();
  EXPECT_NE(scheduler.Stderr().find("agent 'agent-b' is placed again (quarantined before): its "
                                    "health check passed"),
            std::string::npos)
      << scheduler.Stderr();
  StopDaemon(a);
  StopDaemon(b);
  StopDaemon(scheduler);
}

TEST_F(DaemonTest, AnOperatorDrainsAnAgentAndUndrainsIt) {
  const std::string master = "127.0.0.1:" + FreePort();
  auto scheduler = Scheduler({"--listen", master});
  auto agent = Gangrun({"agent", "--master", master, "--slots", "1", "--name", "agent-a"});
  ASSERT_TRUE(WaitForStderr(scheduler, "'agent-a' (127.0.0.1) registered", seconds(10)))
      << scheduler.Stderr();
  auto unknown = Gangrun({"drain", "--master", master, "nobody"});
  EXPECT_NE(RunToEnd(unknown).code, 0);
  EXPECT_NE(unknown.Stderr().find("no agent named 'nobody' is registered or recorded "
                                  "(registered: agent-a)"),
            std::string::npos)
      << unknown.Stderr();
  auto drain = Gangrun({"drain", "--master", master, "agent-a", "--reason", "disk swap"});
  EXPECT_EQ(RunToEnd(drain).code, 0) << drain.Stderr();
  EXPECT_NE(drain.Stdout().find("gangrun drain: agent 'agent-a': ok -> drained"), std::string::npos)
      << drain.Stdout();
  auto status = Gangrun({"status", "--master", master});
  EXPECT_EQ(RunToEnd(status).code, 0) << status.Stderr();
  EXPECT_NE(status.Stdout().find(" drained "), std::string::npos) << status.Stdout();
  EXPECT_NE(status.Stdout().find("drained since "), std::string::npos) << status.Stdout();
  EXPECT_NE(status.Stdout().find(": disk swap\n"), std::string::npos) << status.Stdout();
  auto submit = Gangrun({"submit", "--master", master, "--worker_num", "1", TestWorkerBinary()});
  ASSERT_TRUE(WaitForStderr(submit, "(1 more quarantined or drained", seconds(10)))
      << submit.Stderr();
  auto undrain = Gangrun({"undrain", "--master", master, "agent-a"});
  EXPECT_EQ(RunToEnd(undrain).code, 0) << undrain.Stderr();
  EXPECT_NE(undrain.Stdout().find("agent 'agent-a': drained -> ok"), std::string::npos)
      << undrain.Stdout();
  EXPECT_EQ(RunToEnd(submit).code, 0) << submit.Stderr();
  auto again = Gangrun({"undrain", "--master", master, "agent-a"});
  EXPECT_EQ(RunToEnd(again).code, 0) << again.Stderr();
  EXPECT_NE(again.Stdout().find("agent 'agent-a' is ok already; nothing changed"),
            std::string::npos)
      << again.Stdout();
  // Each change is an event in the daemon's log.
  EXPECT_NE(scheduler.Stderr().find("agent 'agent-a' is drained: no job is placed on it until "
                                    "`gangrun undrain agent-a`: disk swap"),
            std::string::npos)
      << scheduler.Stderr();
  StopDaemon(agent);
  StopDaemon(scheduler);
}

}  // namespace
}  // namespace gangrun::testing
