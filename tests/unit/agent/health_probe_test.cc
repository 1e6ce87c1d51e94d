// The agent's health check as the daemon's probe runs it (agent/health_probe.h): a pass, a
// failure with its last line of output, a check past its timeout, and two probes asked while
// one runs sharing its verdict. Real processes on a real clock; the test reaps, as the agent
// (a subreaper) does.

#include "agent/health_probe.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "common/clock.h"

namespace gangrun::agent {
namespace {

using std::chrono::milliseconds;

struct Verdict {
  bool healthy = false;
  std::string message;
};

// Runs the probe to its verdicts (`runs` of them asked at once), reaping as the agent does.
std::vector<Verdict> Probe(const std::string& command, milliseconds timeout, int runs = 1) {
  boost::asio::io_context io;
  common::AsioClock clock(io.get_executor());
  HealthProbe probe(io, clock, command, timeout);
  std::vector<Verdict> verdicts;
  for (int i = 0; i < runs; ++i) {
    probe.Run([&](bool healthy, const std::string& message) {
      verdicts.push_back({healthy, message});
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (static_cast<int>(verdicts.size()) < runs && std::chrono::steady_clock::now() < deadline) {
    io.run_for(milliseconds(5));
    int status = 0;
    // Not every child reaped here is the check (an earlier test's, say), as for the agent.
    for (pid_t pid; (pid = waitpid(-1, &status, WNOHANG)) > 0;) {
      probe.OnReaped(pid, common::ExitStatus::FromWaitStatus(status));
    }
  }
  return verdicts;
}

TEST(HealthProbeTest, APassingCheckIsHealthy) {
  auto verdicts = Probe("echo all good", milliseconds(10000));
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_TRUE(verdicts[0].healthy) << verdicts[0].message;
  EXPECT_NE(verdicts[0].message.find("health check 'echo all good' exited with code 0: all good"),
            std::string::npos)
      << verdicts[0].message;
}

TEST(HealthProbeTest, AFailingCheckSaysHowItEndedAndItsLastLine) {
  auto verdicts = Probe("echo first; echo 'ECC errors: 12' >&2; exit 3", milliseconds(10000));
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_FALSE(verdicts[0].healthy);
  EXPECT_NE(verdicts[0].message.find("exited with code 3: ECC errors: 12"), std::string::npos)
      << verdicts[0].message;
}

TEST(HealthProbeTest, ACheckPastItsTimeoutIsKilledAndUnhealthy) {
  const auto started = std::chrono::steady_clock::now();
  auto verdicts = Probe("echo waiting; sleep 100", milliseconds(200));
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_FALSE(verdicts[0].healthy);
  EXPECT_NE(verdicts[0].message.find("timed out"), std::string::npos) << verdicts[0].message;
  EXPECT_NE(verdicts[0].message.find(": waiting"), std::string::npos) << verdicts[0].message;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
}

TEST(HealthProbeTest, ProbesAskedWhileOneRunsShareItsVerdict) {
  auto verdicts = Probe("exit 0", milliseconds(10000), 2);
  ASSERT_EQ(verdicts.size(), 2u);
  EXPECT_TRUE(verdicts[0].healthy);
  EXPECT_EQ(verdicts[0].message, verdicts[1].message);
}

}  // namespace
}  // namespace gangrun::agent
