// gangrun submit: one job on a daemon's agents, with the output of the ranks it tails and the
// job's outcome as its result, as if the job had been launched here.
//
// Like the node's link and the agent, it is one stream on an event loop: the daemon's replies
// (output, waiting, accepted, finished) and SIGINT/SIGTERM/SIGHUP (the first stops the job, a
// second leaves at once; the daemon stops a job whose submitter is gone) arrive on the loop.

#include <pwd.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>
#include <cstdio>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/client.h"
#include "cli/command.h"
#include "common/console.h"
#include "common/env_names.h"
#include "common/exit_status.h"
#include "common/spawn.h"
#include "common/version.h"
#include "gangrun/v1/daemon.grpc.pb.h"
#include "launcher/launch_spec.h"
#include "launcher/launcher.h"
#include "launcher/parse_command_line.h"
#include "rpc/client_stream.h"

namespace gangrun::cli {
namespace {

absl::Status SubmitUsage(const std::string& problem) { return UsageError("submit", problem); }

// The command line split: --master (ours) out, the rest a launcher's command line.
struct SubmitArgs {
  std::string master;
  std::string export_mode = "ALL";
  std::vector<std::string> launch;
  bool help = false;
  bool version = false;
};

SubmitArgs Split(const std::vector<std::string>& args) {
  SubmitArgs out;
  // Every launcher option takes a value (--opt V or --opt=V); the first other word starts the
  // task, whose own arguments are left alone.
  bool in_task = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!in_task && (arg == "-h" || arg == "--help")) out.help = true;
    if (!in_task && arg == "--version") out.version = true;
    if (!in_task && arg == "--master" && i + 1 < args.size()) {
      out.master = args[++i];
      continue;
    }
    if (!in_task && absl::StartsWith(arg, "--master=")) {
      out.master = arg.substr(9);
      continue;
    }
    if (!in_task && arg == "--export" && i + 1 < args.size()) {
      out.export_mode = args[++i];
      continue;
    }
    if (!in_task && absl::StartsWith(arg, "--export=")) {
      out.export_mode = arg.substr(9);
      continue;
    }
    out.launch.push_back(arg);
    if (in_task) continue;
    if (arg == "--" || !absl::StartsWith(arg, "-")) {
      in_task = true;
    } else if (arg.find('=') == std::string::npos && i + 1 < args.size()) {
      out.launch.push_back(args[++i]);
    }
  }
  return out;
}

// The job to submit, from a launcher's command line.
absl::StatusOr<v1::SubmitJob> MakeJob(const std::vector<std::string>& launch,
                                      const std::string& export_mode,
                                      const launcher::EnvLookup& env, rpc::Access* access) {
  auto parsed = launcher::ParseCommandLine(launcher::Personality::kGangrun, launch, env);
  if (!parsed.ok()) return SubmitUsage(std::string(parsed.status().message()));
  for (const char* chosen : {"master_addr", "master_port", "node_rank", "join", "dry_run",
                             "sim_level", "sim_rank_id", "store", "store_follow"}) {
    if (parsed->flags.count(chosen))
      return SubmitUsage(std::string("--") + chosen + " is chosen by the daemon");
  }
  if (parsed->flags.count("run_id")) {
    // Never taken in silence: a submitted job's run id is the id the daemon gives it.
    return SubmitUsage(
        "--run_id is chosen by the daemon: a submitted job's run id is its job id "
        "(TORCHELASTIC_RUN_ID and GANGRUN_RUN_ID; `gangrun status` lists it)");
  }
  launcher::Options& options = parsed->options;
  *access = options.access;  // the daemon's token may come as a launcher option
  if (options.elastic())
    return SubmitUsage("--worker_num MIN:MAX is not supported by gangrun submit");
  const bool local_given = parsed->given.count("local_worker_num") > 0;
  if (!local_given)
    options.local_worker_num = std::min(options.local_worker_num, options.worker_num);
  if (absl::Status status = launcher::ValidateValues(options); !status.ok()) {
    return SubmitUsage(std::string(status.message()));
  }
  if (local_given && options.worker_num % options.local_worker_num != 0) {
    return SubmitUsage("--worker_num must be a multiple of --local_worker_num");
  }
  v1::SubmitJob job;
  *job.mutable_spec() = launcher::ToLaunchSpec(options);
  job.set_local_worker_num_given(local_given);
  if (const passwd* me = getpwuid(geteuid()); me != nullptr) job.set_user(me->pw_name);
  // The job runs in the submitter's directory, with the environment --export chooses.
  std::error_code error;
  const std::string cwd = std::filesystem::current_path(error).string();
  if (error) return SubmitUsage("cannot read the working directory: " + error.message());
  absl::Status exported = launcher::ExportEnvironment(export_mode, common::CurrentEnvironment(),
                                                      cwd, *job.mutable_spec());
  if (!exported.ok()) return SubmitUsage(std::string(exported.message()));
  return job;
}

