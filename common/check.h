#pragma once
// The invariant tier: what must never happen, whatever users, workers or peers do. Errors the
// environment can cause are absl::Status values; a failed GANGRUN_CHECK is a bug in gangrun,
// and the process stops at once with the place and the condition (Debian's Abseil predates
// absl/log/check.h).

#include <atomic>
#include <string>
#include <thread>

namespace gangrun::common {

[[noreturn]] void CheckFailed(const char* file, int line, const char* condition,
                              const char* message);
// The same with a message built at the check (only when it fails: the macro evaluates it then).
[[noreturn]] inline void CheckFailed(const char* file, int line, const char* condition,
                                     const std::string& message) {
  CheckFailed(file, line, condition, message.c_str());
}

// The thread an actor runs on: bound by the first Check(), which every later entry point
// repeats; a call from another thread is a bug (state would be touched off its strand).
class ThreadAffinity {
 public:
  void Check(const char* file, int line) const;

 private:
  mutable std::atomic<std::thread::id> owner_{};
};

}  // namespace gangrun::common

#define GANGRUN_CHECK(condition, message)                                                      \
  do {                                                                                         \
    if (!(condition)) ::gangrun::common::CheckFailed(__FILE__, __LINE__, #condition, message); \
  } while (0)

// At an actor's entry points: the call runs on the actor's thread.
#define GANGRUN_ON_STRAND(affinity) (affinity).Check(__FILE__, __LINE__)
