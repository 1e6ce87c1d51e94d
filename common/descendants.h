#pragma once
// Owning a process tree: become a child subreaper (orphans of our descendants, even those
// that called setsid(), are re-parented to us instead of init), list our children, and
// kill and reap everything below us.

#include <sys/types.h>

#include <chrono>
#include <vector>

#include "absl/status/status.h"

namespace gangrun::common {

// prctl(PR_SET_CHILD_SUBREAPER, 1).
absl::Status BecomeChildSubreaper();

// The direct children of this process (from /proc/self/task/*/children, else a /proc scan).
std::vector<pid_t> ListChildren();

// Sends `sig` to every child and to the process group each child leads, until no child
// is left or `deadline` passes; reaps whatever exits. Because we are a subreaper, the
// children of killed processes come back to us and are killed on the next round.
// Returns true when no child is left. Only for a process that owns all of its children
// (the keeper, or the launcher after the keeper is gone): it reaps with waitpid(-1).
bool KillAndReapAllChildren(int sig, std::chrono::steady_clock::time_point deadline);

}  // namespace gangrun::common
