#include "scheduler/kv_store.h"

#include <malloc.h>

#include "absl/strings/numbers.h"

namespace gangrun::scheduler {
namespace {

uint64_t EntryBytes(const std::string& key, const std::string& value) {
  return key.size() + value.size() + KvStore::kEntryOverhead;
}

// Past this much freed since the last time, hand free heap pages back to the system.
constexpr size_t kTrimAfterBytes = 16 << 20;

}  // namespace

KvStore::KvStore(common::Clock& clock, Limits limits) : clock_(clock), limits_(limits) {}

KvStore::~KvStore() = default;

absl::Status KvStore::CheckKey(const std::string& key) const {
  if (key.empty()) return absl::InvalidArgumentError("empty key");
  if (key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError("key longer than " + std::to_string(kMaxKeyBytes) + " bytes");
  }
  return absl::OkStatus();
}

absl::Status KvStore::CheckWaitBound() const {
  if (waits_.size() < limits_.max_pending_waits) return absl::OkStatus();
  return absl::ResourceExhaustedError("the key-value store already has " +
                                      std::to_string(limits_.max_pending_waits) +
                                      " pending waits and barrier arrivals (its bound)");
}

absl::Status KvStore::CheckRoom(uint64_t more) const {
  if (bytes_ + more <= limits_.max_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      "the key-value store is full: " + std::to_string(bytes_) + " of its " +
      std::to_string(limits_.max_bytes) +
      " bytes (--kv_max_bytes) are used; delete keys or raise --kv_max_bytes");
}

absl::Status KvStore::Put(const std::string& key, std::string value) {
  GANGRUN_ON_STRAND(strand_);
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  if (value.size() > kMaxValueBytes) {
    return absl::InvalidArgumentError("value larger than " + std::to_string(kMaxValueBytes) +
                                      " bytes");
  }
  auto it = values_.find(key);
  if (it == values_.end() && values_.size() >= kMaxKeys) {
    return absl::ResourceExhaustedError("the key-value store holds " + std::to_string(kMaxKeys) +
                                        " keys (its bound)");
  }
  const uint64_t old_bytes = it == values_.end() ? 0 : EntryBytes(key, it->second);
  const uint64_t new_bytes = bytes_ - old_bytes + EntryBytes(key, value);
  if (new_bytes > limits_.max_bytes) return CheckRoom(new_bytes - bytes_);
  bytes_ = new_bytes;
  if (it == values_.end()) {
    it = values_.emplace(key, std::move(value)).first;
  } else {
    it->second = std::move(value);
    it->second.shrink_to_fit();
    MaybeReturnMemory(static_cast<size_t>(old_bytes));
  }
  auto waiting = gets_by_key_.find(key);
  if (waiting == gets_by_key_.end()) return absl::OkStatus();
  std::set<WaitId> ids = std::move(waiting->second);
  gets_by_key_.erase(waiting);
  for (WaitId id : ids) {
    auto found = waits_.find(id);
    if (found == waits_.end()) continue;
    Wait wait = std::move(found->second);
    waits_.erase(found);
    wait.timer.reset();
    if (wait.presence) {
      wait.barrier_done(absl::OkStatus());
    } else {
      wait.get_done(it->second);
    }
  }
  return absl::OkStatus();
}

KvStore::WaitId KvStore::AddWait(Wait wait, common::Duration timeout) {
  const WaitId id = next_wait_++;
  if (timeout > common::Duration::zero()) {
    wait.timer = clock_.After(timeout, [this, id] { OnWaitTimeout(id); });
  }
  if (wait.barrier) {
    barriers_[wait.key].arrived.insert(id);
  } else {
    gets_by_key_[wait.key].insert(id);
  }
  waits_.emplace(id, std::move(wait));
  return id;
}

KvStore::Wait KvStore::TakeWait(WaitId id) {
  auto it = waits_.find(id);
  Wait wait = std::move(it->second);
  waits_.erase(it);
  wait.timer.reset();
  if (wait.barrier) {
    auto barrier = barriers_.find(wait.key);
    barrier->second.arrived.erase(id);
    if (barrier->second.arrived.empty()) barriers_.erase(barrier);
  } else {
    auto gets = gets_by_key_.find(wait.key);
    gets->second.erase(id);
    if (gets->second.empty()) gets_by_key_.erase(gets);
  }
  return wait;
}

void KvStore::OnWaitTimeout(WaitId id) {
  if (waits_.count(id) == 0) return;
  Wait wait = TakeWait(id);
  if (wait.barrier) {
    wait.barrier_done(absl::DeadlineExceededError("timed out in barrier '" + wait.key + "'"));
  } else if (wait.presence) {
    wait.barrier_done(absl::DeadlineExceededError("timed out waiting for key '" + wait.key + "'"));
  } else {
    wait.get_done(absl::DeadlineExceededError("timed out waiting for key '" + wait.key + "'"));
  }
}

void KvStore::CancelWait(WaitId id) {
  GANGRUN_ON_STRAND(strand_);
  if (waits_.count(id) > 0) TakeWait(id);  // destroyed here, with its timer
}

KvStore::WaitId KvStore::Get(const std::string& key, common::Duration wait, GetCallback done) {
  GANGRUN_ON_STRAND(strand_);
  if (absl::Status s = CheckKey(key); !s.ok()) {
    done(s);
    return 0;
  }
  auto it = values_.find(key);
  if (it != values_.end()) {
    done(it->second);
    return 0;
  }
  if (wait == common::Duration::zero()) {
    done(absl::NotFoundError("no key '" + key + "'"));
    return 0;
  }
  if (absl::Status s = CheckWaitBound(); !s.ok()) {
    done(s);
    return 0;
  }
  Wait entry;
  entry.key = key;
  entry.get_done = std::move(done);
  return AddWait(std::move(entry), wait);
}

absl::StatusOr<int64_t> KvStore::Add(const std::string& key, int64_t delta) {
  GANGRUN_ON_STRAND(strand_);
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  int64_t value = 0;
  auto it = values_.find(key);
  if (it != values_.end() && !absl::SimpleAtoi(it->second, &value)) {
    return absl::FailedPreconditionError("key '" + key + "' does not hold an integer");
  }
  if ((delta > 0 && value > INT64_MAX - delta) || (delta < 0 && value < INT64_MIN - delta)) {
    return absl::OutOfRangeError("adding " + std::to_string(delta) + " to key '" + key +
                                 "' would overflow a 64-bit integer");
  }
  value += delta;
  absl::Status status = Put(key, std::to_string(value));
  if (!status.ok()) return status;
  return value;
}

bool KvStore::Delete(const std::string& key) {
  GANGRUN_ON_STRAND(strand_);
  auto it = values_.find(key);
  if (it == values_.end()) return false;
  const uint64_t freed = EntryBytes(key, it->second);
  bytes_ -= freed;
  values_.erase(it);
  MaybeReturnMemory(static_cast<size_t>(freed));
  return true;
}

size_t KvStore::DeletePrefix(const std::string& prefix) {
  GANGRUN_ON_STRAND(strand_);
  size_t deleted = 0;
  size_t freed = 0;
  for (auto it = values_.lower_bound(prefix);
       it != values_.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    freed += EntryBytes(it->first, it->second);
    it = values_.erase(it);
    ++deleted;
  }
  for (auto it = queues_.lower_bound(prefix);
       it != queues_.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    for (const auto& item : it->second) freed += EntryBytes(it->first, item);
    it = queues_.erase(it);
    ++deleted;
  }
  bytes_ -= freed;
  MaybeReturnMemory(freed);
  return deleted;
}

absl::StatusOr<std::string> KvStore::CompareSet(const std::string& key, const std::string& expected,
                                                std::string desired) {
  GANGRUN_ON_STRAND(strand_);
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  auto it = values_.find(key);
  if (it == values_.end() ? !expected.empty() : it->second != expected) {
    return it == values_.end() ? expected : it->second;
  }
  std::string answer = desired;
  if (absl::Status s = Put(key, std::move(desired)); !s.ok()) return s;
  return answer;
}

absl::Status KvStore::Append(const std::string& key, const std::string& tail) {
  GANGRUN_ON_STRAND(strand_);
  auto it = values_.find(key);
  if (it == values_.end()) return Put(key, tail);
  if (it->second.size() + tail.size() > kMaxValueBytes) {
    return absl::InvalidArgumentError("appending " + std::to_string(tail.size()) +
                                      " bytes to key '" + key + "' makes it larger than " +
                                      std::to_string(kMaxValueBytes) + " bytes");
  }
  return Put(key, it->second + tail);
}

bool KvStore::Present(const std::string& key) const {
  if (values_.count(key) > 0) return true;
  auto queue = queues_.find(key);
  return queue != queues_.end() && !queue->second.empty();
}

KvStore::WaitId KvStore::Await(const std::string& key, common::Duration wait,
                               BarrierCallback done) {
  GANGRUN_ON_STRAND(strand_);
  if (absl::Status s = CheckKey(key); !s.ok()) {
    done(s);
    return 0;
  }
  if (Present(key)) {
    done(absl::OkStatus());
    return 0;
  }
  if (absl::Status s = CheckWaitBound(); !s.ok()) {
    done(s);
    return 0;
  }
  Wait entry;
  entry.key = key;
  entry.presence = true;
  entry.barrier_done = std::move(done);
  return AddWait(std::move(entry), wait);
}

absl::Status KvStore::QueuePush(const std::string& name, std::string item) {
  GANGRUN_ON_STRAND(strand_);
  if (absl::Status s = CheckKey(name); !s.ok()) return s;
  if (item.size() > kMaxValueBytes) {
    return absl::InvalidArgumentError("item larger than " + std::to_string(kMaxValueBytes) +
                                      " bytes");
  }
  if (absl::Status s = CheckRoom(EntryBytes(name, item)); !s.ok()) return s;
  bytes_ += EntryBytes(name, item);
  queues_[name].push_back(std::move(item));
  // One waiter: one item can be popped once (torch wakes one too).
  auto waiting = gets_by_key_.find(name);
  if (waiting == gets_by_key_.end()) return absl::OkStatus();
  for (WaitId id : waiting->second) {
    if (!waits_.at(id).presence) continue;
    TakeWait(id).barrier_done(absl::OkStatus());  // `waiting` may be gone now: stop here
    break;
  }
  return absl::OkStatus();
}

std::optional<std::string> KvStore::QueuePop(const std::string& name) {
  GANGRUN_ON_STRAND(strand_);
  auto it = queues_.find(name);
  if (it == queues_.end() || it->second.empty()) return std::nullopt;
  std::string item = std::move(it->second.front());
  it->second.pop_front();
  const size_t freed = EntryBytes(name, item);
  bytes_ -= freed;
  if (it->second.empty()) queues_.erase(it);
  MaybeReturnMemory(freed);
  return item;
}

size_t KvStore::QueueLength(const std::string& name) const {
  auto it = queues_.find(name);
  return it == queues_.end() ? 0 : it->second.size();
}

void KvStore::MaybeReturnMemory(size_t freed) {
  // Large values are mmap'ed (see main's mallopt) and go back on free; the many small ones
  // leave holes in the heap that only malloc_trim hands back.
  freed_since_trim_ += freed;
  if (freed_since_trim_ < kTrimAfterBytes) return;
  freed_since_trim_ = 0;
  malloc_trim(0);
}

KvStore::WaitId KvStore::Barrier(const std::string& name, int count, common::Duration wait,
                                 BarrierCallback done) {
  GANGRUN_ON_STRAND(strand_);
  if (absl::Status s = CheckKey(name); !s.ok()) {
    done(s);
    return 0;
  }
  if (count <= 0) {
    done(absl::InvalidArgumentError("barrier count must be positive"));
    return 0;
  }
  if (static_cast<uint64_t>(count) > limits_.max_pending_waits + 1) {
    done(absl::InvalidArgumentError("barrier count " + std::to_string(count) +
                                    " can never be reached: at most " +
                                    std::to_string(limits_.max_pending_waits) + " may wait"));
    return 0;
  }
  auto existing = barriers_.find(name);
  if (existing != barriers_.end() && existing->second.count != count) {
    done(absl::InvalidArgumentError("barrier '" + name + "' is for " +
                                    std::to_string(existing->second.count) + ", not " +
                                    std::to_string(count)));
    return 0;
  }
  const size_t arrived = existing == barriers_.end() ? 0 : existing->second.arrived.size();
  if (static_cast<int64_t>(arrived) + 1 == count) {
    std::set<WaitId> ids;
    if (existing != barriers_.end()) ids = existing->second.arrived;
    for (WaitId id : ids) TakeWait(id).barrier_done(absl::OkStatus());
    done(absl::OkStatus());
    return 0;
  }
  if (absl::Status s = CheckWaitBound(); !s.ok()) {
    done(s);
    return 0;
  }
  barriers_[name].count = count;
  Wait entry;
  entry.key = name;
  entry.barrier = true;
  entry.barrier_done = std::move(done);
  return AddWait(std::move(entry), wait);
}

void KvStore::CancelAll() {
  GANGRUN_ON_STRAND(strand_);
  auto waits = std::move(waits_);
  waits_.clear();
  gets_by_key_.clear();
  barriers_.clear();
  for (auto& [id, wait] : waits) {
    wait.timer.reset();
    if (wait.barrier || wait.presence) {
      wait.barrier_done(absl::CancelledError("the job is over"));
    } else {
      wait.get_done(absl::CancelledError("the job is over"));
    }
  }
}

}  // namespace gangrun::scheduler
