// Job-wide signals (--signals_to_forward: a signal one launcher gets reaches every worker of the
// job, which goes on) and the time limit (--time_limit, with --time_limit_signal's early
// warning). Part of the Scheduler actor (scheduler.h): the same strand, the same state.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/exit_status.h"
#include "common/logging.h"
#include "scheduler/scheduler.h"

namespace gangrun::scheduler {

using common::SecondsOf;

void Scheduler::ArmTimeLimit() {
  if (options_.time_limit <= common::Duration::zero()) return;
  time_limit_timer_ = clock_.After(options_.time_limit, [this] { OnTimeLimit(); });
  if (options_.time_limit_signal == 0 || options_.time_limit_signal_before >= options_.time_limit) {
    return;
  }
  time_limit_signal_timer_ =
      clock_.After(options_.time_limit - options_.time_limit_signal_before, [this] {
        time_limit_signal_timer_.reset();
        const std::string why =
            absl::StrCat(SecondsOf(options_.time_limit_signal_before),
                         " s before the job's time limit (--time_limit_signal)");
        Record(Event::kTimeLimit, {{"signal", common::SignalName(options_.time_limit_signal)},
                                   {"seconds_left", SecondsOf(options_.time_limit_signal_before)}});
        SignalWorkers(options_.time_limit_signal, why);
      });
}

void Scheduler::OnTimeLimit() {
  time_limit_timer_.reset();
  time_limit_signal_timer_.reset();
  if (state_ == State::kFinished) return;
  time_limit_reached_ = true;
  const std::string why =
      absl::StrCat("the job reached its time limit of ", SecondsOf(options_.time_limit), " s");
  common::Logger("scheduler")->warn("{}: stopping it", why);
  Record(Event::kTimeLimit, {{"time_limit_seconds", SecondsOf(options_.time_limit)}});
  switch (state_) {
    case State::kRunning:
    case State::kCapturing:
      return BeginStopping({StopReason::Kind::kTimeLimit, why, {}, {}});
    case State::kStopping:  // the generation's end finishes the job
    case State::kFinished:
      return;
    case State::kForming:
    case State::kBackingOff:
    case State::kAwaitingReplacement:
      return Finish(CurrentOutcome());
  }
}

void Scheduler::OnForwardSignal(const NodeState& from, int signal) {
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
