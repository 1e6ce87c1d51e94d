#include "launcher/exit_codes.h"

namespace gangrun::launcher {

int ExitCode(const v1::JobOutcome& outcome) {
  switch (outcome.kind()) {
    case v1::JobOutcome::KIND_SUCCEEDED:
      return 0;
    case v1::JobOutcome::KIND_WORKER_FAILED: {
      const auto& exit = outcome.root_cause().exit();
      if (exit.signal() > 0) return 128 + exit.signal();
      return exit.exit_code() != 0 ? exit.exit_code() : 1;
    }
    case v1::JobOutcome::KIND_STOPPED_BY_SIGNAL:
      return 128 + outcome.signal();
    case v1::JobOutcome::KIND_FORMATION_FAILED:
      return kExitClusterNotFormed;
    case v1::JobOutcome::KIND_NODE_LOST:
      return kExitNodeLost;
    default:
      return 1;
  }
}

int ExitCode(const absl::Status& status) {
  if (status.ok()) return 0;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      return kExitInvalidConfiguration;
    case absl::StatusCode::kUnavailable:
      return kExitClusterNotFormed;
    default:
      return 1;
  }
}

}  // namespace gangrun::launcher
