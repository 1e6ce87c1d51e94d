#include "scheduler/hang_report.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "scheduler/peer_checks.h"

namespace gangrun::scheduler {

std::string RankList(std::vector<int> ranks, size_t max_items) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string text;
  size_t items = 0;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (items++ == max_items) return text + ",...";
    if (!text.empty()) text += ",";
    text += std::to_string(ranks[i]);
    if (j > i) text += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return text;
}

namespace {

// The odd ones out by collective count: the groups with the fewest, when the counted groups
// do not all have the same count. False when there is nothing to compare.
bool MarkBehind(std::vector<v1::StackGroup>& groups) {
  std::set<int64_t> counts;
  for (const auto& group : groups) {
    if (group.has_collectives()) counts.insert(group.collectives());
  }
  if (counts.size() < 2) return false;
  for (auto& group : groups) {
    const bool behind = group.has_collectives() && group.collectives() == *counts.begin();
    group.set_behind(behind);
    group.set_odd_one_out(behind);
  }
  return true;
}

// Otherwise by place: every group smaller than the largest.
void MarkMinorities(std::vector<v1::StackGroup>& groups) {
  size_t largest = 0, smallest = SIZE_MAX;
  for (const auto& group : groups) {
    largest = std::max(largest, static_cast<size_t>(group.ranks_size()));
    smallest = std::min(smallest, static_cast<size_t>(group.ranks_size()));
  }
  if (groups.size() < 2 || smallest == largest) return;
  for (auto& group : groups) {
    group.set_odd_one_out(static_cast<size_t>(group.ranks_size()) < largest);
  }
}

std::string Ranks(const v1::StackGroup& group) {
  std::vector<int> ranks(group.ranks().begin(), group.ranks().end());
  return (ranks.size() == 1 ? "rank " : "ranks ") + RankList(ranks);
}

}  // namespace

std::vector<v1::StackGroup> GroupStacks(const std::vector<v1::RankStack>& stacks) {
  // (collectives, the collective it is inside, where) -> ranks
  std::map<std::tuple<int64_t, std::string, std::string>, std::vector<int>> by_place;
  std::vector<int> unsampled;
  for (const auto& stack : stacks) {
    if (!stack.error().empty()) {
      unsampled.push_back(stack.rank());
      continue;
    }
    const int64_t count = stack.has_collectives() ? std::max<int64_t>(0, stack.collectives()) : -1;
    by_place[{count, count >= 0 && stack.in_collective() ? stack.last_op() : "",
              stack.where().empty() ? "an unknown frame" : stack.where()}]
        .push_back(stack.rank());
  }
  std::vector<v1::StackGroup> groups;
  for (auto& [place, ranks] : by_place) {
    std::sort(ranks.begin(), ranks.end());
    v1::StackGroup group;
    if (std::get<0>(place) >= 0) group.set_collectives(std::get<0>(place));
    group.set_in_collective(std::get<1>(place));
    group.set_where(std::get<2>(place));
    for (int rank : ranks) group.add_ranks(rank);
    groups.push_back(std::move(group));
  }
  if (!MarkBehind(groups)) MarkMinorities(groups);
  std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
    if (a.ranks_size() != b.ranks_size()) return a.ranks_size() > b.ranks_size();
    return a.ranks(0) < b.ranks(0);
  });
  if (!unsampled.empty()) {
    std::sort(unsampled.begin(), unsampled.end());
    v1::StackGroup group;
    for (int rank : unsampled) group.add_ranks(rank);
    groups.push_back(std::move(group));
  }
  return groups;
}

std::string GroupPlace(const v1::StackGroup& group) {
  if (group.where().empty()) return "not sampled";
  if (!group.has_collectives()) return "in " + group.where();
  if (!group.in_collective().empty()) {
    return group.in_collective() + " #" + std::to_string(group.collectives()) + " in " +
           group.where();
  }
  return "collective #" + std::to_string(group.collectives()) + ", in " + group.where();
}

