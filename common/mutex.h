#pragma once
// A mutex that both checkers see: clang's thread-safety analysis through Abseil's annotations
// (ABSL_GUARDED_BY members, ABSL_EXCLUSIVE_LOCKS_REQUIRED functions), and ThreadSanitizer
// because it is a pthread mutex underneath. (Debian's Abseil is not built with TSan support,
// so TSan cannot see absl::Mutex, whose waits are futexes inside the library.)

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace gangrun::common {

class ABSL_LOCKABLE Mutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Waits (the lock released meanwhile) until `done()` holds; `done` runs with the lock held.
  // Whoever makes it true calls SignalAll().
  template <typename Predicate>
  void Await(Predicate done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    changed_.wait(lock, done);
    lock.release();  // still held, as on entry
  }
  void SignalAll() { changed_.notify_all(); }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* mu_;
};

}  // namespace gangrun::common
