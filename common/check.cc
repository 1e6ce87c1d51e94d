#include "common/check.h"

#include <cstdio>
#include <cstdlib>

namespace gangrun::common {

void CheckFailed(const char* file, int line, const char* condition, const char* message) {
  std::fprintf(stderr, "gangrun: internal error at %s:%d: %s (%s)\n", file, line, message,
               condition);
  std::fflush(stderr);
  std::abort();
}

void ThreadAffinity::Check(const char* file, int line) const {
  const std::thread::id self = std::this_thread::get_id();
  std::thread::id expected{};
  if (owner_.compare_exchange_strong(expected, self)) return;  // the first call binds it
  if (expected != self)
    CheckFailed(file, line, "same thread", "an actor was called off its strand");
}

}  // namespace gangrun::common
