#pragma once
// Health rounds (--health_check): before each generation after the first, every member and
// spare that has a health check runs it, and the generation starts once all answered. A
// component of the scheduler (scheduler/node_directory.h) that owns the round's number, the
// generation it checks for, and whose answers are due; the core says which nodes to ask, hears
// each answer through OnChecked (excluding an unhealthy node itself) and is told when the
// round is done. On the scheduler's strand.
//
// Example: generation 1 failed on nodes a, b (a spare s waits); before generation 2, round 1
// asks a, b and s; a and s answer healthy, b unhealthy (the core excludes it, and s takes its
// place); the last answer ends the round and the core forms generation 2.

#include <cstdint>
#include <functional>
#include <set>
#include <vector>

#include "gangrun/v1/session.pb.h"
#include "scheduler/node_directory.h"

namespace gangrun::scheduler {

class HealthRounds {
 public:
  // The round's last answer is in: the core forms the next generation if it waits for one.
  using Done = std::function<void()>;
  HealthRounds(NodeDirectory& nodes, Done done) : nodes_(nodes), done_(std::move(done)) {}
  HealthRounds(const HealthRounds&) = delete;
  HealthRounds& operator=(const HealthRounds&) = delete;

  // Before `generation` (after the first): asks each of `nodes` (the members and spares that
  // have a health check) to run it. True while a round is under way (the one just started, or
  // an earlier one); false when nobody needs asking or this generation's round is done.
  bool Await(uint64_t generation, const std::vector<int>& nodes);

  enum class Answer {
    kIgnored,    // not of this round, or not awaited from this node (a warning is logged)
    kHealthy,    // recorded and answered
    kUnhealthy,  // recorded; the core excludes the node, then calls Answered
  };
  // A node's answer (HealthChecked, its message at most kMaxReasonBytes), recorded as an event.
  Answer OnChecked(int node_id, const v1::HealthChecked& checked, std::string* message);
  // A node's answer is in, or will never come (lost, left, excluded); the round's last calls
  // Done. Nothing when none was due from it.
  void Answered(int node_id);

  uint64_t round() const { return round_; }

 private:
  NodeDirectory& nodes_;
  Done done_;
  uint64_t round_ = 0;
  uint64_t for_generation_ = 0;  // the generation the last round checked for
  std::set<int> waiting_;        // node ids whose answer is due
};

}  // namespace gangrun::scheduler
