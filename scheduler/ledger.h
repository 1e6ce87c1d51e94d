#pragma once
// Where a job's wall time went: a component of the scheduler that puts every second from the
// scheduler's start to the job's end in exactly one phase, per generation and in all, and
// gives the effective training time ratio (ETTR: training less lost work, over wall time; Meta's
// measure).
//
// Phases, as the core's course moves them (Enter's transitions, scheduler/job_state.h):
//   queued       a daemon's job: from its submission until it was placed (free slots, agents);
//                before the scheduler's start, so counted when it opens
//   forming      kForming before the first generation: waiting for nodes
//   starting     kRunning until every rank has reported progress once (imports,
//                init_process_group, checkpoint loading); counted when that happens, so a job
//                whose ranks never report progress has no starting time, only training
//   training     kRunning after that
//   stalled      the silence before a rank was judged hung, or before a rank failed beyond 3
//                of the job's usual steps (a collective's timeout); moved out of training
//   detecting    kCapturing (stacks of a hang), and the silence before a node was judged
//                lost (moved out of training)
//   stopping     kStopping: until every worker of the generation is gone
//   backoff      kBackingOff (the nodes' health checks run meanwhile)
//   health_checks  kForming after a generation, waiting for the health checks' answers
//                (OnHealthChecks): what of them outlasted the backoff
//   reforming    kForming after a generation, and kAwaitingReplacement
// Lost work is training, counted apart: when a generation follows a failed one, the failed
// one's training after its last checkpoint (OnCheckpoint; all of it without one) was done
// again.
//
// Example: formed in 2 s, ranks reported after 3 s, trained 40 s (a checkpoint at 20 s), a
// rank hung (judged after 10 s of silence), 1 s of capture, 1 s stopping, 1 s backoff, 1 s
// reforming, then 20 s more: forming 2, starting 3 + 3, training 30 + 17 (10 of generation 1's
// after its checkpoint lost), stalled 10, detecting 1, stopping 1, backoff 1, reforming 1; wall
// 69 s, ETTR (47 - 10) / 69 = 0.54.

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "gangrun/v1/session.pb.h"
#include "nlohmann/json.hpp"
#include "scheduler/job_state.h"

namespace gangrun::scheduler {

enum class LedgerPhase {
  kQueued,
  kForming,
  kStarting,
  kTraining,
  kStalled,
  kDetecting,
  kStopping,
  kBackoff,
  kHealthChecks,
  kReforming,
  kCount
};
std::string_view LedgerPhaseName(LedgerPhase phase);

// The ledger in one line, for the job's end and `gangrun status`: "1 m 9 s in all, ETTR 68%
// (training 47 s); the largest losses: stalled 10 s, starting 6 s, forming 2 s" (at most three,
// largest first; none under 0.05 s). Under 1 s in milliseconds, under 10 s with one decimal.
std::string DescribeLedger(const v1::Ledger& ledger);

// What the job's own record says another setting would have saved, at its end ("" = nothing
// worth saying, under kWhatIfFloorSeconds each), in one line:
//  - a hot spare, for a job without one that waited for a node to take a lost one's place: "a
//    hot spare (--spare_nodes 1) would have saved about 12 s of reforming: the wait for a node
//    to take a lost one's place" (a spare takes the place at once: bench/README.md, about
//    0.1 s at 1,000 nodes);
//  - a tighter node timeout, for a job that lost nodes to silence while it ran: the timeout
//    proposed is the larger of 3 heartbeat intervals and twice the longest silence of a node
//    that was not lost for it (Liveness::LongestSilence), in whole seconds, and at least 1 s;
//    each silent loss would have been found that much sooner: "a node timeout of 3 s
//    (--node_timeout; no node that stayed was silent for more than 0.9 s) would have saved
//    about 14 s of detecting: 2 node(s) lost to silence".
inline constexpr double kWhatIfFloorSeconds = 1.0;
struct WhatIfSettings {
  int spare_nodes = 0;
  common::Duration node_timeout{};
  common::Duration heartbeat_interval{};
  common::Duration longest_silence{};  // of a node that was not lost for it
};
std::string WhatIf(const v1::Ledger& ledger, const WhatIfSettings& settings);

// The ledger in the event log and the store's record: {"wall_seconds": 69, "ettr": 0.68,
// "seconds": {"training": 47, ...}}; and back, from a record gangrun may not have written (only
// the phases it knows, numbers only, nothing throws).
nlohmann::json LedgerJson(const v1::Ledger& ledger);
v1::Ledger LedgerFromJson(const nlohmann::json& json);

class Ledger {
 public:
  // Opens at `now` in forming; a job queued since `queued_since` (a daemon's, submitted then)
  // has that wait as its first phase, and its wall time counts from it.
  explicit Ledger(common::Clock& clock,
                  std::optional<common::TimePoint> queued_since = std::nullopt);

