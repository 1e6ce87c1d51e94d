#include "tests/testing/fake_clock.h"

namespace gangrun::testing {
namespace {

class FakeTimer : public common::Timer {
 public:
  FakeTimer(
      std::weak_ptr<std::multimap<std::pair<common::TimePoint, uint64_t>, std::function<void()>>>
          timers,
      std::pair<common::TimePoint, uint64_t> key)
      : timers_(std::move(timers)), key_(key) {}
  ~FakeTimer() override { Cancel(); }
  void Cancel() override {
    if (auto timers = timers_.lock()) timers->erase(key_);
  }

 private:
  std::weak_ptr<std::multimap<std::pair<common::TimePoint, uint64_t>, std::function<void()>>>
      timers_;
  std::pair<common::TimePoint, uint64_t> key_;
};

}  // namespace

FakeClock::FakeClock()
    : now_(common::TimePoint() + std::chrono::hours(1)), timers_(std::make_shared<TimerMap>()) {}

FakeClock::~FakeClock() = default;

std::unique_ptr<common::Timer> FakeClock::After(common::Duration delay,
                                                std::function<void()> callback) {
  std::pair<common::TimePoint, uint64_t> key{now_ + delay, next_id_++};
  timers_->emplace(key, std::move(callback));
  return std::make_unique<FakeTimer>(timers_, key);
}

void FakeClock::Advance(common::Duration delta) {
  const common::TimePoint target = now_ + delta;
  while (!timers_->empty() && timers_->begin()->first.first <= target) {
    auto it = timers_->begin();
    now_ = it->first.first;
    auto callback = std::move(it->second);
    timers_->erase(it);
    callback();
  }
  now_ = target;
}

void FakeClock::Stall(common::Duration delta) {
  now_ += delta;
  while (!timers_->empty() && timers_->begin()->first.first <= now_) {
    auto it = timers_->begin();
    auto callback = std::move(it->second);
    timers_->erase(it);
    callback();
  }
}

}  // namespace gangrun::testing
