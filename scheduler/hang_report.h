#pragma once
// The root-cause report of a hang: ranks grouped by where their stacks were, and the odd ones
// out named.
//
// Rule: ranks are grouped by their innermost user frame ("where"); ranks whose stack could
// not be captured form a group of their own, named as such. When the sampled ranks are in
// more than one place, every group smaller than the largest is an odd one out (if every
// group has the same size, none is: there is no majority to differ from). Groups are listed
// largest first; the odd ones out are marked.
//
// Example: "7 ranks (0-1,3-7) in all_reduce_wait (train.py:88); rank 2 in load_batch
// (data.py:41) — the odd one out".

#include <string>
#include <vector>

#include "gangrun/v1/progress.pb.h"

namespace gangrun::scheduler {

std::vector<v1::StackGroup> GroupStacks(const std::vector<v1::RankStack>& stacks);

// One line for the groups, as in the example above.
std::string DescribeGroups(const std::vector<v1::StackGroup>& groups);

// "3", "0-2", "0-1,3-7" (sorted, at most `max_items` runs, then ",...").
std::string RankList(std::vector<int> ranks, size_t max_items = 8);

}  // namespace gangrun::scheduler
