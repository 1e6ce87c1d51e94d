#include "launcher/task_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "common/spawn.h"

namespace gangrun::launcher {

absl::StatusOr<TaskCommand> ResolveTaskCommand(const std::string& script,
                                               const std::vector<std::string>& args,
                                               const std::string& path_env) {
  if (script.empty()) {
    return absl::InvalidArgumentError(
        "missing task script (usage: gangrun [options] <task_script> [task_script_args...])");
  }
  TaskCommand command;
  if (script == "python" || script == "python3" || script == "pytest") {
    auto exec = common::FindExecutable(script, path_env);
    if (!exec.ok()) return absl::InvalidArgumentError(std::string(exec.status().message()));
    command.exec_path = *exec;
    command.argv.push_back(script);
  } else if (absl::EndsWith(script, ".py")) {
    if (access(script.c_str(), R_OK) != 0) {
      return absl::InvalidArgumentError("task script " + script + " does not exist or is not " +
                                        "readable");
    }
    auto python = common::FindExecutable("python", path_env);
    if (!python.ok()) python = common::FindExecutable("python3", path_env);
    if (!python.ok()) {
      return absl::InvalidArgumentError("cannot run " + script +
                                        ": neither python nor python3 is on PATH");
    }
    command.exec_path = *python;
    command.argv = {"python", script};
  } else {
    auto exec = common::FindExecutable(script, path_env);
    struct stat st;
    if (!exec.ok() || stat(exec->c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      if (access(script.c_str(), F_OK) == 0) {
        return absl::InvalidArgumentError("task script " + script +
                                          " is neither executable nor a .py file");
      }
      return absl::InvalidArgumentError("task script " + script + " not found");
    }
    command.exec_path = *exec;
    command.argv.push_back(script);
  }
  command.argv.insert(command.argv.end(), args.begin(), args.end());
  return command;
}

}  // namespace gangrun::launcher
