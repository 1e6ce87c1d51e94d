#include "scheduler/hang_report.h"

#include <algorithm>
#include <map>

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

std::vector<v1::StackGroup> GroupStacks(const std::vector<v1::RankStack>& stacks) {
  std::map<std::string, std::vector<int>> by_where;
  std::vector<int> unsampled;
  for (const auto& stack : stacks) {
    if (!stack.error().empty()) {
      unsampled.push_back(stack.rank());
    } else {
      by_where[stack.where().empty() ? "an unknown frame" : stack.where()].push_back(stack.rank());
    }
  }
  std::vector<v1::StackGroup> groups;
  size_t largest = 0, smallest = SIZE_MAX;
  for (auto& [where, ranks] : by_where) {
    std::sort(ranks.begin(), ranks.end());
    v1::StackGroup group;
    group.set_where(where);
    for (int rank : ranks) group.add_ranks(rank);
    largest = std::max(largest, ranks.size());
    smallest = std::min(smallest, ranks.size());
    groups.push_back(std::move(group));
  }
  if (groups.size() > 1 && smallest < largest) {
    for (auto& group : groups) {
      group.set_odd_one_out(static_cast<size_t>(group.ranks_size()) < largest);
    }
  }
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

std::string DescribeGroups(const std::vector<v1::StackGroup>& groups) {
  std::string text;
  size_t odd = 0;
  for (const auto& group : groups) odd += group.odd_one_out();
  for (const auto& group : groups) {
    if (!text.empty()) text += "; ";
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

}  // namespace gangrun::scheduler
