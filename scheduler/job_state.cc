#include "scheduler/job_state.h"

#include <string>

#include "common/check.h"

namespace gangrun::scheduler {
namespace {

struct Edge {
  JobState from;
  JobState to;
};

// The transition table (scheduler.h explains why each edge is taken).
constexpr Edge kEdges[] = {
    // Forming: it forms, or never does, or is stopped first.
    {JobState::kForming, JobState::kRunning},
    {JobState::kForming, JobState::kFinished},
    // (After a restart) an exclusion left a place no spare took: wait for a node to take it.
    {JobState::kForming, JobState::kAwaitingReplacement},
    // Running: a failure or a loss stops it, a hang is captured first, or it ends well.
    {JobState::kRunning, JobState::kStopping},
    {JobState::kRunning, JobState::kCapturing},
    {JobState::kRunning, JobState::kFinished},
    // Capturing: the capture ends in a stop (a failure, a loss or a stop request too), unless
    // every worker ended well meanwhile.
    {JobState::kCapturing, JobState::kStopping},
    {JobState::kCapturing, JobState::kFinished},
    // Stopping: every node ended; what comes next depends on why it stopped.
    {JobState::kStopping, JobState::kFinished},
    {JobState::kStopping, JobState::kBackingOff},
    {JobState::kStopping, JobState::kAwaitingReplacement},
    {JobState::kStopping, JobState::kForming},
    // Backing off: the backoff passes, or a node is lost or a stop is requested meanwhile.
    {JobState::kBackingOff, JobState::kForming},
    {JobState::kBackingOff, JobState::kFinished},
    // Awaiting a replacement: one comes (the job forms again), or none in time, or a stop.
    {JobState::kAwaitingReplacement, JobState::kForming},
    {JobState::kAwaitingReplacement, JobState::kFinished},
};

}  // namespace

bool EdgeAllowed(JobState from, JobState to) {
  for (const Edge& edge : kEdges) {
    if (edge.from == from && edge.to == to) return true;
  }
  return false;
}

void CheckEdge(JobState from, JobState to) {
  GANGRUN_CHECK(EdgeAllowed(from, to), "the scheduler's transition table has no edge " +
                                           std::string(JobStateName(from)) + " -> " +
                                           std::string(JobStateName(to)));
}

std::vector<std::pair<JobState, JobState>> AllEdges() {
  std::vector<std::pair<JobState, JobState>> edges;
  for (const Edge& edge : kEdges) edges.emplace_back(edge.from, edge.to);
  return edges;
}

std::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kForming:
      return "forming";
    case JobState::kRunning:
      return "running";
    case JobState::kCapturing:
      return "capturing";
    case JobState::kStopping:
      return "stopping";
    case JobState::kBackingOff:
      return "backing_off";
    case JobState::kAwaitingReplacement:
      return "awaiting_replacement";
    case JobState::kFinished:
      return "finished";
  }
  return "unknown";
}

v1::JobPhase PhaseOf(JobState state) {
  switch (state) {
    case JobState::kForming:
    case JobState::kAwaitingReplacement:
      return v1::JOB_PHASE_FORMING;
    case JobState::kRunning:
      return v1::JOB_PHASE_RUNNING;
    case JobState::kCapturing:
      return v1::JOB_PHASE_HUNG;
    case JobState::kStopping:
      return v1::JOB_PHASE_STOPPING;
    case JobState::kBackingOff:
      return v1::JOB_PHASE_RESTARTING;
    case JobState::kFinished:
      return v1::JOB_PHASE_FINISHED;
  }
  return v1::JOB_PHASE_UNSPECIFIED;
}

}  // namespace gangrun::scheduler
