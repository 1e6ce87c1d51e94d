#pragma once
// The job's time limit (--time_limit, with --time_limit_signal's early warning): a component of
// the scheduler (scheduler/node_directory.h) that owns its two timers. From Arm (the
// scheduler's start), `signal_before` before the limit it has the workers sent `signal` (their
// chance to save a checkpoint), and at the limit it tells the core, which stops the job
// (KIND_TIME_LIMIT). On the scheduler's strand.
//
// Example: --time_limit 3600 --time_limit_signal SIGUSR1@120: SIGUSR1 to every worker at
// 3480 s, the job stopped at 3600 s.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "scheduler/node_directory.h"

namespace gangrun::scheduler {

class TimeLimit {
 public:
  struct Options {
    common::Duration limit{};          // zero: no limit
    int signal = 0;                    // 0: no early warning
    common::Duration signal_before{};  // how long before the limit the signal goes
  };
  // Sends `signal` to every worker of the running generation, saying `why`.
  using SignalWorkers = std::function<void(int signal, const std::string& why)>;
  // The limit passed: the core stops the job, saying `why`.
  using Reached = std::function<void(const std::string& why)>;

  TimeLimit(NodeDirectory& nodes, common::Clock& clock, Options options,
            SignalWorkers signal_workers, Reached reached)
      : nodes_(nodes),
        clock_(clock),
        options_(options),
        signal_workers_(std::move(signal_workers)),
        reached_(std::move(reached)) {}
  TimeLimit(const TimeLimit&) = delete;
  TimeLimit& operator=(const TimeLimit&) = delete;

  // Starts the clock (once: at the scheduler's start); nothing without a limit.
  void Arm();
  // The limit has passed (nothing restarts or re-forms after it).
  bool reached() const { return reached_at_.has_value(); }
  // Until the limit, from now (never negative); nullopt without a limit or once reached.
  std::optional<common::Duration> Left() const;
  // "the job reached its time limit of 3600 s".
  std::string Why() const;

 private:
  void OnLimit();

  NodeDirectory& nodes_;
  common::Clock& clock_;
  Options options_;
  SignalWorkers signal_workers_;
  Reached reached_;
  std::optional<common::TimePoint> armed_at_;
  std::optional<common::TimePoint> reached_at_;
  std::unique_ptr<common::Timer> limit_timer_;
  std::unique_ptr<common::Timer> signal_timer_;
};

}  // namespace gangrun::scheduler
