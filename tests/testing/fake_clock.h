#pragma once
// A clock that only moves when a test calls Advance(); due callbacks run inside Advance(),
// in deadline order, on the caller's thread.

#include <map>
#include <memory>

#include "common/clock.h"

namespace gangrun::testing {

class FakeClock : public common::Clock {
 public:
  FakeClock();
  ~FakeClock() override;
  common::TimePoint Now() const override { return now_; }
  std::unique_ptr<common::Timer> After(common::Duration delay,
                                       std::function<void()> callback) override;

  // Moves time forward by `delta`, running every timer that falls due on the way.
  void Advance(common::Duration delta);
  // Moves time forward by `delta` at once and only then runs what fell due, late, as a
  // process that was stopped (or whose host stalled) for `delta` experiences it.
  void Stall(common::Duration delta);
  size_t pending_timers() const { return timers_->size(); }

 private:
  using TimerMap = std::multimap<std::pair<common::TimePoint, uint64_t>, std::function<void()>>;
  common::TimePoint now_;
  uint64_t next_id_ = 0;
  std::shared_ptr<TimerMap> timers_;
};

}  // namespace gangrun::testing
