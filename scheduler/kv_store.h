#pragma once
// The key-value store and barriers of a job (PRODUCT.md 5): put, get (optionally waiting for
// the key), atomic add, delete, barrier. Lives on the scheduler's strand (the io_context's
// single thread); waits run on the injected clock.

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace gangrun::scheduler {

class KvStore {
 public:
  using GetCallback = std::function<void(absl::StatusOr<std::string>)>;
  using BarrierCallback = std::function<void(absl::Status)>;

  explicit KvStore(common::Clock& clock) : clock_(clock) {}
  // Limits that keep a hostile or buggy client from exhausting the scheduler.
  static constexpr size_t kMaxKeyBytes = 4096;
  static constexpr size_t kMaxValueBytes = 4 << 20;
  static constexpr size_t kMaxKeys = 1 << 20;

  absl::Status Put(const std::string& key, std::string value);
  // wait < 0: until the key exists; wait == 0: answer now (NotFound when absent).
  void Get(const std::string& key, common::Duration wait, GetCallback done);
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);
  bool Delete(const std::string& key);
  void Barrier(const std::string& name, int count, common::Duration wait, BarrierCallback done);
  // Ends every pending wait with CANCELLED (the job is over).
  void CancelAll();

 private:
  struct Waiter {
    GetCallback done;
    std::unique_ptr<common::Timer> timer;
  };
  struct BarrierState {
    int count = 0;
    std::list<std::pair<BarrierCallback, std::unique_ptr<common::Timer>>> arrived;
  };
  absl::Status CheckKey(const std::string& key) const;

  common::Clock& clock_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::list<Waiter>> waiters_;
  std::map<std::string, BarrierState> barriers_;
};

}  // namespace gangrun::scheduler
