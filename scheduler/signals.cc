// Job-wide signals (--signals_to_forward: a signal one launcher gets reaches every worker of the
// job, which goes on) and what the time limit (scheduler/time_limit.h) means for the job. Part
// of the Scheduler core (scheduler.h): the same strand, the same state.

#include <algorithm>

#include "common/exit_status.h"
#include "common/logging.h"
#include "scheduler/scheduler.h"

namespace gangrun::scheduler {

void Scheduler::OnTimeLimit(const std::string& why) {
  switch (state_) {
    case JobState::kRunning:
    case JobState::kCapturing:
      return BeginStopping({StopReason::Kind::kTimeLimit, why, {}, {}});
    case JobState::kStopping:  // the generation's end finishes the job
    case JobState::kFinished:
      return;
    case JobState::kForming:
    case JobState::kBackingOff:
    case JobState::kAwaitingReplacement:
      return Finish(CurrentOutcome());
  }
}

void Scheduler::OnForwardSignal(const KnownNode& from, int signal) {
  const auto& allowed = options_.signals_to_forward;
  if (std::find(allowed.begin(), allowed.end(), signal) == allowed.end()) {
    common::Logger("scheduler")
        ->warn(
            "ignoring a request from {} to forward signal {}: not one of "
            "--signals_to_forward",
            Describe(from), signal);
    return;
  }
  SignalWorkers(signal, "the launcher on " + from.join.node_name + " got it");
}

void Scheduler::SignalWorkers(int signal, const std::string& why) {
  if (!Live()) {
    common::Logger("scheduler")
        ->info("not forwarding {} ({}): no generation is running", common::SignalName(signal), why);
    return;
  }
  common::Logger("scheduler")
      ->info("forwarding {} to every worker of generation {}: {}", common::SignalName(signal),
             generation_, why);
  Record(Event::kSignalForwarded,
         {{"generation", generation_}, {"signal", common::SignalName(signal)}, {"reason", why}});
  for (auto& [id, node] : nodes_) {
    if (!node.joined || node.link == nullptr) continue;
    v1::NodeCommand command;
    command.mutable_signal()->set_signal(signal);
    SendTo(node, std::move(command));
  }
}

}  // namespace gangrun::scheduler
