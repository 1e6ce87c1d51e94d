#pragma once
// Spares (--spare_nodes): launchers beyond the job's size that wait, running nothing, to take a
// lost or excluded node's place, and the places left empty (holes) that the next spare to come
// fills. A component of the scheduler that owns which nodes wait as spares, in the order they
// joined, and the holes; the core decides when a place is given (it owns the membership), this
// pool which spare takes it: the first to have joined with as many workers as the place has
// ranks and of the same topology domain (--topology_domain: a segment, an NVLink domain), else
// the first with as many workers. On the scheduler's strand.
//
// Example: --spare_nodes 2, spares s1 (8 workers) then s2 (4 workers) wait. Node a (4 workers)
// is lost: For(4) is s2, which takes a's node rank and ranks. Node b (2 workers) is lost next:
// no spare has 2 workers, so its place is a hole, which a 2-worker spare that joins later
// takes (Fill) and the job goes on. With domains: spares s1 (4 workers, domain "rack1") and s2
// (4, "rack2"); a 4-worker node of "rack2" is lost: s2 takes its place, though s1 came first.

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "scheduler/rank_assignment.h"

namespace gangrun::scheduler {

class SparePool {
 public:
  // A place nobody took: what the node that left it had, and who it was.
  struct Hole {
    NodeJoin join;
    NodeSlot slot;
    std::string who;
    std::string domain;  // its topology domain ("" = none)
    // Held for a launcher to come back (--rejoin_window) until then: no spare takes it before.
    std::optional<common::TimePoint> held_until;
  };

  explicit SparePool(int wanted) : wanted_(wanted) {}

  // --spare_nodes: how many may wait at once (0: none).
  int wanted() const { return wanted_; }
  bool full() const { return size() >= wanted_; }
  int size() const { return static_cast<int>(spares_.size()); }
  // Every spare that ever joined, promoted and lost ones included.
  int admitted() const { return admitted_; }

  // The node waits as a spare with `workers` workers, in topology domain `domain` ("" = none).
  void Admit(int node_id, int workers, std::string domain = "");
  // It no longer waits: promoted, excluded, lost or gone. Nothing when it was no spare.
  void Remove(int node_id) { spares_.erase(node_id); }
  bool Has(int node_id) const { return spares_.count(node_id) > 0; }
  // The spares, in the order they joined.
  std::vector<int> ids() const;
  // The first spare to have joined with exactly `workers` workers (only such a spare can take
  // a place of that many ranks) and in `domain`, else the first with that many workers.
  std::optional<int> For(int workers, const std::string& domain = "") const;

  // A place nobody took (after the first generation: a spare that comes later takes it).
  void Leave(Hole hole) { holes_.push_back(std::move(hole)); }
  // The membership is whole again (a relaunched launcher took the places): no hole is left.
  void ClearHoles() { holes_.clear(); }
  // Offers each hole, oldest first, to `take`, which gives it to a spare (true) or finds none
  // (false, the hole stays). True if any hole was taken.
  bool Fill(const std::function<bool(const Hole&)>& take);
  size_t holes() const { return holes_.size(); }
  // The earliest end of a hole's hold after `now` (none: no hole is held beyond it).
  std::optional<common::TimePoint> NextHeld(common::TimePoint now) const;

 private:
  int wanted_;
  int admitted_ = 0;
  struct Spare {
    int workers = 0;
    std::string domain;
  };
  // By node id; node ids grow as nodes connect, so this is the order they joined in (a node
  // joins once, on the connection it was given its id for).
  std::map<int, Spare> spares_;
  std::vector<Hole> holes_;
};

}  // namespace gangrun::scheduler
