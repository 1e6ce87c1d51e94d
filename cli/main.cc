// gangrun / msrun: parse, validate, build, run, map the result to an exit code.

#include <grpc/support/log.h>
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli/control_command.h"
#include "cli/daemon_command.h"
#include "cli/kv_command.h"
#include "cli/scale_command.h"
#include "common/console.h"
#include "common/logging.h"
#include "common/service.h"
#include "launcher/exit_codes.h"
#include "launcher/launcher.h"
#include "launcher/options.h"
#include "launcher/slurm.h"
#include "node/keeper.h"

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "gangrun: error: %s\n", std::string(status.message()).c_str());
  return gangrun::launcher::ExitCode(status);
}

std::string SelfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("/proc/self/exe");
}

int Main(int argc, char** argv) {
  namespace gl = gangrun::launcher;
  const char* level = std::getenv("GANGRUN_LOG_LEVEL");
  gangrun::common::SetLogLevel(level != nullptr ? level : "info");
  // gRPC's own log lines go through our logger, at debug level; but one that says a server
  // stopped accepting connections (gRPC 1.51 closes a listener for good when accept4 fails,
  // e.g. with EMFILE) is an error the operator must see.
  gpr_set_log_function([](gpr_log_func_args* args) {
    if (std::strstr(args->message, "Failed accept4") != nullptr) {
      gangrun::common::Logger("grpc")->error(
          "a gRPC server of this process stopped accepting connections ({}); raise the limit "
          "on open files (ulimit -n, LimitNOFILE=) so that idle peers cannot exhaust it",
          args->message);
      return;
    }
    gangrun::common::Logger("grpc")->debug("{}", args->message);
  });
  if (argc >= 2 && std::string(argv[1]) == "kv") {
    return gl::RunKvCommand({argv + 2, argv + argc}, gl::ProcessEnv());
  }
  if (argc >= 2) {
    const std::string command = argv[1];
    const std::vector<std::string> rest(argv + 2, argv + argc);
    if (command == "scale") return gl::RunScaleCommand(rest, gl::ProcessEnv());
    if (command == "status") return gl::RunStatusCommand(rest, gl::ProcessEnv());
    if (command == "stop") return gl::RunStopCommand(rest, gl::ProcessEnv());
    if (command == "health") return gl::RunHealthCommand(rest, gl::ProcessEnv());
    if (command == "scheduler") return gl::RunSchedulerCommand(rest, gl::ProcessEnv());
    if (command == "agent") return gl::RunAgentCommand(rest, gl::ProcessEnv(), SelfExe());
    if (command == "submit") return gl::RunSubmitCommand(rest, gl::ProcessEnv());
  }

  std::vector<std::string> args(argv, argv + argc);
  const auto personality = gl::PersonalityFromArgv0(args[0]);
  auto parsed = gl::ParseCommandLine(personality, {args.begin() + 1, args.end()}, gl::ProcessEnv());
  if (!parsed.ok()) return Fail(parsed.status());
  if (!parsed->help.empty()) {
    std::fputs(parsed->help.c_str(), stdout);
    return 0;
  }
  gl::Options& options = parsed->options;
  auto slurm = gl::ApplySlurm(options, parsed->given, gl::ProcessEnv());
  if (!slurm.ok()) return Fail(slurm.status());
  if (!slurm->empty()) gangrun::common::Logger("launcher")->info("{}", *slurm);
  for (const auto& warning : gl::ApplyMsrunRules(options, gl::ProcessEnv())) {
    gangrun::common::Logger("launcher")->warn("{}", warning);
  }
  if (absl::Status status = gl::Validate(options); !status.ok()) return Fail(status);
  auto facts = gl::GatherHostFacts(options);
  if (!facts.ok()) return Fail(facts.status());
  if (options.dry_run) {
    std::fputs(gl::FormatPlan(options, *facts).c_str(), stdout);
    return 0;
  }

  gl::RunContext context{SelfExe(), -1};
  if (const char* ready = std::getenv(gl::kReadyFdEnv)) {
    context.ready_fd = std::atoi(ready);  // we are the detached supervisor of --join False
    unsetenv(gl::kReadyFdEnv);
  } else if (!options.join) {
    auto code = gl::RunDetached(args, options, *facts, context.self_exe);
    return code.ok() ? *code : Fail(code.status());
  }
  auto outcome = gl::RunJob(options, *facts, context);
  if (!outcome.ok()) return Fail(outcome.status());
  return gl::ExitCode(*outcome);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "__keeper") {
    return gangrun::node::RunKeeper(std::atoi(argv[2]));
  }
  // As a container's first process: stay PID 1 as a reaper and signal relay, run in a child.
  if (auto code = gangrun::common::MaybeBecomeInit()) return *code;
  // A console reader that goes away (`gangrun ... | head`) must not end the job: writes to it
  // fail with EPIPE instead (common/console.h). Spawned processes get the default back.
  signal(SIGPIPE, SIG_IGN);
  // Large blocks (key-value values, big messages) straight from mmap, so that freeing them
  // gives the memory back; a fixed threshold also stops glibc from raising it after the first
  // free, which is what kept a deleted 3 GB of values resident.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  gangrun::common::RaiseFileLimit();
  const int code = Main(argc, argv);
  gangrun::common::FlushConsoles();
  return code;
}
