#pragma once
// Rank assignment: nodes with an explicit node rank come first, in that
// order; the others follow, ordered by host address and node name. Global ranks are prefix
// sums of each node's worker count, so nodes may differ in size. With equal sizes and
// explicit node ranks this is msrun's node_rank * local_worker_num + i.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gangrun::scheduler {

struct NodeJoin {
  std::string node_name;
  std::string host_address;
  int requested_rank = -1;  // -1 = automatic
  int local_worker_num = 0;
};

struct NodeSlot {
  int node_rank = 0;
  int first_rank = 0;
};

// Returns one slot per input node, in input order. Fails, naming the nodes, on duplicate
// node ranks, node ranks outside [0, node count), or worker counts that do not add up to
// `world_size`.
absl::StatusOr<std::vector<NodeSlot>> AssignRanks(const std::vector<NodeJoin>& nodes,
                                                  int world_size);

// The nodes that have joined so far, kept up to date by the scheduler so that checking a
// join costs O(log n), not O(n).
struct Membership {
  int workers = 0;
  std::map<int, NodeJoin> by_requested_rank;  // explicit node ranks in use
  void Add(const NodeJoin& node);
  void Remove(const NodeJoin& node);
};

// Checks whether `candidate` may join without exceeding `world_size` or reusing a node
// rank. Fails with a message naming the conflict.
absl::Status CheckJoin(const Membership& joined, const NodeJoin& candidate, int world_size);

}  // namespace gangrun::scheduler
