// gangrun submit: one job on a daemon's agents, with the output of the ranks it tails and
// the job's outcome as the exit code, as if the job had been launched here.

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "cli/client.h"
#include "cli/daemon_command.h"
#include "common/console.h"
#include "common/exit_status.h"
#include "common/logging.h"
#include "gangrun/v1/daemon.grpc.pb.h"
#include "launcher/exit_codes.h"
#include "launcher/launcher.h"
#include "rpc/channel.h"
#include "rpc/credentials.h"

namespace gangrun::launcher {
namespace {

constexpr char kUsage[] =
    "usage: gangrun submit --master HOST:PORT --worker_num N [--local_worker_num K] "
    "[launcher options] <task_script> [args...]";

int Usage(const std::string& problem) {
  std::fprintf(stderr, "gangrun submit: %s\n%s\n", problem.c_str(), kUsage);
  return kExitInvalidConfiguration;
}

// The options that only the daemon chooses for a job.
bool ChosenByDaemon(const std::string& flag) {
  for (const char* name : {"--master_addr", "--master_port", "--node_rank", "--join", "--dry_run",
                           "--sim_level", "--sim_rank_id"}) {
    if (flag == name || absl::StartsWith(flag, std::string(name) + "=")) return true;
  }
  return false;
}

}  // namespace

int RunSubmitCommand(const std::vector<std::string>& args, const EnvLookup& env) {
  // SIGINT/SIGTERM/SIGHUP stop the job (a second one leaves); blocked before gRPC starts its
  // threads, taken by a thread of ours with sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop_signals, sig);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // before anything starts a thread
  ClientTarget target;
  target.master = env("GANGRUN_MASTER").value_or("");
  target.access = ClientAccessFromEnv(env);
  // --master is ours; everything else is a launcher's command line.
  std::vector<std::string> rest;
  bool local_given = false;
  // Every launcher option takes a value (--opt V or --opt=V); the first other word starts
  // the task, whose own arguments are left alone.
  bool in_task = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!in_task && (arg == "-h" || arg == "--help")) {
      std::printf(
          "%s\nRuns the job on the agents registered with the daemon at --master and "
          "exits with its outcome.\nLauncher options (see gangrun --help) apply to the "
          "job; the daemon chooses --master_addr, --master_port, --node_rank and "
          "--join.\n",
          kUsage);
      return 0;
    }
    if (!in_task && (arg == "--master" || absl::StartsWith(arg, "--master="))) {
      if (arg != "--master") {
        target.master = arg.substr(9);
      } else if (i + 1 < args.size()) {
        target.master = args[++i];
      } else {
        return Usage("missing value for --master");
      }
      continue;
    }
    rest.push_back(arg);
    if (in_task) continue;
    if (arg == "--" || !absl::StartsWith(arg, "-")) {
      in_task = true;
    } else if (arg.find('=') == std::string::npos && i + 1 < args.size()) {
      rest.push_back(args[++i]);
    }
  }
  auto parsed = ParseCommandLine(Personality::kGangrun, rest, env);
  if (!parsed.ok()) return Usage(std::string(parsed.status().message()));
  Options& options = parsed->options;
  // Where the task starts in `rest`: its options are everything before it.
  const size_t task_size = options.task_script.empty() ? 0 : 1 + options.task_args.size();
  size_t options_end = rest.size() - task_size;
  if (options_end > 0 && rest[options_end - 1] == "--") --options_end;
  std::vector<std::string> launcher_options(rest.begin(), rest.begin() + options_end);
  for (const auto& option : launcher_options) {
    if (ChosenByDaemon(option)) {
      return Usage(option.substr(0, option.find('=')) + " is chosen by the daemon");
    }
    if (option == "--local_worker_num" || absl::StartsWith(option, "--local_worker_num=")) {
      local_given = true;
    }
  }
  local_given = local_given || env("GANGRUN_LOCAL_WORKER_NUM").has_value();
  if (options.elastic()) return Usage("--worker_num MIN:MAX is not supported by gangrun submit");
  if (!local_given)
    options.local_worker_num = std::min(options.local_worker_num, options.worker_num);
  if (absl::Status status = Validate(options); !status.ok()) {
    return Usage(std::string(status.message()));
  }
  if (local_given && options.worker_num % options.local_worker_num != 0) {
    return Usage("--worker_num must be a multiple of --local_worker_num");
  }
  if (target.access.token.empty()) target.access.token = options.access.token;
  auto channel = OpenClientChannel(target);
  if (!channel.ok()) return Usage(std::string(channel.status().message()));

  v1::SubmitEvent submit;
  auto* job = submit.mutable_job();
  job->set_worker_num(options.worker_num);
  job->set_local_worker_num(local_given ? options.local_worker_num : 0);
  job->set_cluster_time_out(options.cluster_time_out);
  for (const auto& option : launcher_options) job->add_options(option);
  job->add_task(options.task_script);
  for (const auto& arg : options.task_args) job->add_task(arg);

  auto stub = v1::Daemon::NewStub(*channel);
  grpc::ClientContext context;
  rpc::AddToken(context, target.access.token);
  auto stream = stub->Submit(&context);
  if (!stream->Write(submit)) {
    grpc::Status status = stream->Finish();
    return ClientCallFailed("submit", status);
  }
  // The signal thread may wake up after we have returned: it touches the stream only while
  // `alive` says the stream still exists.
  struct Shared {
    std::mutex mu;
    bool alive = true;
  };
  auto shared = std::make_shared<Shared>();
  std::thread([shared, &stream, &context, stop_signals] {
    int sig = 0;
    int count = 0;
    while (sigwait(&stop_signals, &sig) == 0) {
      std::lock_guard<std::mutex> lock(shared->mu);
      if (!shared->alive) return;
      if (++count > 1) {
        context.TryCancel();  // the daemon stops the job when its submitter goes away
        return;
      }
      std::fprintf(stderr, "gangrun submit: received %s: stopping the job\n",
                   common::SignalName(sig).c_str());
      v1::SubmitEvent stop;
      stop.mutable_stop()->set_signal(sig);
      stop.mutable_stop()->set_reason("gangrun submit received " + common::SignalName(sig));
      stream->Write(stop);
    }
  }).detach();
  auto finish = [&shared, &stream] {
    {
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->alive = false;
    }
    return stream->Finish();
  };
  v1::SubmitReply reply;
  bool accepted = false;
  while (stream->Read(&reply)) {
    if (reply.has_output()) {
      common::Stdout().Write(reply.output());
    } else if (reply.has_accepted()) {
      accepted = true;
      std::string agents;
      for (const auto& name : reply.accepted().agents())
        agents += (agents.empty() ? "" : ", ") + name;
      std::fprintf(stderr, "gangrun submit: job %s running on %s\n",
                   reply.accepted().job_id().c_str(), agents.c_str());
    } else if (reply.has_waiting()) {
      std::fprintf(stderr, "gangrun submit: %s\n", reply.waiting().c_str());
    } else if (reply.has_rejected()) {
      finish();
      return Usage(reply.rejected());
    } else if (reply.has_finished()) {
      const v1::JobOutcome& outcome = reply.finished();
      common::Stderr().Write(FormatOutcome(outcome));
      finish();
      return ExitCode(outcome);
    }
  }
  grpc::Status status = finish();
  if (!accepted) return ClientCallFailed("submit", status);
  std::fprintf(stderr, "gangrun submit: lost the daemon while the job ran: %s\n",
               status.error_message().c_str());
  return kExitNodeLost;
}

}  // namespace gangrun::launcher
