#pragma once
// A ProcessBackend that records what it is asked to do; tests decide when processes start
// and exit.

#include <csignal>
#include <map>
#include <vector>

#include "node/process_backend.h"

namespace gangrun::node {

class FakeBackend : public ProcessBackend {
 public:
  struct Signal {
    pid_t pgid;
    int sig;
    bool operator==(const Signal& o) const { return pgid == o.pgid && sig == o.sig; }
  };

  void Spawn(const ProcessSpec& spec, std::function<void(absl::StatusOr<pid_t>)> done) override {
    spawned.push_back(spec);
    pending.push_back(std::move(done));
  }
  void SignalGroup(pid_t pgid, int sig) override { signals.push_back({pgid, sig}); }
  void SetExitHandler(std::function<void(pid_t, common::ExitStatus)> handler) override {
    on_exit = std::move(handler);
  }

  // Answers the oldest pending spawn.
  void Start(pid_t pid) { Answer(pid); }
  void FailStart(const std::string& why) { Answer(absl::UnavailableError(why)); }
  void Exit(pid_t pid, common::ExitStatus status) { on_exit(pid, status); }
  int CountSignals(int sig) const {
    int n = 0;
    for (const auto& s : signals) n += s.sig == sig;
    return n;
  }

  std::vector<ProcessSpec> spawned;
  std::vector<std::function<void(absl::StatusOr<pid_t>)>> pending;
  std::vector<Signal> signals;
  std::function<void(pid_t, common::ExitStatus)> on_exit;

 private:
  void Answer(absl::StatusOr<pid_t> result) {
    auto done = std::move(pending.front());
    pending.erase(pending.begin());
    done(std::move(result));
  }
};

}  // namespace gangrun::node
