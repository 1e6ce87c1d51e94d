#include "common/files.h"

#include <sys/stat.h>

#include <cerrno>

#include "common/status.h"

namespace gangrun::common {

absl::Status MakeDirs(const std::string& dir, mode_t mode) {
  if (dir.empty()) return absl::OkStatus();
  for (size_t pos = dir.find('/', 1);; pos = dir.find('/', pos + 1)) {
    const std::string part = dir.substr(0, pos);
    if (!part.empty() && mkdir(part.c_str(), mode) != 0 && errno != EEXIST) {
      return ErrnoToStatus(errno, "cannot create directory " + part);
    }
    if (pos == std::string::npos) break;
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(dir + " is not a directory");
  }
  return absl::OkStatus();
}

}  // namespace gangrun::common
