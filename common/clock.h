#pragma once
// Time, injected: daemon code asks a Clock for the time and for timers, so tests can run
// timeouts and grace periods on a FakeClock instead of sleeping.

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <functional>
#include <memory>

namespace gangrun::common {

using Duration = std::chrono::steady_clock::duration;

// A duration in seconds, as people and JSON read it, and back (as options and the wire give
// it; a value beyond about 292 years does not fit a Duration: callers bound theirs). The one
// owner of seconds conversions.
inline double SecondsOf(Duration d) { return std::chrono::duration<double>(d).count(); }
// The wall clock, in seconds since the epoch (for records that outlive the process).
inline double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
inline Duration DurationOf(double seconds) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
}
using TimePoint = std::chrono::steady_clock::time_point;

// A pending timer. Destroying or cancelling it guarantees the callback will not run.
class Timer {
 public:
  virtual ~Timer() = default;
  virtual void Cancel() = 0;
};

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
  // Runs `callback` once, `delay` from now, on the clock's executor.
  virtual std::unique_ptr<Timer> After(Duration delay, std::function<void()> callback) = 0;
};

// The real clock: std::chrono::steady_clock and asio steady_timers on one executor.
// Callbacks run on that executor; the clock must outlive its timers' callbacks' executor.
class AsioClock : public Clock {
 public:
  explicit AsioClock(boost::asio::any_io_executor executor) : executor_(std::move(executor)) {}
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  std::unique_ptr<Timer> After(Duration delay, std::function<void()> callback) override;

 private:
  boost::asio::any_io_executor executor_;
};

}  // namespace gangrun::common
