#pragma once
// What a component of the scheduler (scheduler/logs.h, scheduler/stacks_request.h, ...) knows
// of the job and the one way it reaches the job's nodes. The scheduler's core implements it
// (scheduler/scheduler.h); a component's unit test gives a fake. Components own their state
// and reach the core through these verbs alone, never its fields; the core routes to each
// component the node events that answer what it asked for.
//
// Called on the scheduler's strand only, as the core and its components run.

#include <cstdint>
#include <map>
#include <string>

#include "gangrun/v1/session.pb.h"
#include "nlohmann/json.hpp"
#include "scheduler/job_state.h"
#include "scheduler/telemetry.h"

namespace gangrun::scheduler {

class NodeDirectory {
 public:
  virtual ~NodeDirectory() = default;

  // Where a rank of the current generation runs: its node, that node's host name, its pid, and
  // whether the node's processes of this generation are still running (it has not reported
  // its end).
  struct Place {
    int node_id = 0;
    std::string host;
    int pid = 0;  // the rank's process (0 before it started)
    bool running = false;
  };
  // Every rank of the current generation on a member that is connected, by rank (empty
  // before the first generation starts).
  virtual std::map<int, Place> RankPlaces() const = 0;
  // The host name of a node ("" when the node has left).
  virtual std::string HostOf(int node_id) const = 0;
  // Whether a node is there to be asked: connected and not lost.
  virtual bool Reachable(int node_id) const = 0;
  // Sends a command to a node (nothing happens when it is not Reachable).
  virtual void Send(int node_id, v1::NodeCommand command) = 0;

  virtual uint64_t generation() const = 0;
  virtual JobState state() const = 0;
  // The job's size (ranks are 0 .. world_size - 1).
  virtual int world_size() const = 0;
  // An event for the event log and /metrics (scheduler/telemetry.h).
  virtual void Record(Event event, nlohmann::json fields) = 0;
};

}  // namespace gangrun::scheduler
