#pragma once
// The scheduler's named states, the edges between them, and the phase people see for each:
// the transition table of scheduler.h held in code. Scheduler::Enter is the only writer of a
// scheduler's state and checks every edge against EdgeAllowed (an edge missing from the table
// is a GANGRUN_CHECK, not a comment).

#include <string_view>
#include <utility>
#include <vector>

#include "gangrun/v1/session.pb.h"

namespace gangrun::scheduler {

enum class JobState {
  kForming,              // waiting for the nodes (first time, after a backoff, or re-forming)
  kRunning,              // a generation's workers run
  kCapturing,            // a rank hung: every rank's stack is being captured
  kStopping,             // every node was told to stop the generation; waiting for them
  kBackingOff,           // waiting out the restart backoff
  kAwaitingReplacement,  // a node was lost; waiting for one to take its place
  kFinished,             // the job is over (never left)
};
inline constexpr JobState kAllJobStates[] = {JobState::kForming,    JobState::kRunning,
                                             JobState::kCapturing,  JobState::kStopping,
                                             JobState::kBackingOff, JobState::kAwaitingReplacement,
                                             JobState::kFinished};

// Whether a scheduler may go from `from` to `to`.
bool EdgeAllowed(JobState from, JobState to);
// The same as an invariant: stops the process, naming the edge, when there is none.
void CheckEdge(JobState from, JobState to);
// Every edge of the table.
std::vector<std::pair<JobState, JobState>> AllEdges();
// "forming", "running", ... (the event log's and the messages' word).
std::string_view JobStateName(JobState state);
// What `gangrun status` and /metrics call it.
v1::JobPhase PhaseOf(JobState state);

}  // namespace gangrun::scheduler
