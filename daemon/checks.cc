#include "daemon/checks.h"

#include "common/status.h"
#include "launcher/launch_spec.h"
#include "launcher/option_table.h"
#include "launcher/scheduler_role.h"
#include "scheduler/peer_checks.h"

namespace gangrun::daemon {

using scheduler::kMaxNameBytes;

absl::Status CheckAgentRegister(const v1::AgentRegister& reg) {
  if (!scheduler::IsCleanName(reg.name())) {
    return absl::InvalidArgumentError("an agent needs a printable name of 1 to " +
                                      std::to_string(kMaxNameBytes) + " bytes");
  }
  if (!reg.address().empty() && !scheduler::IsNumericAddress(reg.address())) {
    return absl::InvalidArgumentError("agent '" + reg.name() + "' gives no numeric address");
  }
  if (reg.slots() < 1 || reg.slots() > kMaxAgentSlots) {
    return absl::InvalidArgumentError(
        "agent '" + reg.name() + "' offers " + std::to_string(reg.slots()) +
        " slots; an agent needs --slots in 1.." + std::to_string(kMaxAgentSlots));
  }
  if (reg.pid() < 0) {
    return absl::InvalidArgumentError("agent '" + reg.name() + "' gives a negative pid");
  }
  // Each of its launchers holds at least one slot.
  if (reg.running_jobs_size() + reg.exited_size() > 2 * kMaxAgentSlots) {
    return absl::InvalidArgumentError("agent '" + reg.name() +
                                      "' says it ran more launchers than it has slots");
  }
  for (const std::string& job : reg.running_jobs()) {
    if (!scheduler::IsCleanName(job)) {
      return absl::InvalidArgumentError("agent '" + reg.name() + "' names a malformed job id");
    }
  }
  for (const v1::LauncherExited& exited : reg.exited()) {
    if (!scheduler::IsCleanName(exited.job_id()) ||
        exited.error().size() > scheduler::kMaxReasonBytes) {
      return absl::InvalidArgumentError("agent '" + reg.name() +
                                        "' reports a malformed launcher exit");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSubmitJob(const v1::SubmitJob& job) {
  const v1::LaunchSpec& spec = job.spec();
  if (static_cast<size_t>(spec.options_size()) > launcher::OptionRows().size()) {
    return absl::InvalidArgumentError("the launch spec names more options than gangrun has");
  }
  for (const auto& [name, value] : spec.options()) {
    if (name.size() > 64 || value.size() > (64 << 10)) {
      return absl::InvalidArgumentError("an option of the launch spec is too long");
    }
  }
  if (spec.task_script().empty()) return absl::InvalidArgumentError("missing task script");
  if (job.user().size() > 64) return absl::InvalidArgumentError("the user name is too long");
  if (spec.task_args_size() > 65536) return absl::InvalidArgumentError("too many task arguments");
  return absl::OkStatus();
}

absl::StatusOr<Daemon::JobConfig> ConfigureSubmittedJob(const v1::SubmitJob& job) {
  v1::LaunchSpec spec = job.spec();
  // Agents fill their slots unless the job says how many workers each runs.
  if (!job.local_worker_num_given()) launcher::SetLaunchOption(spec, "local_worker_num", "1");
  ASSIGN_OR_RETURN(launcher::Options options, launcher::FromLaunchSpec(spec));
  RETURN_IF_ERROR(launcher::ValidateValues(options));
  if (options.elastic()) {
    return absl::InvalidArgumentError("--worker_num MIN:MAX is not supported by gangrun submit");
  }
  if (job.local_worker_num_given()) {
    if (options.local_worker_num > kMaxAgentSlots) {
      return absl::InvalidArgumentError("--local_worker_num must be in 1.." +
                                        std::to_string(kMaxAgentSlots));
    }
    if (options.worker_num % options.local_worker_num != 0) {
      return absl::InvalidArgumentError("--worker_num must be a multiple of --local_worker_num");
    }
  }
  Daemon::JobConfig config;
  // A relative --restart_rules is the submitter's: from the directory it submitted in.
  if (!options.restart_rules.empty() && options.restart_rules.front() != '/' &&
      !spec.cwd().empty()) {
    options.restart_rules = spec.cwd() + "/" + options.restart_rules;
  }
  ASSIGN_OR_RETURN(config.scheduler, launcher::SchedulerOptionsFor(options));
  config.scheduler.await_replacement = false;  // the daemon relaunches no launcher
  config.kv = launcher::KvLimitsFor(options);
  config.world_size = options.worker_num;
  config.local_worker_num = options.local_worker_num;
  config.cluster_time_out = options.cluster_time_out;
  config.task = options.task_script;
  return config;
}

}  // namespace gangrun::daemon
