#include "scheduler/rank_assignment.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "common/check.h"

namespace gangrun::scheduler {
namespace {

std::string Describe(const NodeJoin& node) {
  return "node '" + node.node_name + "' (" + node.host_address + ")";
}

}  // namespace

void Membership::Add(const NodeJoin& node) {
  workers += node.local_worker_num;
  if (node.requested_rank >= 0) by_requested_rank[node.requested_rank] = node;
}

void Membership::Remove(const NodeJoin& node) {
  workers -= node.local_worker_num;
  if (node.requested_rank >= 0) by_requested_rank.erase(node.requested_rank);
}

absl::Status CheckJoin(const Membership& joined, const NodeJoin& candidate, int world_size) {
  if (candidate.requested_rank >= 0) {
    auto it = joined.by_requested_rank.find(candidate.requested_rank);
    if (it != joined.by_requested_rank.end()) {
      return absl::AlreadyExistsError("duplicate node rank " +
                                      std::to_string(candidate.requested_rank) + ": " +
                                      Describe(candidate) + " asks for the rank that " +
                                      Describe(it->second) + " already holds");
    }
  }
  if (candidate.local_worker_num <= 0) {
    return absl::InvalidArgumentError(Describe(candidate) + " offers no workers");
  }
  // Written so that no sum can overflow, whatever a peer claims.
  if (candidate.local_worker_num > world_size - joined.workers) {
    return absl::OutOfRangeError("extra node: " + Describe(candidate) + " brings " +
                                 std::to_string(candidate.local_worker_num) +
                                 " worker(s) but only " +
                                 std::to_string(world_size - joined.workers) + " of " +
                                 std::to_string(world_size) + " are still wanted");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<NodeSlot>> AssignRanks(const std::vector<NodeJoin>& nodes,
                                                  int world_size) {
  const int count = static_cast<int>(nodes.size());
  int64_t workers = 0;
  std::set<int> taken;
  for (const auto& node : nodes) {
    workers += node.local_worker_num;
    if (node.requested_rank < 0) continue;
    if (node.requested_rank >= count) {
      return absl::OutOfRangeError("node rank " + std::to_string(node.requested_rank) + " of " +
                                   Describe(node) + " is out of range: the job has " +
                                   std::to_string(count) + " node(s)");
    }
    if (!taken.insert(node.requested_rank).second) {
      return absl::AlreadyExistsError("duplicate node rank " + std::to_string(node.requested_rank) +
                                      " (" + Describe(node) + ")");
    }
  }
  if (workers != world_size) {
    return absl::FailedPreconditionError("the nodes bring " + std::to_string(workers) +
                                         " workers, the job wants " + std::to_string(world_size));
  }
  // Automatic nodes, by (address, name), fill the node ranks nobody asked for.
  std::vector<int> automatic;
  for (int i = 0; i < count; ++i) {
    if (nodes[i].requested_rank < 0) automatic.push_back(i);
  }
  std::sort(automatic.begin(), automatic.end(), [&](int a, int b) {
    return std::tie(nodes[a].host_address, nodes[a].node_name) <
           std::tie(nodes[b].host_address, nodes[b].node_name);
  });
  std::vector<int> by_rank(count, -1);  // node rank -> input index
  for (int i = 0; i < count; ++i) {
    if (nodes[i].requested_rank >= 0) by_rank[nodes[i].requested_rank] = i;
  }
  auto next = automatic.begin();
  for (int& index : by_rank) {
    if (index < 0) index = *next++;
  }
  std::vector<NodeSlot> slots(count);
  std::vector<bool> placed(count, false);
  int first = 0;
  for (int rank = 0; rank < count; ++rank) {
    const int index = by_rank[rank];
    GANGRUN_CHECK(index >= 0 && index < count && !placed[index],
                  "every node gets exactly one node rank");
    GANGRUN_CHECK(nodes[index].local_worker_num > 0, "a node brings at least one worker");
    placed[index] = true;
    slots[index] = {rank, first};
    first += nodes[index].local_worker_num;
  }
  // The nodes' ranges [first_rank, first_rank + local_worker_num) follow each other from 0, so
  // ending at world_size means every global rank is assigned exactly once.
  GANGRUN_CHECK(first == world_size, "the ranks assigned cover [0, world_size) exactly once");
  return slots;
}

}  // namespace gangrun::scheduler
