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

// Writes all of `data` to `fd` (retrying short writes and EINTR); false on an error (errno).
bool WriteAll(int fd, std::string_view data);

// A descriptor (close-on-exec) of a new anonymous file in memory (memfd_create; `name` is what
// /proc shows) that holds `data`, positioned at its start: what one process hands another
// through a descriptor instead of its command line or environment.
absl::StatusOr<int> MemoryFile(const char* name, std::string_view data);

// Everything `fd` holds from its position to its end, then closes it; InvalidArgument when it
// holds more than `limit` bytes (`what` names it in errors).
absl::StatusOr<std::string> ReadDescriptor(int fd, size_t limit, const std::string& what);

// Writes `content` to a new file at `path` (replacing one there) with `mode`, whole: it is
// written to a temporary name beside it and renamed.
absl::Status WriteFileAtomically(const std::string& path, std::string_view content,
                                 mode_t mode = 0600);

// mkdtemp: a new directory (mode 0700) named `prefix` and six random characters in `base`,
// by default TempBase(); its path. The new directory is checked by descriptor: a directory
// of this user's, mode 0700.
absl::StatusOr<std::string> MakeTempDir(const std::string& prefix, std::string base = "");

// $TMPDIR when it is an absolute path, else /tmp.
std::string TempBase();

// Whether another local user could rename or replace `dir`, or what is in it: each directory
// from / down to it (symbolic links resolved) must belong to root or to this user, and be
// writable by nobody else unless it is sticky (as /tmp is). InvalidArgument names the first
// directory that fails, and why; `what` says what the directory is for ("$TMPDIR").
absl::Status CheckSafeDirectoryPath(const std::string& dir, const std::string& what);

// Whether a directory that logs go into is safe for them: not writable by other users unless
// it is sticky and this user's own (symbolic links followed). InvalidArgument naming `what`.
absl::Status CheckLogDirectory(const std::string& dir, const std::string& what);

// Opens `path` for writing (`append`, or truncated) without following a symbolic link in its
// last component, creating it (mode 0600) when it does not exist, and checks by descriptor
// what was opened: a regular file of this user's with one link. Anything else (a link planted
// by another user, another user's file, a hard link to somebody's file) is refused, and
// nothing of it is truncated. The descriptor is close-on-exec.
absl::StatusOr<int> OpenOwnFileForWriting(const std::string& path, bool append);

}  // namespace gangrun::common
