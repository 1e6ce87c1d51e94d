#pragma once
// A NodeDirectory (scheduler/node_directory.h) for a component's unit tests: the ranks and
// nodes a test sets, the commands a component sends (by node), the events it records.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/node_directory.h"

namespace gangrun::testing {

class FakeNodeDirectory : public scheduler::NodeDirectory {
 public:
  // Node `node_id` on `host` runs `ranks` of the current generation.
  void AddNode(int node_id, const std::string& host, const std::vector<int>& ranks) {
    hosts[node_id] = host;
    for (int rank : ranks) places[rank] = Place{node_id, host, 1000 + rank, true};
  }
  // The node is gone: it is not Reachable, and it has no host any more.
  void RemoveNode(int node_id) {
    hosts.erase(node_id);
    for (auto it = places.begin(); it != places.end();) {
      it = it->second.node_id == node_id ? places.erase(it) : std::next(it);
    }
  }
  // The commands sent to a node, oldest first.
  std::vector<v1::NodeCommand> SentTo(int node_id) const {
    std::vector<v1::NodeCommand> to;
    for (const auto& [id, command] : sent) {
      if (id == node_id) to.push_back(command);
    }
    return to;
  }

  std::map<int, Place> RankPlaces() const override { return places; }
  std::string HostOf(int node_id) const override {
    auto it = hosts.find(node_id);
    return it == hosts.end() ? "" : it->second;
  }
  bool Reachable(int node_id) const override { return hosts.count(node_id) > 0; }
  void Send(int node_id, v1::NodeCommand command) override {
    if (Reachable(node_id)) sent.emplace_back(node_id, std::move(command));
  }
  uint64_t generation() const override { return generation_number; }
  scheduler::JobState state() const override { return job_state; }
  int world_size() const override { return size; }
  void Record(scheduler::Event event, nlohmann::json fields) override {
    recorded.emplace_back(event, std::move(fields));
  }

  std::map<int, Place> places;
  std::map<int, std::string> hosts;
  std::vector<std::pair<int, v1::NodeCommand>> sent;
  std::vector<std::pair<scheduler::Event, nlohmann::json>> recorded;
  uint64_t generation_number = 1;
  scheduler::JobState job_state = scheduler::JobState::kRunning;
  int size = 0;
};

}  // namespace gangrun::testing
