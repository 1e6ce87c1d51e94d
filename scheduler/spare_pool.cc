// Spares and holes (scheduler/spare_pool.h).

#include "scheduler/spare_pool.h"

#include <algorithm>

namespace gangrun::scheduler {

void SparePool::Admit(int node_id, int workers, std::string domain) {
  if (spares_.emplace(node_id, Spare{workers, std::move(domain)}).second) ++admitted_;
}

std::vector<int> SparePool::ids() const {
  std::vector<int> ids;
  ids.reserve(spares_.size());
  for (const auto& [id, spare] : spares_) ids.push_back(id);
  return ids;
}

std::optional<int> SparePool::For(int workers, const std::string& domain) const {
  std::optional<int> first;
  for (const auto& [id, spare] : spares_) {
    if (spare.workers != workers) continue;
    if (!domain.empty() && spare.domain == domain) return id;
    if (!first) first = id;
  }
  return first;
}

std::optional<common::TimePoint> SparePool::NextHeld(common::TimePoint now) const {
  std::optional<common::TimePoint> next;
  for (const Hole& hole : holes_) {
    if (hole.held_until && *hole.held_until > now)
      next = std::min(next.value_or(*hole.held_until), *hole.held_until);
  }
  return next;
}

bool SparePool::Fill(const std::function<bool(const Hole&)>& take) {
  bool filled = false;
  for (auto it = holes_.begin(); it != holes_.end();) {
    if (take(*it)) {
      filled = true;
      it = holes_.erase(it);
    } else {
      ++it;
    }
  }
  return filled;
}

}  // namespace gangrun::scheduler
