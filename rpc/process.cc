#include "rpc/process.h"

#include "absl/synchronization/mutex.h"

namespace gangrun::rpc {

void DisableDebugOnlyChecks() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace gangrun::rpc
