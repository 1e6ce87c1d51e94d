#pragma once
// Files and directories.

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"

namespace gangrun::common {

// mkdir -p: creates `dir` and its missing parents with `mode` (existing ones are left as they
// are). Fails, naming the part that could not be made, when a part exists and is not a
// directory or cannot be created.
absl::Status MakeDirs(const std::string& dir, mode_t mode = 0700);

}  // namespace gangrun::common
