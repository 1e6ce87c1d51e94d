#pragma once
// `gangrun stacks`, the scheduler's half: a component of the scheduler
// (scheduler/node_directory.h) that owns the one request being answered. Every rank's stack
// of the running generation (or of the ranks asked for), captured by the nodes as at a hang
// but without stopping anything or writing to the logs, grouped as a hang report groups them;
// the job goes on untouched. On the scheduler's strand.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "gangrun/v1/progress.pb.h"
#include "scheduler/node_directory.h"

namespace gangrun::scheduler {

class StacksRequests {
 public:
  // Stacks themselves are sent for at most this many ranks; past that only where each rank is.
  static constexpr int kMaxStackTexts = 64;
  using Done = std::function<void(absl::StatusOr<v1::StacksResponse>)>;

  // `default_timeout_seconds`: how long nodes capture when a request does not say.
  StacksRequests(NodeDirectory& nodes, common::Clock& clock, double default_timeout_seconds)
      : nodes_(nodes), clock_(clock), default_timeout_seconds_(default_timeout_seconds) {}
  // A request being answered is answered Unavailable ("the job's scheduler has ended").
  ~StacksRequests();
  StacksRequests(const StacksRequests&) = delete;
  StacksRequests& operator=(const StacksRequests&) = delete;

  // One request at a time, of a running generation; `done` is called once (with an error when
  // the request cannot be answered), on the strand.
  void Request(const v1::StacksRequest& request, Done done);
  // The core's routing: a node's answer to a request of this component (captured.request()
  // is not 0). Answers to a request that was answered already (its time ran out) are dropped.
  void OnCaptured(int node_id, const v1::StacksCaptured& captured);

 private:
  struct Pending {
    uint64_t id = 0;
    std::set<int> waiting;  // node ids
    std::vector<v1::RankStack> stacks;
    bool texts_left_out = false;
    std::unique_ptr<common::Timer> timer;
    Done done;
  };
  // Whatever arrived in time; a node that did not answer has its ranks missing, named.
  void Finish();

  NodeDirectory& nodes_;
  common::Clock& clock_;
  double default_timeout_seconds_;
  std::optional<Pending> pending_;
  uint64_t requests_ = 0;  // requests ever made: the next id
};

}  // namespace gangrun::scheduler
