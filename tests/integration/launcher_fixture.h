#pragma once
// Runs the real gangrun binary with the test worker, in a temporary directory.

#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/testing/process_test.h"

namespace gangrun::testing {

// Debian's python3-torch, for Debian's own interpreter (/usr/bin/python3).
inline bool HasTorch() {
  return std::system("/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null") == 0;
}

// The ledger of the last job_finished event in an --event_log file (null when there is none).
inline nlohmann::json FinishedLedger(const std::string& event_log) {
  std::ifstream events(event_log);
  nlohmann::json ledger;
  for (std::string line; std::getline(events, line);) {
    auto event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (event.is_object() && event.value("event", "") == "job_finished" &&
        event.contains("ledger")) {
      ledger = event["ledger"];
    }
  }
  return ledger;
}

class LauncherTest : public ProcessTest {
 protected:
  LauncherTest() : fifo_(dir_.File("reports")) {}

  // gangrun <launcher_args> test_worker <worker_args>
  Launched Start(const std::vector<std::string>& launcher_args,
                 const std::vector<std::string>& worker_args,
                 const std::string& binary = GangrunBinary()) {
    std::vector<std::string> argv = {binary};
    argv.insert(argv.end(), launcher_args.begin(), launcher_args.end());
    argv.push_back(TestWorkerBinary());
    argv.insert(argv.end(), worker_args.begin(), worker_args.end());
    return Launch(argv, {"GANGRUN_TEST_READY=" + fifo_.path()}, dir_.path(), dir_.path());
  }

  // Starts, waits for the exit (60 s at most unless told) and returns it.
  common::ExitStatus RunToEnd(const Launched& launched,
                              std::chrono::seconds bound = std::chrono::seconds(60)) {
    if (launched.pid <= 0) return common::ExitStatus::Exited(-1);  // never started
    auto status = WaitExit(launched.pid, bound);
    EXPECT_TRUE(status.has_value()) << "the launcher did not exit";
    return status.value_or(common::ExitStatus::Exited(-1));
  }

  struct Ready {
    int rank;
    pid_t pid;
    pid_t grandchild;
  };
  // Waits for `count` workers to report "ready".
  std::vector<Ready> WaitReady(size_t count) {
    std::vector<Ready> ready;
    // A bound for a failure, not a timing: two launchers with TLS under ThreadSanitizer took
    // 2.5 s to be ready here, 12 s beside eight busy loops (its first race report, suppressed,
    // symbolizes the whole binary: ~2 s of CPU in each process).
    for (const auto& line : fifo_.ReadLines(count, std::chrono::seconds(60))) {
      auto f = Split(line, ' ');
      if (f.size() == 4 && f[0] == "ready") {
        ready.push_back({std::stoi(f[1]), std::stoi(f[2]), std::stoi(f[3])});
      }
    }
    EXPECT_EQ(ready.size(), count) << "workers did not report ready";
    return ready;
  }

  TempDir dir_;
  ReportFifo fifo_;
};

}  // namespace gangrun::testing
