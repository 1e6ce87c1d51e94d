#include "scheduler/formation.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gangrun::scheduler {

Formation::Formation(common::Clock& clock, common::Duration timeout, Callbacks callbacks)
    : clock_(clock),
      timeout_(timeout),
      callbacks_(std::move(callbacks)),
      reminder_(clock, [this](const std::string& left) { callbacks_.remind(left); }) {}

void Formation::Begin(common::TimePoint since) {
  timer_.reset();
  std::optional<common::TimePoint> deadline;
  if (timeout_ >= common::Duration::zero()) {
    deadline = since + timeout_;
    const common::Duration left = std::max(*deadline - clock_.Now(), common::Duration::zero());
    timer_ = clock_.After(left, [this] {
      timer_.reset();
      callbacks_.timed_out();
    });
  }
  reminder_.Stop();  // a new wait, with its own deadline
  reminder_.Start(deadline);
}

bool Formation::CallLast(common::Duration delay, std::function<void()> form) {
  if (last_call_) return false;
  last_call_ = clock_.After(delay, [this, form = std::move(form)] {
    last_call_.reset();  // a clock keeps a running callback, not its timer
    form();
  });
  return true;
}

void Formation::End() {
  timer_.reset();
  last_call_.reset();
  reminder_.Stop();
}

std::string Formation::Left() const { return reminder_.active() ? "; " + reminder_.Left() : ""; }

bool Formation::Refused(const std::string& host, const std::string& why) {
  const std::pair<std::string, std::string> key{host, why};
  auto it = refused_.find(key);
  if (it != refused_.end()) {
    ++it->second;
    return false;
  }
  if (refused_.size() >= kRefusedKept) return false;
  refused_.emplace(key, 1);
  return true;
}

std::string Formation::RefusedText() const {
  std::vector<std::string> parts;
  for (const auto& [key, count] : refused_) {
    parts.push_back(key.first + " (" + key.second +
                    (count > 1 ? ", " + std::to_string(count) + " times" : "") + ")");
  }
  return absl::StrJoin(parts, ", ");
}

std::string Formation::WaitingLine(const std::vector<NodeJoin>& joined, int world_size,
                                   const std::string& refused) {
  int workers = 0, count = 0;
  std::string names;
  // The node ranks still missing, when every node came with one and the same size (so that
  // the job's node count is known).
  std::set<int> ranks;
  bool ranked = true;
  int size = 0;
  for (const NodeJoin& node : joined) {
    workers += node.local_worker_num;
    ++count;
    if (count <= 8) names += (names.empty() ? "" : ", ") + node.node_name;
    ranks.insert(node.requested_rank);
    ranked = ranked && node.requested_rank >= 0 && (size == 0 || size == node.local_worker_num);
    size = node.local_worker_num;
  }
  if (workers >= world_size) return "";
  if (count > 8) names += ", ...";
  std::string missing;
  if (ranked && size > 0 && world_size % size == 0) {
    std::vector<std::string> absent;
    for (int rank = 0; rank < world_size / size; ++rank) {
      if (ranks.count(rank) == 0) absent.push_back(std::to_string(rank));
    }
    if (absent.size() > 8) absent.resize(8), absent.push_back("...");
    if (!absent.empty()) {
      missing =
          absl::StrCat("; node rank", absent.size() > 1 ? "s " : " ", absl::StrJoin(absent, ", "),
                       absent.size() > 1 ? " have" : " has", " not joined");
    }
  }
  return absl::StrCat("waiting for ", world_size - workers, " of ", world_size, " workers (", count,
                      " node(s) joined", names.empty() ? "" : ": ", names, missing,
                      refused.empty() ? "" : "; refused: " + refused, ")");
}

}  // namespace gangrun::scheduler
