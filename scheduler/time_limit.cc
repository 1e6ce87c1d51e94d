// The job's time limit (scheduler/time_limit.h).

#include "scheduler/time_limit.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/exit_status.h"
#include "common/logging.h"

namespace gangrun::scheduler {

using common::SecondsOf;

void TimeLimit::Arm() {
  if (options_.limit <= common::Duration::zero() || armed_at_) return;
  armed_at_ = clock_.Now();
  limit_timer_ = clock_.After(options_.limit, [this] { OnLimit(); });
  if (options_.signal == 0 || options_.signal_before >= options_.limit) return;
  signal_timer_ = clock_.After(options_.limit - options_.signal_before, [this] {
    signal_timer_.reset();
    nodes_.Record(Event::kTimeLimit, {{"signal", common::SignalName(options_.signal)},
                                      {"seconds_left", SecondsOf(options_.signal_before)}});
    signal_workers_(options_.signal, absl::StrCat(SecondsOf(options_.signal_before),
                                                  " s before the job's time limit "
                                                  "(--time_limit_signal)"));
  });
}

std::optional<common::Duration> TimeLimit::Left() const {
  if (!armed_at_ || reached_at_) return std::nullopt;
  return std::max(common::Duration::zero(), *armed_at_ + options_.limit - clock_.Now());
}

std::string TimeLimit::Why() const {
  return absl::StrCat("the job reached its time limit of ", SecondsOf(options_.limit), " s");
}

void TimeLimit::OnLimit() {
  limit_timer_.reset();
  signal_timer_.reset();
  if (nodes_.state() == JobState::kFinished) return;
  reached_at_ = clock_.Now();
  common::Logger("scheduler")->warn("{}: stopping it", Why());
  nodes_.Record(Event::kTimeLimit, {{"time_limit_seconds", SecondsOf(options_.limit)}});
  reached_(Why());
}

}  // namespace gangrun::scheduler
