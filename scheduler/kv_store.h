#pragma once
// The key-value store and barriers of a job (README "Several hosts"): put, get (optionally waiting
// for the key), atomic add, delete, barrier. Lives on the scheduler's strand (the io_context's
// single thread); waits run on the injected clock.
//
// Bounded, because any worker (and, without a token, any peer) can call it: keys and values
// together hold at most Limits::max_bytes (--kv_max_bytes), and at most
// Limits::max_pending_waits gets and barrier arrivals wait at once. Past a bound a call is
// refused with RESOURCE_EXHAUSTED naming the bound. A waiter whose caller goes away is
// released at once (CancelWait), and a deleted key's memory goes back to the system.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "common/check.h"
#include "common/clock.h"

namespace gangrun::scheduler {

struct KvLimits {
  uint64_t max_bytes = uint64_t{256} << 20;  // keys + values (+ kEntryOverhead each)
  size_t max_pending_waits = 65536;          // waiting gets + barrier arrivals
};

class KvStore {
 public:
  using GetCallback = std::function<void(absl::StatusOr<std::string>)>;
  using BarrierCallback = std::function<void(absl::Status)>;
  // Identifies a pending wait; 0 = the call was answered at once.
  using WaitId = uint64_t;

  using Limits = KvLimits;
  static constexpr size_t kMaxKeyBytes = 4096;
  static constexpr size_t kMaxValueBytes = 4 << 20;
  static constexpr size_t kMaxKeys = 1 << 20;
  static constexpr size_t kEntryOverhead = 64;  // what a key costs beyond its bytes

  explicit KvStore(common::Clock& clock, Limits limits = {});
  ~KvStore();

  absl::Status Put(const std::string& key, std::string value);
  // wait < 0: until the key exists; wait == 0: answer now (NotFound when absent).
  WaitId Get(const std::string& key, common::Duration wait, GetCallback done);
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);
  bool Delete(const std::string& key);
  // Deletes every key (and queue) whose name starts with `prefix`; answers how many.
  size_t DeletePrefix(const std::string& prefix);

  // What torch's store adds (scheduler/torch_store.h), with its meaning:
  // compare_set: sets `desired` when the key holds `expected`, or is absent and `expected` is
  // empty; answers the key's value afterwards, or `expected` when the key stays absent.
  absl::StatusOr<std::string> CompareSet(const std::string& key, const std::string& expected,
                                         std::string desired);
  // Appends to the key's value (sets it when absent).
  absl::Status Append(const std::string& key, const std::string& tail);
  // Present: the key exists, or a queue of that name holds an item.
  bool Present(const std::string& key) const;
  // Waits (wait < 0: for ever) until Present(key); `done` gets OK then, DEADLINE_EXCEEDED,
  // CANCELLED at CancelAll, or RESOURCE_EXHAUSTED past the wait bound.
  WaitId Await(const std::string& key, common::Duration wait, BarrierCallback done);
  // Queues (torch 2.x's queue_push/pop/len): items count against max_bytes like values; a push
  // ends one Await of the queue's name.
  absl::Status QueuePush(const std::string& name, std::string item);
  std::optional<std::string> QueuePop(const std::string& name);
  size_t QueueLength(const std::string& name) const;
  size_t keys() const { return values_.size(); }
  WaitId Barrier(const std::string& name, int count, common::Duration wait, BarrierCallback done);
  // The caller of a pending wait went away: forget it now (its callback is not called).
  void CancelWait(WaitId id);
  // Ends every pending wait with CANCELLED (the job is over).
  void CancelAll();

  uint64_t bytes() const { return bytes_; }
  size_t pending_waits() const { return waits_.size(); }

 private:
  struct Wait {
    std::string key;  // the awaited key, or the barrier's name
    bool barrier = false;
    bool presence = false;  // an Await: barrier_done answers it
    GetCallback get_done;
    BarrierCallback barrier_done;
    std::unique_ptr<common::Timer> timer;
  };
  struct BarrierState {
    int count = 0;
    std::set<WaitId> arrived;  // in arrival order (ids grow)
  };
  absl::Status CheckKey(const std::string& key) const;
  absl::Status CheckWaitBound() const;
  absl::Status CheckRoom(uint64_t more) const;
  WaitId AddWait(Wait wait, common::Duration timeout);
  // Removes `id` from the store and returns it (its callback not yet called).
  Wait TakeWait(WaitId id);
  void OnWaitTimeout(WaitId id);
  void MaybeReturnMemory(size_t freed);

  common::Clock& clock_;
  Limits limits_;
  std::map<std::string, std::string> values_;
  uint64_t bytes_ = 0;
  WaitId next_wait_ = 1;
  std::map<WaitId, Wait> waits_;
  std::map<std::string, std::set<WaitId>> gets_by_key_;
  std::map<std::string, BarrierState> barriers_;
  std::map<std::string, std::deque<std::string>> queues_;
  size_t freed_since_trim_ = 0;
  common::ThreadAffinity strand_;  // the io_context's thread: every entry point checks it
};

}  // namespace gangrun::scheduler
