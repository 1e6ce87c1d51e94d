// A node whose scheduler moves while its workers run (a daemon's job on a store): it lets go
// of the lost link, keeps everything it runs, and joins the next scheduler with the
// generation it runs. Part of the Node actor (node.h): the same strand, the same state.

#include "common/logging.h"
#include "node/node.h"

namespace gangrun::node {

void Node::Detach(const std::string& reason) {
  GANGRUN_ON_STRAND(strand_);
  if (finished_ || detached_) return;
  detached_ = true;
  common::Logger("node")->warn(
      "lost the scheduler ({}); generation {} keeps running while the next scheduler is found",
      reason, generation_);
}

void Node::Reattach(SchedulerLink& link) {
  GANGRUN_ON_STRAND(strand_);
  if (finished_) return;
  link_ = &link;
  detached_ = false;
  message_interval_ = common::Duration::zero();  // the next scheduler sends its own policy
  SendJoin();
  if (held_stop_) {
    v1::NodeEvent stop = std::move(*held_stop_);
    held_stop_.reset();
    Send(std::move(stop));
  }
}

}  // namespace gangrun::node
