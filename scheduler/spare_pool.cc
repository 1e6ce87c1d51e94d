// Spares and holes (scheduler/spare_pool.h).

#include "scheduler/spare_pool.h"

namespace gangrun::scheduler {

void SparePool::Admit(int node_id, int workers) {
  if (spares_.emplace(node_id, workers).second) ++admitted_;
}

std::vector<int> SparePool::ids() const {
  std::vector<int> ids;
  ids.reserve(spares_.size());
  for (const auto& [id, workers] : spares_) ids.push_back(id);
  return ids;
}

std::optional<int> SparePool::For(int workers) const {
  for (const auto& [id, spare_workers] : spares_) {
    if (spare_workers == workers) return id;
  }
  return std::nullopt;
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
