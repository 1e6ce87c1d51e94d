// Health rounds (scheduler/health_rounds.h).

#include "scheduler/health_rounds.h"

#include "common/logging.h"
#include "scheduler/peer_checks.h"

namespace gangrun::scheduler {

bool HealthRounds::Await(uint64_t generation, const std::vector<int>& nodes) {
  if (!waiting_.empty()) return true;  // the round under way calls Done when done
  if (generation <= 1 || for_generation_ == generation) return false;
  for_generation_ = generation;
  ++round_;
  for (int id : nodes) {
    if (!nodes_.Reachable(id)) continue;
    waiting_.insert(id);
    v1::NodeCommand command;
    command.mutable_check_health()->set_round(round_);
    nodes_.Send(id, std::move(command));
  }
  if (waiting_.empty()) return false;
  common::Logger("scheduler")
      ->info("health round {}: {} node(s) check themselves before generation {}", round_,
             waiting_.size(), for_generation_);
  return true;
}

HealthRounds::Answer HealthRounds::OnChecked(int node_id, const v1::HealthChecked& checked,
                                             std::string* message) {
  if (checked.round() != round_ || waiting_.count(node_id) == 0) {
    common::Logger("scheduler")
        ->warn("ignoring a health answer of round {} from '{}' (round {})", checked.round(),
               nodes_.HostOf(node_id), round_);
    return Answer::kIgnored;
  }
  *message = Sanitize(checked.message(), kMaxReasonBytes);
  nodes_.Record(Event::kHealthChecked, {{"node", nodes_.HostOf(node_id)},
                                        {"round", checked.round()},
                                        {"healthy", checked.healthy()},
                                        {"message", *message}});
  if (!checked.healthy()) return Answer::kUnhealthy;
  Answered(node_id);
  return Answer::kHealthy;
}

void HealthRounds::Answered(int node_id) {
  if (waiting_.erase(node_id) == 0 || !waiting_.empty()) return;
  common::Logger("scheduler")->info("health round {} done", round_);
  done_();
}

}  // namespace gangrun::scheduler
