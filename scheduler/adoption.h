#pragma once
// A daemon's job taken over with its workers running (Scheduler::Options::adopt_timeout):
// what the nodes that are back said of the generation they run. Part of the Scheduler
// (scheduler/adoption.cc).

#include <map>
#include <memory>
#include <vector>

#include "common/clock.h"
#include "gangrun/v1/session.pb.h"
#include "scheduler/scheduler.h"

namespace gangrun::scheduler {

struct Scheduler::Adoption {
  uint64_t generation = 0;  // 0 until the first node is back
  int restart_count = 0;
  int world_size = 0;  // the generation's workers
  int node_count = 0;
  int workers_back = 0;
  // Each node's exits since the move and whether all its processes have ended, replayed once
  // the generation goes on.
  std::map<int, std::vector<v1::WorkerExited>> exited;
  std::map<int, bool> ended;
  bool said_waiting = false;
  std::unique_ptr<common::Timer> timer;  // --adopt_timeout
};

}  // namespace gangrun::scheduler
