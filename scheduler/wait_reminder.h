#pragma once
// Says a wait's line again while the wait lasts, so that no wait is silent until its timeout:
// every 10 s for the wait's first minute, every minute after, each time with how long is left
// before its deadline ("9 m 40 s left"). It knows nothing of what is awaited: its owner's
// `say` callback writes the line (what is missing, who has come) and is given the time left.
//
// Owned by the actor that waits (the scheduler while it forms or waits for a lost node's
// replacement; `gangrun submit` while no agent has the slots); runs on that actor's strand
// through its clock, and is destroyed with it (its timer with it).
//
// Worked example, a wait that started at t = 0 with a 600 s deadline: lines at 10, 20, ...,
// 60 s ("9 m 50 s left", ..., "9 m 0 s left"), then at 120, 180, ... s; Stop() (the job
// formed) ends them.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"

namespace gangrun::scheduler {

class WaitReminder {
 public:
  using Say = std::function<void(const std::string& left)>;
  WaitReminder(common::Clock& clock, Say say) : clock_(clock), say_(std::move(say)) {}

  // Starts reminding from now (no-op while a wait is being reminded of); no deadline: the
  // wait has no limit (a negative --cluster_time_out).
  void Start(std::optional<common::TimePoint> deadline);
  // The wait is over: no more lines until the next Start.
  void Stop() { timer_.reset(); }
  bool active() const { return timer_ != nullptr; }
  // "9 m 40 s left", "no time limit", "no time left".
  std::string Left() const;

  // 10 s while `waited` is under a minute, 60 s after.
  static common::Duration Interval(common::Duration waited);
  // "2 h 5 m", "9 m 40 s", "40 s" (whole seconds, rounded up).
  static std::string Format(common::Duration duration);

 private:
  void Arm();

  common::Clock& clock_;
  Say say_;
  common::TimePoint since_;
  std::optional<common::TimePoint> deadline_;
  std::unique_ptr<common::Timer> timer_;
};

}  // namespace gangrun::scheduler
