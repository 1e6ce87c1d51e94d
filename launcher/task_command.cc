#include "launcher/task_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/match.h"
#include "common/spawn.h"
#include "common/status.h"

namespace gangrun::launcher {

namespace {

// What the script is called in messages: torchrun's word under torchrun, msrun's otherwise.
std::string Noun(TaskMode mode) {
  return mode == TaskMode::kInfer ? "task script " : "training script ";
}

// One rule in every personality (README "Use"): PYTHON_EXEC when given, else the python3 on
// PATH (what torchrun's sys.executable would be), else python.
absl::StatusOr<std::pair<std::string, std::string>> FindPython(const std::string& script,
                                                               const std::string& path_env,
                                                               const std::string& python_exec) {
  if (!python_exec.empty()) {
    auto python = common::FindExecutable(python_exec, path_env);
    if (!python.ok()) {
      return absl::InvalidArgumentError("PYTHON_EXEC " + python_exec + " is not an executable");
    }
    return std::make_pair(*python, python_exec);
  }
  for (const char* name : {"python3", "python"}) {
    auto python = common::FindExecutable(name, path_env);
    if (python.ok()) return std::make_pair(*python, std::string(name));
  }
  return absl::InvalidArgumentError("cannot run " + script +
                                    ": neither python3 nor python is on PATH");
}

absl::StatusOr<TaskCommand> Executable(const std::string& script, const std::string& path_env,
                                       TaskMode mode) {
  TaskCommand command;
  auto exec = common::FindExecutable(script, path_env);
  struct stat st;
  if (!exec.ok() || stat(exec->c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    if (access(script.c_str(), F_OK) == 0) {
      return absl::InvalidArgumentError(Noun(mode) + script +
                                        (mode == TaskMode::kInfer
                                             ? " is neither executable nor a .py file"
                                             : " is not executable (--no_python runs it as is)"));
    }
    return absl::InvalidArgumentError(Noun(mode) + script + " not found");
  }
  command.exec_path = *exec;
  command.argv.push_back(script);
  return command;
}

// torchrun's: python -u [-m] SCRIPT.
absl::StatusOr<TaskCommand> TorchPython(const std::string& script, const std::string& path_env,
                                        bool module, const std::string& python_exec) {
  TaskCommand command;
  ASSIGN_OR_RETURN(auto python, FindPython(script, path_env, python_exec));
  if (!module && access(script.c_str(), R_OK) != 0) {
    return absl::InvalidArgumentError("training script " + script +
                                      " does not exist or is not readable");
  }
  command.exec_path = python.first;
  command.argv = {python.second, "-u"};
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
                        ? Executable(script, path_env, mode)
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
    ASSIGN_OR_RETURN(auto python, FindPython(script, path_env, python_exec));
    command.exec_path = python.first;
    command.argv = {python.second, script};
  } else {
    auto resolved = Executable(script, path_env, mode);
    if (!resolved.ok()) return resolved.status();
    command = std::move(*resolved);
  }
  command.argv.insert(command.argv.end(), args.begin(), args.end());
  return command;
}

}  // namespace gangrun::launcher