std::string DescribeGroups(const std::vector<v1::StackGroup>& groups) {
  std::string text;
  size_t odd = 0;
  for (const auto& group : groups) odd += group.odd_one_out();
  for (const auto& group : groups) {
    if (!text.empty()) text += "; ";
    if (group.has_collectives()) {
      // "ranks 0-2: all_reduce #42 in step (train.py:88)"
      text += Ranks(group) + ": " + GroupPlace(group);
      if (group.odd_one_out()) text += " " + std::string(kLookHereFirst);
      continue;
    }
    std::vector<int> ranks(group.ranks().begin(), group.ranks().end());
    text += ranks.size() == 1 ? "rank " + RankList(ranks)
                              : std::to_string(ranks.size()) + " ranks (" + RankList(ranks) + ")";
    if (group.where().empty()) {
      text += " not sampled";
      continue;
    }
    text += " in " + group.where();
    if (group.odd_one_out()) text += odd == 1 ? " — the odd one out" : " — an odd one out";
  }
  return text;
}

v1::RankStack KeptStack(const std::string& host, const v1::RankStack& stack) {
  v1::RankStack kept;
  kept.set_rank(stack.rank());
  kept.set_pid(stack.pid());
  kept.set_host(host);
  kept.set_kind(Sanitize(stack.kind(), 16));
  kept.set_where(Sanitize(stack.where(), kMaxNameBytes));
  kept.set_error(Sanitize(stack.error(), kMaxReasonBytes));
  if (stack.has_collectives()) {
    kept.set_collectives(std::max<int64_t>(0, stack.collectives()));
    kept.set_last_op(Sanitize(stack.last_op(), 64));
    kept.set_in_collective(stack.in_collective());
  }
  kept.set_flight_recorder(Sanitize(stack.flight_recorder(), 4096));
  return kept;
}

HangVerdict JudgeHang(const std::vector<v1::RankStack>& stacks, const std::string& noticed,
                      const v1::RootCause& hung) {
  HangVerdict verdict{noticed, hung, GroupStacks(stacks)};
  const std::vector<v1::StackGroup>& groups = verdict.groups;
  // Where to look first: the odd one out (the smallest odd group), else the rank that hung.
  const v1::StackGroup* odd = nullptr;
  for (const auto& group : groups) {
    if (group.odd_one_out() && (odd == nullptr || group.ranks_size() < odd->ranks_size())) {
      odd = &group;
    }
  }
  if (odd == nullptr) {
    if (!groups.empty()) verdict.message += "; " + DescribeGroups(groups);
    return verdict;
  }
  const int rank = odd->ranks(0);
  verdict.root_cause.set_rank(rank);
  verdict.root_cause.set_pid(0);
  for (const auto& stack : stacks) {
    if (stack.rank() != rank) continue;
    verdict.root_cause.set_host(stack.host());
    verdict.root_cause.set_pid(stack.pid());
  }
  // The line leads with where to look, then how the hang was noticed.
  std::vector<v1::StackGroup> others;
  for (const auto& group : groups) {
    if (&group != odd) others.push_back(group);
  }
  std::vector<int> odd_ranks(odd->ranks().begin(), odd->ranks().end());
  const bool one = odd->ranks_size() == 1;
  std::string who = one ? "rank " + std::to_string(rank) + " on " + verdict.root_cause.host()
                        : "ranks " + RankList(odd_ranks);
  if (odd->behind()) {
    who += (one ? " is" : " are") + std::string(" behind the others, at ") + GroupPlace(*odd) +
           " " + std::string(kLookHereFirst);
  } else {
    who += (one ? " is the odd one out" : " are the odd ones out") + std::string(", in ") +
           odd->where();
  }
  verdict.message =
      who + (others.empty() ? "" : "; " + DescribeGroups(others)) + "; noticed when " + noticed;
  return verdict;
}

std::string WhereEveryRankWas(const std::vector<v1::StackGroup>& groups) {
  if (groups.empty()) return "";
  std::string out = "  where every rank was (each rank's stack is at the end of its log):\n";
  for (const auto& group : groups) {
    out += "    ";
    out += group.ranks_size() == 1 ? "rank " : "ranks ";
    for (int i = 0; i < group.ranks_size(); ++i) {
      out += (i ? "," : "") + std::to_string(group.ranks(i));
    }
    out += ": ";
    out += group.where().empty()     ? "not sampled"
           : group.has_collectives() ? GroupPlace(group)
                                     : group.where();
    if (group.odd_one_out()) out += "   " + std::string(kLookHereFirst);
    out += "\n";
  }
  return out;
}

}  // namespace gangrun::scheduler
