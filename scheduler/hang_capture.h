#pragma once
// The hang capture: a component of the scheduler (scheduler/node_directory.h) that owns the
// capture of a hang. When a node judges a rank hung, the core (in kCapturing) has every running
// node capture its ranks' stacks; once all have answered, or the capture timeout passed, the
// capture gives the core its verdict (scheduler/hang_report.h writes it): where every rank was
// and where to look first. The core stops the generation as hung with it. On the scheduler's
// strand.

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gangrun/v1/progress.pb.h"
#include "scheduler/hang_report.h"
#include "scheduler/node_directory.h"

namespace gangrun::scheduler {

class HangCapture {
 public:
  using Done = std::function<void(HangVerdict verdict)>;

  // `stack_timeout_seconds`: how long each node captures (the job's --stack_timeout).
  HangCapture(NodeDirectory& nodes, common::Clock& clock, double stack_timeout_seconds, Done done)
      : nodes_(nodes),
        clock_(clock),
        stack_timeout_seconds_(stack_timeout_seconds),
        done_(std::move(done)) {}
  HangCapture(const HangCapture&) = delete;
  HangCapture& operator=(const HangCapture&) = delete;

  // A rank was judged hung (`noticed` says how, `root_cause` names it): every running node is
  // asked for its ranks' stacks. The verdict comes once, through `done` (at once when no node
  // runs), unless Cancel comes first.
  void Begin(std::string noticed, v1::RootCause root_cause);
  // The core's routing: a node's stacks for the hang (StacksCaptured.request 0).
  void OnCaptured(int node_id, const v1::StacksCaptured& captured);
  // The generation ends another way (a failure, a loss or a stop won): no verdict comes.
  void Cancel() { capture_.reset(); }
  bool active() const { return capture_.has_value(); }

 private:
  struct Capture {
    std::string noticed;
    v1::RootCause root_cause;
    std::set<int> waiting;  // node ids that have not answered
    std::vector<v1::RankStack> stacks;
    std::unique_ptr<common::Timer> timer;
  };
  void Finish();
  // Where the hang's NCCL flight recorder dumps were kept (node/flight_recorder.h).
  void SayFlightRecorderDumps(const std::vector<v1::RankStack>& stacks);

  NodeDirectory& nodes_;
  common::Clock& clock_;
  double stack_timeout_seconds_;
  Done done_;
  std::optional<Capture> capture_;
};

}  // namespace gangrun::scheduler
