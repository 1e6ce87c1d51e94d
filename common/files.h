#pragma once
// Files and directories.

#include <sys/types.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gangrun::common {

// mkdir -p: creates `dir` and its missing parents with `mode` (existing ones are left as they
// are). Fails, naming the part that could not be made, when a part exists and is not a
// directory or cannot be created.
absl::Status MakeDirs(const std::string& dir, mode_t mode = 0700);

// Writes `content` to a new file at `path` (replacing one there) with `mode`, whole: it is
// written to a temporary name beside it and renamed.
absl::Status WriteFileAtomically(const std::string& path, std::string_view content,
                                 mode_t mode = 0600);

// mkdtemp: a new directory (mode 0700) named `prefix` and six random characters in `base`,
// by default $TMPDIR (an absolute path) or /tmp; its path.
absl::StatusOr<std::string> MakeTempDir(const std::string& prefix, std::string base = "");

}  // namespace gangrun::common
