#pragma once
// The root-cause report of a hang: ranks grouped by where their stacks were, and the odd ones
// out named.
//
// Rule: ranks are grouped by their innermost user frame ("where") and, where the progress
// hook counts them, by the collectives they issued and the collective they are inside;
// ranks whose stack could not be captured form a group of their own, named as such.
//   1. When the counted groups do not all have the same collective count, the groups with
//      the fewest are behind: the odd ones out, however alike the stacks look (the others
//      wait in a collective that they never joined).
//   2. Otherwise, when the sampled ranks are in more than one place, every group smaller
//      than the largest is an odd one out (if every group has the same size, none is: there
//      is no majority to differ from).
// Groups are listed largest first; the odd ones out are marked.
//
// Examples: "7 ranks (0-1,3-7) in all_reduce_wait (train.py:88); rank 2 in load_batch
// (data.py:41) — the odd one out", and with the hook's counts "ranks 0-2: all_reduce #42 in
// step (train.py:88); rank 3: collective #41, in slow_loader (data.py:41) <- look here
// first".

#include <string>
#include <string_view>
#include <vector>

#include "gangrun/v1/progress.pb.h"
#include "gangrun/v1/session.pb.h"

namespace gangrun::scheduler {

// How a report points at the group to read first.
inline constexpr std::string_view kLookHereFirst = "<- look here first";

// What a hung generation is stopped with: its one line, where to look first (the odd one out,
// else the rank that hung) and where every rank was.
struct HangVerdict {
  std::string message;
  v1::RootCause root_cause;
  std::vector<v1::StackGroup> groups;
};

// The verdict on the stacks captured at a hang that `noticed` says how it was noticed ("rank 2
// on h1 made no progress for 30 s ...") and `hung` names. With an odd one out the line leads
// with it: "rank 3 on h2 is behind the others, at collective #41, in f (a.py:3) <- look here
// first; ranks 0-2: ...; noticed when rank 2 ..."; the root cause is then its smallest odd group's
// first rank (host and pid from its stack). Without one: `noticed`, then where the groups were.
HangVerdict JudgeHang(const std::vector<v1::RankStack>& stacks, const std::string& noticed,
                      const v1::RootCause& hung);

// The report's lines for the groups, one per group, the odd ones out marked, as the job's
// outcome prints them (launcher/report.cc).
std::string WhereEveryRankWas(const std::vector<v1::StackGroup>& groups);

std::vector<v1::StackGroup> GroupStacks(const std::vector<v1::RankStack>& stacks);

// What the scheduler keeps of a rank's stack as node `host` reported it: every field bounded
// and sanitized (scheduler/peer_checks.h), the host the scheduler knows the node by. The
// stack's text is not kept (a hang report's stacks are in the ranks' logs).
v1::RankStack KeptStack(const std::string& host, const v1::RankStack& stack);

// Where a group is: "in f (a.py:3)", "all_reduce #42 in f (a.py:3)", "collective #41, in
// f (a.py:3)" or "not sampled".
std::string GroupPlace(const v1::StackGroup& group);

// One line for the groups, as in the examples above.
std::string DescribeGroups(const std::vector<v1::StackGroup>& groups);

// "3", "0-2", "0-1,3-7" (sorted, at most `max_items` runs, then ",...").
std::string RankList(std::vector<int> ranks, size_t max_items = 8);

}  // namespace gangrun::scheduler
