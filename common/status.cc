#include "common/status.h"

#include <cerrno>
#include <cstring>

namespace gangrun::common {

absl::Status ErrnoToStatus(int err, const std::string& what) {
  std::string message = what + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
    case ESRCH:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case EEXIST:
    case EADDRINUSE:
      return absl::AlreadyExistsError(message);
    case EINVAL:
    case ENOTDIR:
    case ENAMETOOLONG:
      return absl::InvalidArgumentError(message);
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case ENOSPC:
    case EAGAIN:
      return absl::ResourceExhaustedError(message);
    case ECONNREFUSED:
    case EHOSTUNREACH:
    case ENETUNREACH:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace gangrun::common
