#pragma once
// The scheduler's named states, the edges between them, and the phase people see for each:
// the table below held in code. Scheduler::Enter is the only writer of a
// scheduler's state and checks every edge against EdgeAllowed (an edge missing from the table
// is a GANGRUN_CHECK, not a comment).
//
// The job is always in one named state:
//
//   state                  left by                                      to
//   ---------------------  -------------------------------------------  ---------------------
//   kForming               every wanted worker joined (or, elastic, the  kRunning
//                            minimum and --last_call passed)
//                          formation timeout                            kFinished(formation)
//                          stop requested                               kFinished(stopped)
//   kForming               (after a restart) an exclusion left a place  kAwaitingReplacement
//                            no spare could take
//   kRunning               a worker failed                              kStopping(worker)
//                          a node judged a rank hung                    kCapturing
//                          a torch timer expired                        kStopping(hung)
//                          a node lost, the restart budget allows       kStopping(node, replace)
//                          a node lost, no budget                       kStopping(node)
//                          elastic membership changed (join, loss)      kStopping(reform)
//                          stop requested, or the time limit passed     kStopping(stop)
//                          every worker exited 0, every node ended      kFinished(succeeded)
//   kCapturing             every node sent its stacks, or the capture   kStopping(hung)
//                            timeout passed
//                          (otherwise as kRunning: a failure, a loss or a stop wins)
//   kStopping(reason)      every node ended (all workers reaped):
//                            a stop was requested since, or the time    kFinished(by reason)
//                              limit passed
//                            a node must be replaced                    kAwaitingReplacement
//                              (a spare in its place: at once           -> kForming -> kRunning)
//                            worker, hung: an exit code of              kFinished(worker)
//                              --no_restart_exit_codes, or
//                              --max_no_progress_restarts reached
//                            worker, hung: budget left / none           kBackingOff / kFinished
//                              (--exclude_after: the root-cause node
//                              goes first; a spare takes its place)
//                            node (no replacement)                      kFinished(node lost)
//                            reform                                     kForming -> kRunning
//                            stop                                       kFinished(stopped)
//   kBackingOff            the backoff passed                           kForming -> kRunning
//                          a node's connection broke                    kFinished(node lost)
//                          stop requested                               kFinished(stopped)
//   kAwaitingReplacement   a node took the lost one's place             kForming -> kRunning
//                          formation timeout                            kFinished(node lost)
//                          stop requested                               kFinished(stopped)
//   kFinished              (never left: every node got JobFinished)
//
// Worked example: 2 nodes, --max_restarts 1. Rank 3 exits 1 (kRunning -> kStopping(worker,
// root cause rank 3)); both nodes report their generation ended (-> kBackingOff, 1 s);
// the backoff passes (-> kForming -> kRunning, generation 2, restart 1 of 1). Rank 3 exits 1
// again (-> kStopping(worker)); both end; no budget left -> kFinished(worker failed, rank 3).

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
