// The task's command (launcher/task_command.h: python, -m, the script itself), gangrun
// submit's --export (launcher/launch_spec.h), and torch's error file (node/error_file.h).

#include "launcher/task_command.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include "launcher/launch_spec.h"
#include "node/error_file.h"
#include "tests/testing/test_util.h"

namespace gangrun::launcher {
namespace {

TEST(TaskCommandTest, APyScriptRunsUnderOneInterpreterRuleInEveryPersonality) {
  // A PATH where `python` and `python3` differ (a venv, pyenv): python3 first, as torchrun's
  // sys.executable would be; PYTHON_EXEC wins over both.
  testing::TempDir dir;
  const std::string script = dir.File("t.py");
  { std::ofstream(script) << "print(1)\n"; }
  for (const char* name : {"python", "python3"}) {
    std::ofstream(dir.File(name)) << "#!/bin/sh\n";
    chmod(dir.File(name).c_str(), 0755);
  }
  for (TaskMode mode : {TaskMode::kInfer, TaskMode::kPython}) {
    auto command = ResolveTaskCommand(script, {}, dir.path(), mode);
    ASSERT_TRUE(command.ok()) << command.status();
    EXPECT_EQ(command->exec_path, dir.File("python3"));
    EXPECT_EQ(command->argv.front(), "python3");
    auto given = ResolveTaskCommand(script, {}, dir.path(), mode, "python");
    ASSERT_TRUE(given.ok()) << given.status();
    EXPECT_EQ(given->exec_path, dir.File("python"));
  }
  // Only `python`: that one.
  std::remove(dir.File("python3").c_str());
  auto fallback = ResolveTaskCommand(script, {}, dir.path(), TaskMode::kInfer);
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_EQ(fallback->exec_path, dir.File("python"));
}

TEST(TorchrunTaskTest, PythonModuleAndExecutableCommands) {
  testing::TempDir dir;
  const std::string script = dir.File("t.py");
  { std::ofstream(script) << "print(1)\n"; }
  const std::string path = "/usr/local/bin:/usr/bin:/bin";
  auto python = ResolveTaskCommand(script, {"--a"}, path, TaskMode::kPython);
  ASSERT_TRUE(python.ok()) << python.status();
  EXPECT_EQ(python->argv, (std::vector<std::string>{"python3", "-u", script, "--a"}));
  auto module = ResolveTaskCommand("pkg.mod", {"x"}, path, TaskMode::kModule, "/bin/sh");
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ(module->exec_path, "/bin/sh");
  EXPECT_EQ(module->argv, (std::vector<std::string>{"/bin/sh", "-u", "-m", "pkg.mod", "x"}));
  auto exec = ResolveTaskCommand("true", {}, path, TaskMode::kExec);
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_EQ(exec->argv, std::vector<std::string>{"true"});
  // A .py file under --no_python runs as is, as torchrun runs it: it must be executable.
  EXPECT_FALSE(ResolveTaskCommand(script, {}, path, TaskMode::kExec).ok());
  EXPECT_EQ(
      ResolveTaskCommand(dir.File("missing.py"), {}, path, TaskMode::kPython).status().message(),
      "training script " + dir.File("missing.py") + " does not exist or is not readable");
  EXPECT_EQ(ResolveTaskCommand(script, {}, path, TaskMode::kPython, dir.File("no/python"))
                .status()
                .message(),
            "PYTHON_EXEC " + dir.File("no/python") + " is not an executable");
}

TEST(SubmitExportTest, AllCarriesTheEnvironmentButGangrunsOwn) {
  v1::LaunchSpec spec;
  const std::vector<std::string> mine = {"PATH=/venv/bin:/usr/bin", "FOO=bar",
                                         "GANGRUN_TOKEN=secret",    "SLURM_JOB_ID=7",
                                         "NOTIFY_SOCKET=/run/x",    "PWD=/home/u"};
  ASSERT_TRUE(ExportEnvironment("ALL", mine, "/home/u/proj", spec).ok());
  EXPECT_TRUE(spec.env_all());
  EXPECT_EQ(std::vector<std::string>(spec.env().begin(), spec.env().end()),
            (std::vector<std::string>{"PATH=/venv/bin:/usr/bin", "FOO=bar"}));
  EXPECT_EQ(spec.cwd(), "/home/u/proj");
  // The agent's own variables give way, but for its GANGRUN_* configuration; its token (the
  // daemon's) never reaches a worker: the launcher gives them their job's own.
  const std::vector<std::string> agent = {
      "PATH=/usr/bin",       "HOME=/root",
      "GANGRUN_TOKEN=agent", "GANGRUN_TOKEN_FILE=/etc/t",
      "GANGRUN_SLOTS=4",     "NOTIFY_SOCKET=/run/systemd/notify"};
  EXPECT_EQ(LauncherEnvironment(spec, agent),
            (std::vector<std::string>{"GANGRUN_SLOTS=4", "PATH=/venv/bin:/usr/bin", "FOO=bar",
                                      "PWD=/home/u/proj"}));
}

TEST(SubmitExportTest, NoneAndAListKeepTheAgentsEnvironment) {
  const std::vector<std::string> mine = {"PATH=/venv/bin", "FOO=bar", "BAZ=1"};
  const std::vector<std::string> agent = {"PATH=/usr/bin", "HOME=/root"};
  v1::LaunchSpec spec;
  ASSERT_TRUE(ExportEnvironment("NONE", mine, "/w", spec).ok());
  EXPECT_FALSE(spec.env_all());
  EXPECT_EQ(spec.env_size(), 0);
  EXPECT_EQ(LauncherEnvironment(spec, agent),
            (std::vector<std::string>{"PATH=/usr/bin", "HOME=/root", "PWD=/w"}));
  ASSERT_TRUE(ExportEnvironment("FOO,PATH", mine, "/w", spec).ok());
  EXPECT_EQ(LauncherEnvironment(spec, agent),
            (std::vector<std::string>{"HOME=/root", "PATH=/venv/bin", "FOO=bar", "PWD=/w"}));
  EXPECT_EQ(ExportEnvironment("FOO,1X", mine, "/w", spec).message(),
            "--export: expected ALL, NONE or VAR[,VAR...], got 'FOO,1X'");
}

TEST(ErrorFileTest, ReadsTorchsRecordFormat) {
  const auto error = node::ParseWorkerError(
      R"({"message": {"message": "ValueError: bad batch", "extraInfo": {"py_callstack": )"
      R"("Traceback (most recent call last):\n  File \"t.py\", line 3, in f\n    raise )"
      R"(ValueError(\"bad batch\")\nValueError: bad batch\n", "timestamp": "1700000000"}}})");
  EXPECT_EQ(error.message(), "ValueError: bad batch");
  EXPECT_EQ(error.timestamp(), "1700000000");
  ASSERT_EQ(error.traceback_size(), 4);
  EXPECT_EQ(error.traceback(1), "  File \"t.py\", line 3, in f");
  EXPECT_EQ(error.traceback(3), "ValueError: bad batch");
  // A plain message, and text that is not JSON, are shown as they are.
  EXPECT_EQ(node::ParseWorkerError(R"({"message": "boom"})").message(), "boom");
  EXPECT_EQ(node::ParseWorkerError("oops").message(), "(not torch's error file format) oops");
}

TEST(ErrorFileTest, LongTracebacksAndMessagesAreBounded) {
  std::string callstack;
  for (int i = 0; i < 100; ++i) callstack += "frame " + std::to_string(i) + "\\n";
  const auto error =
      node::ParseWorkerError(R"({"message": {"message": ")" + std::string(10000, 'x') +
                             R"(", "extraInfo": {"py_callstack": ")" + callstack + R"("}}})");
  EXPECT_EQ(error.message().size(), node::kMaxErrorMessageBytes + 3);
  ASSERT_EQ(error.traceback_size(), node::kMaxTracebackLines);
  EXPECT_EQ(error.traceback(node::kMaxTracebackLines - 1), "frame 99");
  testing::TempDir dir;
  EXPECT_FALSE(node::ReadWorkerError(dir.File("none.json")).has_value());
  { std::ofstream(dir.File("big.json")) << std::string(node::kMaxErrorFileBytes + 1, ' '); }
  auto big = node::ReadWorkerError(dir.File("big.json"));
  ASSERT_TRUE(big.has_value());
  EXPECT_NE(big->message().find("larger than 1 MiB"), std::string::npos);
}

}  // namespace
}  // namespace gangrun::launcher
