#include "launcher/task_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "common/spawn.h"

namespace gangrun::launcher {

namespace {

absl::StatusOr<TaskCommand> Executable(const std::string& script, const std::string& path_env) {
  TaskCommand command;
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
  return command;
}

// torchrun's: python -u [-m] SCRIPT.
absl::StatusOr<TaskCommand> TorchPython(const std::string& script, const std::string& path_env,
                                        bool module, const std::string& python_exec) {
  TaskCommand command;
  absl::StatusOr<std::string> python = python_exec.empty()
                                           ? common::FindExecutable("python3", path_env)
                                           : common::FindExecutable(python_exec, path_env);
  if (!python.ok() && python_exec.empty()) python = common::FindExecutable("python", path_env);
  if (!python.ok()) {
    return absl::InvalidArgumentError(
        python_exec.empty() ? "cannot run " + script + ": neither python3 nor python is on PATH"
                            : "PYTHON_EXEC " + python_exec + " is not an executable");
  }
  if (!module && access(script.c_str(), R_OK) != 0) {
    return absl::InvalidArgumentError("training script " + script +
                                      " does not exist or is not readable");
  }
  command.exec_path = *python;
  command.argv = {python_exec.empty() ? "python3" : python_exec, "-u"};
  if (module) command.argv.push_back("-m");
  command.argv.push_back(script);
  return command;
}

}  // namespace

absl::StatusOr<TaskCommand> ResolveTaskCommand(const std::string& script,
                                               const std::vector<std::string>& args,
                                               const std::string& path_env, TaskMode mode,
                                               const std::string& python_exec) {
  if (script.empty()) {
    return absl::InvalidArgumentError(
        "missing task script (usage: gangrun [options] <task_script> [task_script_args...])");
  }
  TaskCommand command;
  if (mode != TaskMode::kInfer) {
    auto resolved = mode == TaskMode::kExec
                        ? Executable(script, path_env)
                        : TorchPython(script, path_env, mode == TaskMode::kModule, python_exec);
    if (!resolved.ok()) return resolved.status();
    command = std::move(*resolved);
  } else if (script == "python" || script == "python3" || script == "pytest") {
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
    auto resolved = Executable(script, path_env);
    if (!resolved.ok()) return resolved.status();
    command = std::move(*resolved);
  }
  command.argv.insert(command.argv.end(), args.begin(), args.end());
  return command;
}

}  // namespace gangrun::launcher
