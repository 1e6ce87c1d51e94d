#include "cli/exit_codes.h"

namespace gangrun::cli {

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
      return kExitUnreachable;
    case v1::JobOutcome::KIND_NODE_LOST:
      return kExitNodeLost;
    case v1::JobOutcome::KIND_HUNG:
      return kExitHung;
    case v1::JobOutcome::KIND_EXCLUDED:
      return kExitExcluded;
    case v1::JobOutcome::KIND_TIME_LIMIT:
      return kExitTimeLimit;
    default:
      return 1;
  }
}

int ExitCode(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 0;
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kDeadlineExceeded:
      return kExitNotThere;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kAlreadyExists:
      return kExitInvalid;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kCancelled:
      return kExitUnreachable;
    default:
      return 1;
  }
}

int ExitCode(const CommandResult& result) {
  if (const auto* outcome = std::get_if<v1::JobOutcome>(&result)) return ExitCode(*outcome);
  return ExitCode(std::get<absl::Status>(result));
}

}  // namespace gangrun::cli
