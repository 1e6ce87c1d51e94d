#include "scheduler/kv_store.h"

#include "absl/strings/numbers.h"

namespace gangrun::scheduler {

absl::Status KvStore::CheckKey(const std::string& key) const {
  if (key.empty()) return absl::InvalidArgumentError("empty key");
  if (key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError("key longer than " + std::to_string(kMaxKeyBytes) + " bytes");
  }
  return absl::OkStatus();
}

absl::Status KvStore::Put(const std::string& key, std::string value) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  if (value.size() > kMaxValueBytes) {
    return absl::InvalidArgumentError("value larger than " + std::to_string(kMaxValueBytes) +
                                      " bytes");
  }
  if (values_.size() >= kMaxKeys && values_.count(key) == 0) {
    return absl::ResourceExhaustedError("the store holds " + std::to_string(kMaxKeys) + " keys");
  }
  values_[key] = std::move(value);
  auto it = waiters_.find(key);
  if (it != waiters_.end()) {
    std::list<Waiter> ready = std::move(it->second);
    waiters_.erase(it);
    for (auto& waiter : ready) {
      waiter.timer.reset();
      waiter.done(values_[key]);
    }
  }
  return absl::OkStatus();
}

void KvStore::Get(const std::string& key, common::Duration wait, GetCallback done) {
  if (absl::Status s = CheckKey(key); !s.ok()) return done(s);
  auto it = values_.find(key);
  if (it != values_.end()) return done(it->second);
  if (wait == common::Duration::zero()) return done(absl::NotFoundError("no key '" + key + "'"));
  auto& list = waiters_[key];
  auto waiter = list.insert(list.end(), Waiter{std::move(done), nullptr});
  if (wait > common::Duration::zero()) {
    waiter->timer = clock_.After(wait, [this, key, waiter] {
      GetCallback callback = std::move(waiter->done);
      auto& pending = waiters_[key];
      pending.erase(waiter);
      if (pending.empty()) waiters_.erase(key);
      callback(absl::DeadlineExceededError("timed out waiting for key '" + key + "'"));
    });
  }
}

absl::StatusOr<int64_t> KvStore::Add(const std::string& key, int64_t delta) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  int64_t value = 0;
  auto it = values_.find(key);
  if (it != values_.end() && !absl::SimpleAtoi(it->second, &value)) {
    return absl::FailedPreconditionError("key '" + key + "' does not hold an integer");
  }
  value += delta;
  absl::Status status = Put(key, std::to_string(value));
  if (!status.ok()) return status;
  return value;
}

bool KvStore::Delete(const std::string& key) { return values_.erase(key) > 0; }

void KvStore::Barrier(const std::string& name, int count, common::Duration wait,
                      BarrierCallback done) {
  if (absl::Status s = CheckKey(name); !s.ok()) return done(s);
  if (count <= 0) return done(absl::InvalidArgumentError("barrier count must be positive"));
  BarrierState& barrier = barriers_[name];
  if (barrier.count != 0 && barrier.count != count) {
    return done(absl::InvalidArgumentError("barrier '" + name + "' is for " +
                                           std::to_string(barrier.count) + ", not " +
                                           std::to_string(count)));
  }
  barrier.count = count;
  auto entry = barrier.arrived.insert(barrier.arrived.end(), {std::move(done), nullptr});
  if (static_cast<int>(barrier.arrived.size()) == count) {
    auto arrived = std::move(barrier.arrived);
    barriers_.erase(name);
    for (auto& [callback, timer] : arrived) {
      timer.reset();
      callback(absl::OkStatus());
    }
    return;
  }
  if (wait > common::Duration::zero()) {
    entry->second = clock_.After(wait, [this, name, entry] {
      BarrierCallback callback = std::move(entry->first);
      auto& state = barriers_[name];
      state.arrived.erase(entry);
      if (state.arrived.empty()) barriers_.erase(name);
      callback(absl::DeadlineExceededError("timed out in barrier '" + name + "'"));
    });
  }
}

void KvStore::CancelAll() {
  auto waiters = std::move(waiters_);
  auto barriers = std::move(barriers_);
  waiters_.clear();
  barriers_.clear();
  for (auto& [key, list] : waiters) {
    for (auto& waiter : list) {
      waiter.timer.reset();
      waiter.done(absl::CancelledError("the job is over"));
    }
  }
  for (auto& [name, state] : barriers) {
    for (auto& [callback, timer] : state.arrived) {
      timer.reset();
      callback(absl::CancelledError("the job is over"));
    }
  }
}

}  // namespace gangrun::scheduler
