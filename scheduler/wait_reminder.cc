#include "scheduler/wait_reminder.h"

namespace gangrun::scheduler {

using std::chrono::seconds;

common::Duration WaitReminder::Interval(common::Duration waited) {
  return waited < std::chrono::minutes(1) ? common::Duration(seconds(10))
                                          : common::Duration(seconds(60));
}

std::string WaitReminder::Format(common::Duration duration) {
  // Rounded up: a deadline 9.2 s away is "10 s", never "9 s" (which would pass first).
  const auto total = std::chrono::ceil<seconds>(duration).count();
  const long long hours = total / 3600, minutes = total % 3600 / 60, rest = total % 60;
  if (hours > 0) return std::to_string(hours) + " h " + std::to_string(minutes) + " m";
  if (minutes > 0) return std::to_string(minutes) + " m " + std::to_string(rest) + " s";
  return std::to_string(rest) + " s";
}

std::string WaitReminder::Left() const {
  if (!deadline_) return "no time limit";
  const common::Duration left = *deadline_ - clock_.Now();
  if (left <= common::Duration::zero()) return "no time left";
  return Format(left) + " left";
}

void WaitReminder::Start(std::optional<common::TimePoint> deadline) {
  if (timer_) return;
  since_ = clock_.Now();
  deadline_ = deadline;
  Arm();
}

void WaitReminder::Arm() {
  timer_ = clock_.After(Interval(clock_.Now() - since_), [this] {
    say_(Left());
    if (timer_) Arm();  // unless `say` stopped it (the wait is over)
  });
}

}  // namespace gangrun::scheduler
