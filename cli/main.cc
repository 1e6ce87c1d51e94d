// gangrun / msrun: the command dispatcher. Runs one command (cli/command.h), prints its error's
// one line, and maps what it ended with to the exit code (cli/exit_codes.h) — nothing else
// does either.

#include <grpc/support/log.h>
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/exit_codes.h"
#include "common/console.h"
#include "common/env_names.h"
#include "common/logging.h"
#include "common/service.h"
#include "launcher/options.h"
#include "node/keeper.h"
#include "rpc/process.h"

namespace {

namespace cli = gangrun::cli;

std::string SelfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("/proc/self/exe");
}

// gRPC's own log lines go through our logger, at debug level; but one that says a server
// stopped accepting connections (gRPC 1.51 closes a listener for good when accept4 fails,
// e.g. with EMFILE) is an error the operator must see.
void RouteGrpcLogs() {
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
}

int Main(int argc, char** argv) {
  const char* level = std::getenv(gangrun::env::kLogLevel);
  gangrun::common::SetLogLevel(level != nullptr ? level : "info");
  RouteGrpcLogs();
  static const std::map<std::string, cli::CommandResult (*)(const cli::CommandArgs&)> kCommands = {
      {"status", cli::RunStatus},       {"stop", cli::RunStop},         {"health", cli::RunHealth},
      {"scale", cli::RunScale},         {"progress", cli::RunProgress}, {"kv", cli::RunKv},
      {"scheduler", cli::RunScheduler}, {"agent", cli::RunAgent},       {"submit", cli::RunSubmit},
      {"generate", cli::RunGenerate},   {"stacks", cli::RunStacks},     {"logs", cli::RunLogs},
      {"drain", cli::RunDrain},         {"undrain", cli::RunUndrain}};
  cli::CommandArgs command{
      argv[0], {argv + 1, argv + argc}, gangrun::launcher::ProcessEnv(), SelfExe()};
  // A personality's errors carry its name (torchrun: error: ..., as argparse writes them).
  std::string prefix =
      gangrun::launcher::PersonalityName(gangrun::launcher::PersonalityFromArgv0(argv[0])) +
      ": error: ";
  cli::CommandResult result;
  auto it = argc >= 2 ? kCommands.find(argv[1]) : kCommands.end();
  if (it != kCommands.end()) {
    command.args.erase(command.args.begin());
    prefix = "gangrun " + it->first + ": ";
    result = it->second(command);
  } else {
    result = cli::RunLaunch(command);
  }
  if (const auto* status = std::get_if<absl::Status>(&result); status && !status->ok()) {
    gangrun::common::Stderr().Write(prefix + std::string(status->message()) + "\n");
  }
  return cli::ExitCode(result);
}

}  // namespace

int main(int argc, char** argv) {
  gangrun::rpc::DisableDebugOnlyChecks();
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
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return code;  // the sanitizers' leak and race reports run at exit
#else
  // Every object of the command is gone by now and its files are closed; what is left are
  // globals (gRPC's, protobuf's and spdlog's registries) whose destructors write nothing and
  // cost about 2 ms at every exit (bench/README.md, issue #24). Leave without them.
  std::fflush(nullptr);
  _exit(code);
#endif
}