  // What the event log hears of the ledger: each change of the current phase, with how long the
  // one it leaves lasted (`moved` false); and time moved from one phase to another after the
  // fact (`moved` true: the last `seconds` of `from` were `to`'s): the start-up's end (training
  // to starting), a silence judged a stall or a loss (Reclassify), an earlier generation
  // settled. Called from within the verbs below, on the caller's thread.
  struct Change {
    uint64_t generation = 0;  // moved: the generation whose time moved
    LedgerPhase from = LedgerPhase::kForming;
    LedgerPhase to = LedgerPhase::kForming;
    common::Duration seconds{};
    bool moved = false;
  };
  void SetOnChange(std::function<void(const Change&)> on_change) {
    on_change_ = std::move(on_change);
  }
  // Tells the first phase (forming), and for a queued job how long it was queued.
  void Open();

  // The core entered `to`.
  void OnState(JobState to);
  // Generation `generation` of `world` ranks started (after OnState(kRunning)); an adopted one
  // was running already: it has no starting time.
  void OnGenerationStarted(uint64_t generation, int world, bool adopted);
  // A rank reported progress for the first time in this generation (each rank once). Once
  // every rank has, the job is known to report progress: its generations that ended before
  // all their ranks reported were starting all along (Settle).
  void OnFirstReport();
  // A rank of this generation saved a checkpoint holding `step`, `age` ago. Only a step beyond
  // the generation's last checkpoint counts. When the next generation starts (a restart or a
  // re-forming, not an adoption), this generation's training after its last checkpoint — all
  // of it without one — is lost work: its steps are done again.
  void OnCheckpoint(int64_t step, common::Duration age);
  // A node was lost to silence while a generation ran: `silence` (its last sign of life until
  // now) was detecting, not training (Reclassify), and is counted for the what-if.
  void OnSilentLoss(common::Duration silence);
  // Re-forming waits for the health checks' answers (true) or no more (false).
  void OnHealthChecks(bool waiting);
  // The last `span` of the current training (or starting) was not: it was silence before a
  // hang (kStalled) or before a lost node (kDetecting). At most what this generation trained.
  void Reclassify(LedgerPhase to, common::Duration span);

  LedgerPhase phase() const { return phase_; }
  // As of now (frozen once the job has finished).
  v1::Ledger ToProto() const;

 private:
  using PhaseTimes = std::array<common::Duration, static_cast<size_t>(LedgerPhase::kCount)>;
  // Adds the time since the last change to the current phase.
  void Accumulate(common::TimePoint now);
  // The current phase becomes `to` (after Accumulate), told to on_change_.
  void Become(LedgerPhase to);
  // `span` of `generation`'s `from` was `to`'s, told to on_change_.
  void Move(PhaseTimes& times, uint64_t generation, LedgerPhase from, LedgerPhase to,
            common::Duration span);
  common::Duration& Of(PhaseTimes& seconds, LedgerPhase phase) {
    return seconds[static_cast<size_t>(phase)];
  }

  common::Clock& clock_;
  LedgerPhase phase_ = LedgerPhase::kForming;
  std::function<void(const Change&)> on_change_;
  common::TimePoint since_;                  // when the current phase's uncounted time began
  common::TimePoint entered_;                // when the current phase began
  common::TimePoint opened_;                 // the scheduler's start, or the job's submission
  std::optional<common::TimePoint> closed_;  // the job's end
  PhaseTimes job_{};
  // By generation (0: before the first), the last kGenerationsKept (an elastic job may re-form
  // without end; the job's totals keep every second).
  static constexpr size_t kGenerationsKept = 64;
  std::map<uint64_t, PhaseTimes> generations_;
  // Of the generations kept: their lost work and last checkpoint's step.
  struct Redone {
    common::Duration lost{};
    int64_t checkpoint_step = -1;
    common::Duration training_at_checkpoint{};  // the generation's training when it was saved
    bool started = false;  // every rank reported (or it was adopted): it trained
    bool settled = false;  // Settle moved its running time to starting
  };
  // A generation that never started, of a job whose ranks report progress: it failed while
  // starting (imports, init_process_group, loading the checkpoint), so its running time was
  // starting, not training, and nothing of it is redone. No-op before any generation started.
  void Settle(uint64_t generation);
  std::map<uint64_t, Redone> redone_;
  common::Duration lost_{};  // the job's lost work, every generation's
  bool reports_ = false;     // some generation's ranks all reported: the job reports progress
  bool awaiting_ = false;    // kAwaitingReplacement: reforming waits for a node
  common::Duration replacement_wait_{};
  int silent_losses_ = 0;
  common::Duration silent_loss_{};
  int64_t checkpoint_step_ = -1;  // the job's last checkpoint
  uint64_t generation_ = 0;
  int world_ = 0;
  int reporting_ = 0;                // ranks of this generation that reported
  common::TimePoint running_since_;  // this generation's kRunning began
};

}  // namespace gangrun::scheduler
