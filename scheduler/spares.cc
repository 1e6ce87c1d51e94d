// Recovery without a person: spares (launchers beyond the job's size that wait to take a lost
// or excluded node's place), exclusions (--health_check, --exclude_after), health rounds before
// each generation, and what a failed generation means (RecoveryPolicy). Part of the Scheduler
// actor (scheduler.h): the same strand, the same state.

#include "common/logging.h"
#include "scheduler/scheduler.h"

namespace gangrun::scheduler {

bool Scheduler::JoinsAsSpare(const KnownNode& node, const v1::JoinRequest& join) const {
  if (spare_pool_.wanted() <= 0 || node.joined || spare_pool_.Has(node.id)) return false;
  // No place for it: the job is full, or (fixed size) already formed.
  const bool full = membership_.workers + join.local_worker_num() > options_.world_size;
  if (!full && (Elastic() || Forming())) return false;
  if (!CheckJoinRequest(join, identity_).ok()) return false;  // refused with the reason
  return !spare_pool_.full();
}

void Scheduler::AdmitSpare(KnownNode& node, const v1::JoinRequest& join) {
  TakeJoinFacts(node, join);
  spare_pool_.Admit(node.id, join.local_worker_num(), node.domain);
  node.join = {join.node_name(), join.host_address(), -1, join.local_worker_num()};
  node.ended = true;  // it runs nothing
  const int spares = spare_pool_.size();
  common::Logger("scheduler")
      ->info("{} waits as a spare with {} worker(s) ({} of {} spares)", Describe(node),
             join.local_worker_num(), spares, options_.spare_nodes);
  Record(Event::kSpareJoined, {{"node", join.node_name()},
                               {"address", join.host_address()},
                               {"pid", join.pid()},
                               {"workers", join.local_worker_num()},
                               {"spares", spares}});
  v1::NodeCommand command;
  command.mutable_spare()->set_spares(spares);
  SendTo(node, std::move(command));
  FillHoles();
}

void Scheduler::PinNodeRanks(const KnownNode* except) {
  for (auto& [id, node] : nodes_) {
    if (!node.joined || &node == except || node.join.requested_rank == node.slot.node_rank) {
      continue;
    }
    membership_.Remove(node.join);
    node.join.requested_rank = node.slot.node_rank;
    membership_.Add(node.join);
  }
}

bool Scheduler::TakeSpareFor(const KnownNode& gone, bool lost) {
  SparePool::Hole place{gone.join, gone.slot, Describe(gone), gone.domain, std::nullopt};
  if (lost && options_.rejoin_window > common::Duration::zero() && generation_ > 0 &&
      spare_pool_.For(gone.join.local_worker_num, gone.domain)) {
    HoldPlace(std::move(place), gone);
    return false;
  }
  if (TakeSpare(place, &gone)) return true;
  if (generation_ > 0) spare_pool_.Leave(std::move(place));
  return false;
}

bool Scheduler::TakeSpare(const SparePool::Hole& place, const KnownNode* except) {
  const NodeJoin& join = place.join;
  const NodeSlot& slot = place.slot;
  const std::string& gone = place.who;
  const std::optional<int> found = spare_pool_.For(join.local_worker_num, place.domain);
  if (!found) return false;
  KnownNode& spare = nodes_.at(*found);
  if (generation_ > 0) PinNodeRanks(except);
  spare_pool_.Remove(spare.id);
  spare.joined = true;
  spare.ended = true;  // nothing of this generation to wait for
  spare.join.requested_rank = generation_ > 0 ? slot.node_rank : join.requested_rank;
  spare.slot = slot;
  membership_.Add(spare.join);
  common::Logger("scheduler")
      ->warn("spare {} takes the place of {} (node rank {}, ranks {}..{}{})", Describe(spare), gone,
             slot.node_rank, slot.first_rank, slot.first_rank + join.local_worker_num - 1,
             spare.domain.empty() ? "" : ", domain " + spare.domain);
  Record(Event::kSparePromoted, {{"node", spare.join.node_name},
                                 {"address", spare.join.host_address},
                                 {"replaces", gone},
                                 {"node_rank", slot.node_rank},
                                 {"first_rank", slot.first_rank},
                                 {"domain", spare.domain},
                                 {"spares_left", spare_pool_.size()}});
  return true;
}

void Scheduler::HoldPlace(SparePool::Hole place, const KnownNode& gone) {
  PinNodeRanks(&gone);  // everyone else keeps their node rank: the one left is the lost node's
  place.held_until = clock_.Now() + options_.rejoin_window;
  common::Logger("scheduler")
      ->warn(
          "holding the place of {} (ranks {}..{}) for {} s for a launcher to come back "
          "(--rejoin_window); a spare takes it then",
          place.who, place.slot.first_rank, place.slot.first_rank + place.join.local_worker_num - 1,
          common::SecondsOf(options_.rejoin_window));
  spare_pool_.Leave(std::move(place));
  if (!rejoin_timer_) ArmRejoin(options_.rejoin_window);
}

void Scheduler::ArmRejoin(common::Duration in) {
  rejoin_timer_ = clock_.After(in, [this] {
    rejoin_timer_.reset();
    if (state_ == JobState::kFinished) return;
    FillHoles();  // the holds that ended go to spares
    if (auto next = spare_pool_.NextHeld(clock_.Now())) ArmRejoin(*next - clock_.Now());
  });
}

void Scheduler::FillHoles(bool end_holds) {
  if (MembershipComplete()) spare_pool_.ClearHoles();  // a relaunched launcher took them
  const bool filled = spare_pool_.Fill([this, end_holds](const SparePool::Hole& hole) {
    if (!end_holds && hole.held_until && *hole.held_until > clock_.Now()) {
      return false;  // --rejoin_window
    }
    return TakeSpare(hole, nullptr);
  });
  // Form waits for a health round or the store's fence itself.
  if (filled && Forming() && MembershipComplete()) Form();
}

bool Scheduler::Exclude(int node_id, FailureCause cause, const std::string& why) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.excluded) return false;
  KnownNode& node = it->second;
  common::Logger("scheduler")->error("excluding {}: {}", Describe(node), why);
  CountFailure(cause);
  Record(Event::kNodeExcluded, {{"node", node.join.node_name},
                                {"address", node.join.host_address},
                                {"pid", node.pid},
                                {"generation", generation_},
                                {"cause", FailureCauseName(cause)},
                                {"reason", why}});
  Blame(node, "excluded: " + why);
  v1::NodeCommand command;
  command.mutable_excluded()->set_reason(why);
  SendTo(node, std::move(command));
  restarts_.Forget(node_id);
  const bool member = node.joined;
  node.joined = false;
  spare_pool_.Remove(node_id);
  node.excluded = true;  // gone once its launcher disconnects (or, hosting us, at the end)
  bool hole = false;
  if (member) {
    membership_.Remove(node.join);
    hole = !TakeSpareFor(node) && !MembershipComplete();
    if (hole && lost_node_.empty()) lost_node_ = Describe(node) + " was excluded: " + why;
  }
  health_rounds_.Answered(node_id);  // last: the round's end may form the next generation
  return hole;
}

bool Scheduler::MembershipComplete() const {
  return Elastic() ? membership_.workers >= min_world()
                   : membership_.workers == options_.world_size;
}

bool Scheduler::AwaitHealth() {
  std::vector<int> checked;
  for (const auto& [id, node] : nodes_) {
    if ((node.joined || spare_pool_.Has(id)) && !node.lost && node.health_check) {
      checked.push_back(id);
    }
  }
  return health_rounds_.Await(generation_ + 1, checked);
}

void Scheduler::OnHealthChecked(KnownNode& node, const v1::HealthChecked& checked) {
  std::string message;
  if (health_rounds_.OnChecked(node.id, checked, &message) == HealthRounds::Answer::kUnhealthy) {
    // The node the last generation failed on fails its check after it: the failure was its
    // hardware's, and the restart is not the job's to pay for.
    const bool hardware = restarts_.ForgiveIfHardware(node.id);
    // Exclude answers for it (a place left empty is waited for when forming).
    Exclude(node.id, FailureCause::kHealthCheck,
            std::string("its health check failed") +
                (hardware ? " after the failure on it (the hardware's: that restart is not counted)"
                          : "") +
                ": " + message);
  }
}

}  // namespace gangrun::scheduler
