#pragma once
// The records the scheduler's core (scheduler/scheduler.h) keeps and no component touches:
// what it knows of each connected node, and why a running generation is being stopped.

#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gangrun/v1/progress.pb.h"
#include "gangrun/v1/session.pb.h"
#include "scheduler/node_link.h"
#include "scheduler/rank_assignment.h"

namespace gangrun::scheduler {

// A connected node, from its session's opening until it is forgotten.
struct KnownNode {
  int id = 0;
  NodeLink* link = nullptr;
  bool joined = false;        // a member of the job
  bool excluded = false;      // left the job (health, --exclude_after); gone once disconnected
  bool health_check = false;  // it runs --health_check when asked (CheckHealth)
  std::string domain;         // --topology_domain ("" = none; at most kMaxNameBytes)
  std::string agent;          // the agent that started its launcher ("" = none; kMaxNameBytes)
  NodeJoin join;
  std::vector<std::string> addresses;  // its host's others (JoinRequest.addresses; bounded)
  int free_port = 0;
  NodeSlot slot;
  bool ended = false;  // its processes of this generation have all ended
  bool lost = false;
  int pid = 0;
  std::map<int, v1::WorkerStatus> workers;       // this generation's, by rank
  std::map<int, common::TimePoint> reported_at;  // when each rank last reported progress
};

// Why a running generation is being stopped (JobState::kStopping).
struct StopReason {
  enum class Kind { kWorkerFailed, kHung, kNodeLost, kStopRequested, kReform, kTimeLimit };
  Kind kind;
  std::string message;                 // what happened, for the log and the nodes
  v1::RootCause root_cause;            // kWorkerFailed: the first failure; kHung: where first
  std::vector<v1::StackGroup> groups;  // kHung: where every rank was
  int root_node = 0;                   // kWorkerFailed, kHung: the node it happened on (0: unknown)
  bool no_restart = false;  // kWorkerFailed: its exit code is one of --no_restart_exit_codes
};

}  // namespace gangrun::scheduler