class SubmitSession {
 public:
  SubmitSession(std::vector<std::string> masters,
                std::vector<std::shared_ptr<grpc::Channel>> channels)
      : masters_(std::move(masters)), signals_(io_, SIGINT, SIGTERM, SIGHUP) {
    // One stub per daemon, for the session's life: a call uses its stub's method until gRPC
    // lets go of it, after our done handler may already have run.
    for (auto& channel : channels) stubs_.push_back(v1::Daemon::NewStub(std::move(channel)));
  }

  CommandResult Run(const v1::SubmitJob& job) {
    common::ConsoleScope console(io_);
    job_ = job;
    Open();
    WaitForSignal();
    io_.run();
    signals_.cancel();
    return result_.value_or(absl::InternalError("the submission ended without a result"));
  }

 private:
  using Stream = rpc::ClientStream<v1::SubmitEvent, v1::SubmitReply>;
  // How long a submit whose daemon was lost looks for the next one (several --master).
  static constexpr std::chrono::seconds kFollowTime{60};

  // A stream to the current daemon: the job, or (once accepted) a follow of it.
  void Open() {
    stream_.reset();  // it has ended; gRPC lets go of it first
    stream_ = std::make_unique<Stream>(
        io_, [this](const v1::SubmitReply& reply) { OnReply(reply); },
        [this](const grpc::Status& status) { OnDone(status); });
    stream_->Begin(/*wait_for_ready=*/false, [this](auto* context, auto* reactor) {
      stubs_[current_]->async()->Submit(context, reactor);
    });
    v1::SubmitEvent event;
    if (job_id_.empty()) {
      *event.mutable_job() = job_;
    } else {
      event.set_follow(job_id_);
    }
    stream_->Queue(event);
  }

  void OnReply(const v1::SubmitReply& reply) {
    if (reply.has_output()) {
      common::Stdout().Write(reply.output());
    } else if (reply.has_accepted()) {
      const bool followed = !job_id_.empty();
      accepted_ = true;
      adoptable_ = adoptable_ || reply.accepted().adoptable();
      job_id_ = reply.accepted().job_id();
      follow_deadline_.reset();
      common::Stderr().Write(followed ? "gangrun submit: following job " + job_id_ +
                                            " on the daemon at " + masters_[current_] + "\n"
                                      : "gangrun submit: job " + job_id_ + " running on " +
                                            absl::StrJoin(reply.accepted().agents(), ", ") + "\n");
    } else if (reply.has_note()) {
      common::Stderr().Write("gangrun submit: job " + job_id_ + ": " + reply.note() + "\n");
    } else if (reply.has_waiting()) {
      common::Stderr().Write("gangrun submit: " + reply.waiting() + "\n");
    } else if (reply.has_rejected()) {
      result_ = SubmitUsage(reply.rejected());
    } else if (reply.has_finished()) {
      common::Stderr().Write(launcher::FormatOutcome(reply.finished()));
      result_ = reply.finished();
    }
  }

  void OnDone(const grpc::Status& status) {
    if (!result_ && TryNextDaemon(status)) return;
    if (!result_ && !accepted_) {
      result_ = CallFailed(status);
    } else if (!result_) {
      common::Stderr().Write(
          "gangrun submit: lost the daemon while the job ran: " + status.error_message() + "\n");
      v1::JobOutcome lost;
      lost.set_kind(v1::JobOutcome::KIND_NODE_LOST);
      lost.set_message("lost the daemon while the job ran: " + status.error_message());
      result_ = lost;
    }
    io_.stop();
  }

  // Several daemons on one store: a standby (or one that is down) refuses; the next is
  // asked. A job that was accepted is followed to the daemon that adopts it, also when the
  // daemon has one address only: on a store, the daemon started again there adopts the job
  // (systemd's Restart=on-failure), and the submit must exit with the job's own outcome.
  bool TryNextDaemon(const grpc::Status& status) {
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return false;
    if (masters_.size() < 2 && !(accepted_ && adoptable_)) return false;
    const auto now = std::chrono::steady_clock::now();
    if (!follow_deadline_) {
      follow_deadline_ = now + kFollowTime;
      if (accepted_) {
        common::Stderr().Write(
            "gangrun submit: lost the daemon at " + masters_[current_] + " (" +
            status.error_message() + "); following job " + job_id_ +
            (masters_.size() < 2 ? " to the daemon that adopts it there\n" : " to the next one\n"));
      }
    }
    if (now > *follow_deadline_) return false;
    current_ = (current_ + 1) % masters_.size();
    retry_ = std::make_unique<boost::asio::steady_timer>(io_, std::chrono::milliseconds(200));
    retry_->async_wait([this](const boost::system::error_code& ec) {
      if (!ec && !result_) Open();
    });
    return true;
  }

