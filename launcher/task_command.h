#pragma once
// The task command: a .py script runs under the Python interpreter found
// on PATH (python, else python3); python, python3 and pytest given as the script run as is
// with their arguments; any other executable runs as is.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gangrun::launcher {

struct TaskCommand {
  std::string exec_path;          // resolved program
  std::vector<std::string> argv;  // argv[0] included
};

absl::StatusOr<TaskCommand> ResolveTaskCommand(const std::string& script,
                                               const std::vector<std::string>& args,
                                               const std::string& path_env);

}  // namespace gangrun::launcher
