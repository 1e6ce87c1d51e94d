#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "daemon/daemon.h"
#include "proto/conversions.h"
#include "tests/testing/fake_clock.h"

namespace gangrun::daemon {
namespace {

TEST(DaemonMetricsTest, EveryOutcomeIsExportedHungIncluded) {
  boost::asio::io_context io;
  testing::FakeClock clock;
  Daemon::Options options;
  options.listen_host = "127.0.0.1";
  Daemon daemon(io, clock, options, [](const v1::SubmitJob&) -> absl::StatusOr<Daemon::JobConfig> {
    return absl::InvalidArgumentError("no jobs here");
  });
  const std::string text = daemon.Metrics();
  for (const char* outcome : {"succeeded", "worker_failed", "stopped_by_signal", "formation_failed",
                              "node_lost", "hung"}) {
    EXPECT_NE(
        text.find(std::string("\ngangrun_jobs_finished_total{outcome=\"") + outcome + "\"} 0\n"),
        std::string::npos)
        << outcome << " in:\n"
        << text;
  }
  EXPECT_EQ(text.find("unspecified"), std::string::npos) << text;
}

}  // namespace
}  // namespace gangrun::daemon
