#pragma once
// Process creation without fork(): clone(CLONE_VM | CLONE_VFORK), as posix_spawn does, so
// the cost does not grow with the caller's memory. Between clone and exec the child makes
// only async-signal-safe system calls: process group, parent-death signal, CPU affinity,
// descriptors, working directory, signal mask.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gangrun::common {

// Who a spawned process runs as (the caller must be allowed to become it: root).
struct SpawnCredentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups
};

// What to run, the one shape from a worker's plan to the keeper's exec (node::ProcessSpec and
// SpawnOptions are a Program with more; v1::Program is its wire form, proto/conversions.h).
struct Program {
  std::string exec_path;          // absolute or relative path of the program
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> env;   // KEY=VALUE; the complete environment
  std::string cwd;                // "" = inherit
  std::vector<int> cpus;          // sched_setaffinity; empty = inherit
  std::vector<int> memory_nodes;  // set_mempolicy(MPOL_BIND); empty = inherit
};

// A Program and how this process starts it.
struct SpawnOptions : Program {
  std::map<int, int> fds;                  // child fd -> parent fd; every other fd >= 3 is closed
  bool new_process_group = true;           // the child leads its own process group
  bool new_session = false;                // setsid() instead (implies its own group)
  int parent_death_signal = 0;             // PR_SET_PDEATHSIG, 0 = none
  uint64_t file_limit = 0;                 // the child's soft RLIMIT_NOFILE; 0 = inherit
  std::optional<SpawnCredentials> run_as;  // unset: this process's user
  // The caller promises that every signal's action is SIG_DFL (the process keeper, which
  // resets them when it starts and installs none): the child skips resetting them (64 system
  // calls per spawn). Otherwise the child resets them all, as ignored ones survive exec.
  bool signal_actions_are_default = false;
};

// Starts the program; returns its pid once it has exec'd, or why it could not.
absl::StatusOr<pid_t> Spawn(const SpawnOptions& options);

// Finds `program` the way execvp would, using `path_env` (a PATH value). A name that
// contains '/' is returned as is if it exists.
absl::StatusOr<std::string> FindExecutable(const std::string& program, const std::string& path_env);

// The calling process's environment as KEY=VALUE strings.
std::vector<std::string> CurrentEnvironment();

// For a freshly forked child that becomes another program or process (async-signal-safe):
// every signal back to its default action (handlers do not survive exec, but ignored
// signals do) ...
void RestoreDefaultSignalActions();
// ... and every descriptor from `first` up closed, except `keep` (-1: none).
void CloseDescriptorsFrom(unsigned first, int keep);

}  // namespace gangrun::common