  void WaitForSignal() {
    signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
      if (!ec) OnSignal(sig);
    });
  }

  void OnSignal(int sig) {
    if (++signals_seen_ > 1) {
      // Leave at once: the daemon stops a job whose submitter is gone.
      v1::JobOutcome stopped;
      stopped.set_kind(v1::JobOutcome::KIND_STOPPED_BY_SIGNAL);
      stopped.set_signal(sig);
      result_ = stopped;
      stream_->CancelAndWait();
      io_.stop();
      return;
    }
    common::Stderr().Write("gangrun submit: received " + common::SignalName(sig) +
                           ": stopping the job\n");
    v1::SubmitEvent stop;
    stop.mutable_stop()->set_signal(sig);
    stop.mutable_stop()->set_reason("gangrun submit received " + common::SignalName(sig));
    stream_->Queue(stop);
    WaitForSignal();
  }

  boost::asio::io_context io_;
  std::vector<std::string> masters_;
  std::vector<std::unique_ptr<v1::Daemon::Stub>> stubs_;  // before stream_: it goes first
  size_t current_ = 0;
  v1::SubmitJob job_;
  std::string job_id_;  // once accepted
  std::optional<std::chrono::steady_clock::time_point> follow_deadline_;
  std::unique_ptr<boost::asio::steady_timer> retry_;
  boost::asio::signal_set signals_;
  std::unique_ptr<Stream> stream_;
  std::optional<CommandResult> result_;
  bool accepted_ = false;
  bool adoptable_ = false;  // the daemon said it is on a store (JobAccepted.adoptable)
  int signals_seen_ = 0;
};

}  // namespace

CommandResult RunSubmit(const CommandArgs& command) {
  SubmitArgs args = Split(command.args);
  if (args.version && !args.help) {
    std::printf("%s\n", common::VersionLine("gangrun submit").c_str());
    return absl::OkStatus();
  }
  if (args.help) {
    // Submit reads its own command line: everything but --master and --export is the job's.
    PrintHelp(
        "submit",
        "run a job on the agents registered with the daemon (it exits with the job's outcome)",
        "[OPTIONS] [LAUNCHER OPTIONS] task_script [args...]",
        "Options:\n"
        "  -h,--help                   Print this help message and exit\n"
        "  --version                   Print the version and exit\n"
        "  --master TEXT               the daemon (gangrun scheduler), HOST:PORT (GANGRUN_MASTER)\n"
        "  --export TEXT               the job's environment: ALL (the default: this one), NONE "
        "(the agent's) or VAR[,VAR...] (those over the agent's); GANGRUN_*, SLURM_* and the "
        "service manager's variables are never carried\n\n"
        "Launcher options (gangrun --help) apply to the job: --worker_num N is required, "
        "--local_worker_num K places K workers per agent; the daemon chooses --master_addr, "
        "--master_port, --node_rank, --join and --run_id (the job's id). The job runs in this "
        "working directory, which must exist on every agent's host.");
    return absl::OkStatus();
  }
  ClientTarget target;
  target.master = args.master.empty() ? command.env(env::kMaster).value_or("") : args.master;
  target.access = ClientAccessFromEnv(command.env);
  rpc::Access launcher_access;
  auto job = MakeJob(args.launch, args.export_mode, command.env, &launcher_access);
  if (!job.ok()) return job.status();
  if (target.access.token.empty() && target.access.token_file.empty()) {
    target.access.token = launcher_access.token;
    target.access.token_file = launcher_access.token_file;
  }
  // --master HOST:PORT[,HOST:PORT...]: several daemons on one store (the active one answers).
  std::vector<std::string> masters = absl::StrSplit(target.master, ',', absl::SkipEmpty());
  if (masters.empty()) masters.push_back("");
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (const std::string& master : masters) {
    ClientTarget one = target;
    one.master = master;
    auto channel = OpenClientChannel(one);
    if (!channel.ok()) return SubmitUsage(std::string(channel.status().message()));
    channels.push_back(*channel);
  }
  SubmitSession session(masters, std::move(channels));
  return session.Run(*job);
}

}  // namespace gangrun::cli
