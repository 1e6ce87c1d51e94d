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
#include <vector>

#include "gangrun/v1/progress.pb.h"

namespace gangrun::scheduler {

std::vector<v1::StackGroup> GroupStacks(const std::vector<v1::RankStack>& stacks);

// Where a group is: "in f (a.py:3)", "all_reduce #42 in f (a.py:3)", "collective #41, in
// f (a.py:3)" or "not sampled".
std::string GroupPlace(const v1::StackGroup& group);

// One line for the groups, as in the examples above.
std::string DescribeGroups(const std::vector<v1::StackGroup>& groups);

// "3", "0-2", "0-1,3-7" (sorted, at most `max_items` runs, then ",...").
std::string RankList(std::vector<int> ranks, size_t max_items = 8);

}  // namespace gangrun::scheduler
