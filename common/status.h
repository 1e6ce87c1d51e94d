#pragma once
// Status helpers: errors are absl::Status values with canonical codes; the detail is in
// the message.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gangrun::common {

// Maps an errno value to a canonical Status whose message is "<what>: <strerror>".
absl::Status ErrnoToStatus(int err, const std::string& what);

}  // namespace gangrun::common

#define GANGRUN_CONCAT_INNER(a, b) a##b
#define GANGRUN_CONCAT(a, b) GANGRUN_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)          \
  do {                                 \
    ::absl::Status _status = (expr);   \
    if (!_status.ok()) return _status; \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL(var, lhs, expr) \
  auto var = (expr);                          \
  if (!var.ok()) return var.status();         \
  lhs = std::move(*var)

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(GANGRUN_CONCAT(_statusor_, __LINE__), lhs, expr)
