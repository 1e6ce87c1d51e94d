#pragma once
// The seam between the process manager and whatever really creates processes: the keeper
// in production, a fake in tests.

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/exit_status.h"
#include "common/spawn.h"

namespace gangrun::node {

// What to run for one local process of a generation.
// A Program (common/spawn.h) and what the node knows of it: whose it is and where it logs.
struct ProcessSpec : common::Program {
  int rank = 0;  // global rank; -1 = the MindSpore scheduler process (msrun)
  int local_rank = 0;
  std::string log_path;
  bool log_append = false;
  std::string log_header;  // a line written to the log before the process starts
  std::string error_file;  // its TORCHELASTIC_ERROR_FILE, read if it fails ("" = none)
};

class ProcessBackend {
 public:
  virtual ~ProcessBackend() = default;
  // Starts `spec`; `done` gets the pid (also its process group id) or the reason it failed.
  // `spec` is read before Spawn returns and before `done` runs, never after.
  virtual void Spawn(const ProcessSpec& spec, std::function<void(absl::StatusOr<pid_t>)> done) = 0;
  // kill(-pgid, sig).
  virtual void SignalGroup(pid_t pgid, int sig) = 0;
  // Called once for every spawned process, after it has been reaped.
  virtual void SetExitHandler(std::function<void(pid_t, common::ExitStatus)> handler) = 0;
};

}  // namespace gangrun::node
