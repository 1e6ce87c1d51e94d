#pragma once
// What a node knows of its ranks' progress, and when it judges one hung.
//
// Workers report through GANGRUN_PROGRESS (a datagram socket per local rank, see
// node/progress_channel.h), one datagram per report:
//
//   step [N]      progress; N is the step number (without N: the step after the last one)
//   checkpoint [N] a checkpoint holding step N was saved (without N: the rank's current step):
//                 a restart redoes only the steps after it (the ledger's lost work). Sent by
//                 the hook after torch.save and torch.distributed.checkpoint's saves.
//   begin NAME    a named section opens (sections nest, at most kMaxSectionDepth deep)
//   end NAME      it closes (the innermost section of that name, and any opened inside it)
//   hook C S OP I the progress hook's counts (node/python/sitecustomize.py, no code in the
//                 script): C collectives issued, S optimizer steps, OP the last collective,
//                 I 1 while inside it. The rank's step is S once it is > 0, else C, unless
//                 the rank also sends `step` reports, which win.
//   hook          the hook is in the rank's process (sent when it starts; not a report)
//
// Every accepted datagram is a report: it proves the rank alive. A rank is hung when it has
// been silent for longer than the bound that applies to it, which is, in this order:
//   1. inside sections: the bound of the innermost open section that has one
//      (--section_timeout NAME=S);
//   2. before its first report: --hang_timeout_initial, counted from the rank's start;
//   3. after it: --hang_timeout, or with --hang_timeout auto the learned bound
//      max(kLearnFloor, kLearnFactor x the longest interval seen between two of its reports
//      outside sections), once kLearnIntervals such intervals were seen (until then the
//      initial bound, counted from the last report, unless the hook reports for the rank);
//   4. none of these set: never hung.
// The progress hook's datagrams are reports like the others: a rank whose script never
// reports is judged by the same rules once the hook has counted a collective or a step
// (its "hook 0 0 - 0", before the first collective, is not a report).
// A rank is judged hung once per generation.
//
// Worked example: --hang_timeout 60 --section_timeout checkpoint=600. Rank 3 reports
// "step 7" at t=0 and "begin checkpoint" at t=5: until it reports again it is hung at t=605,
// not at t=65. At t=300 it reports "end checkpoint": the steady bound applies again, hung at
// t=360 unless it reports.
//
// Runs on the node's strand (it has no locks); time comes from the caller.

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "gangrun/v1/progress.pb.h"

namespace gangrun::node {

inline constexpr size_t kMaxProgressDatagram = 256;
inline constexpr size_t kMaxSectionName = 64;
inline constexpr size_t kMaxSectionDepth = 16;
inline constexpr double kLearnFactor = 5.0;
inline constexpr common::Duration kLearnFloor = std::chrono::seconds(10);
inline constexpr int kLearnIntervals = 3;
// Steps over which "recent seconds per step" is measured.
inline constexpr size_t kStepWindow = 10;
inline constexpr common::Duration kHookedSilence = std::chrono::seconds(60);

struct ProgressDatagram {
  enum class Kind { kStep, kBegin, kEnd, kHook, kHello, kCheckpoint } kind = Kind::kStep;
  int64_t step = -1;        // kStep, kCheckpoint with a number; kHook: optimizer steps
  std::string name;         // kBegin, kEnd; kHook: the last collective
  int64_t collectives = 0;  // kHook
  bool inside = false;      // kHook
};

// What the progress hook last said of a rank (RankStack's fields).
struct HookCounts {
  int64_t collectives = -1;  // -1 = no hook report
  std::string last_op;
  bool inside = false;
};

// A section's name: 1 to kMaxSectionName letters, digits, _ - . : / (also what
// --section_timeout accepts).
bool IsSectionName(absl::string_view name);

// One datagram, e.g. "step 12", "begin checkpoint\n". InvalidArgument says what is wrong.
absl::StatusOr<ProgressDatagram> ParseProgress(absl::string_view datagram);

class ProgressTracker {
 public:
  explicit ProgressTracker(v1::ProgressRules rules) : rules_(std::move(rules)) {}

  // A rank of this generation started (was asked for) at `at`.
  void AddRank(int rank, common::TimePoint at);
  // A datagram from `rank`; false (counted as rejected) when malformed or unknown rank.
  bool OnDatagram(int rank, absl::string_view datagram, common::TimePoint now);
  // Ranks whose bound has passed at `now` and were not judged hung before.
  std::vector<v1::RankHung> CheckHangs(common::TimePoint now);
  // When the next rank would become hung if nobody reports (nullopt: none can).
  std::optional<common::TimePoint> NextDeadline() const;
  // The ranks whose progress changed since the last call, as of `now`.
  std::vector<v1::RankProgress> TakeChanges(common::TimePoint now);
  // Forgets a rank (it exited): it can no longer hang.
  void RemoveRank(int rank);
  HookCounts HookOf(int rank) const;
  // Ranks that have sent no report although a rule needs reports, once each (a hint that the
  // rule cannot fire): silent for as long as the steady bound since they started, or, when
  // the hook is in the process (it will report once the script uses torch.distributed),
  // for kHookedSilence at least.
  std::vector<int> TakeSilentRanks(common::TimePoint now);
  // When TakeSilentRanks would next name a rank (nullopt: none can).
  std::optional<common::TimePoint> NextSilentRank() const;

  const v1::ProgressRules& rules() const { return rules_; }
  bool Enabled() const;  // any bound is set

 private:
  struct Rank {
    common::TimePoint started;
    common::TimePoint last_report;
    uint64_t reports = 0;
    uint64_t rejected = 0;
    int64_t step = -1;
    std::vector<std::string> sections;  // open, outermost first
    std::deque<std::pair<int64_t, common::TimePoint>> recent_steps;
    common::Duration longest_interval{0};
    int intervals = 0;  // seen outside sections
    bool hung = false;
    bool changed = false;
    bool explicit_steps = false;  // a `step` report came: the hook's counts are not the step
    bool silence_said = false;
    bool hooked = false;  // the hook said it is there
    HookCounts hook;
    int64_t optimizer_steps = 0;
    int64_t checkpoint = -1;  // the step its last checkpoint holds (-1: none this generation)
    common::TimePoint checkpoint_at;
  };
  void OnHook(Rank& r, const ProgressDatagram& hook, common::TimePoint now);
  void NoteStep(Rank& r, int64_t step, common::TimePoint now);
  struct Bound {
    common::Duration bound;
    common::TimePoint since;
    const char* rule;
    std::string section;
  };
  std::optional<Bound> BoundOf(const Rank& rank) const;
  // How long a rank with no report at all is silent before TakeSilentRanks names it.
  std::optional<common::Duration> SilenceHint(const Rank& rank) const;
  double StepSeconds(const Rank& rank) const;

  v1::ProgressRules rules_;
  std::map<int, Rank> ranks_;
};

}  // namespace gangrun::node
