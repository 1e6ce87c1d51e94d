#pragma once
// The task command. kInfer (gangrun, msrun): a .py script runs under the Python interpreter
// found on PATH (python, else python3); python, python3 and pytest given as the script run as
// is with their arguments; any other executable runs as is. torchrun's modes: kPython runs
// `PYTHON -u SCRIPT ARGS`, kModule `PYTHON -u -m MODULE ARGS` (PYTHON: PYTHON_EXEC, else
// python3, else python on PATH), kExec the script itself.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launcher/options.h"

namespace gangrun::launcher {

struct TaskCommand {
  std::string exec_path;          // resolved program
  std::vector<std::string> argv;  // argv[0] included
};

absl::StatusOr<TaskCommand> ResolveTaskCommand(const std::string& script,
                                               const std::vector<std::string>& args,
                                               const std::string& path_env,
                                               TaskMode mode = TaskMode::kInfer,
                                               const std::string& python_exec = "");

}  // namespace gangrun::launcher
