#include "node/progress.h"

#include <algorithm>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace gangrun::node {

bool IsSectionName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxSectionName) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
           c == ':' || c == '/';
  });
}

absl::StatusOr<ProgressDatagram> ParseProgress(absl::string_view datagram) {
  if (datagram.size() > kMaxProgressDatagram) {
    return absl::InvalidArgumentError("longer than " + std::to_string(kMaxProgressDatagram) +
                                      " bytes");
  }
  std::vector<absl::string_view> words = absl::StrSplit(
      absl::StripAsciiWhitespace(absl::string_view(datagram.data(), datagram.size())), ' ',
      absl::SkipEmpty());
  if (words.empty()) return absl::InvalidArgumentError("empty");
  ProgressDatagram parsed;
  if (words.size() == 1 && words[0] == "hook") {
    parsed.kind = ProgressDatagram::Kind::kHello;
    return parsed;
  }
  if (words[0] == "hook") {
    int inside = 0;
    if (words.size() != 5 || !absl::SimpleAtoi(words[1], &parsed.collectives) ||
        !absl::SimpleAtoi(words[2], &parsed.step) || parsed.collectives < 0 || parsed.step < 0 ||
        !IsSectionName(words[3]) || !absl::SimpleAtoi(words[4], &inside) || inside < 0 ||
        inside > 1) {
      return absl::InvalidArgumentError("expected 'hook COLLECTIVES STEPS OP 0|1'");
    }
    parsed.kind = ProgressDatagram::Kind::kHook;
    parsed.name = std::string(words[3]);
    parsed.inside = inside == 1;
    return parsed;
  }
  if (words[0] == "step" || words[0] == "checkpoint") {
    if (words.size() > 2) {
      return absl::InvalidArgumentError("expected '" + std::string(words[0]) + " [N]'");
    }
    if (words.size() == 2 && (!absl::SimpleAtoi(words[1], &parsed.step) || parsed.step < 0)) {
      return absl::InvalidArgumentError("step number must be an integer >= 0");
    }
    if (words[0] == "checkpoint") parsed.kind = ProgressDatagram::Kind::kCheckpoint;
    return parsed;
  }
  if (words[0] != "begin" && words[0] != "end") {
    return absl::InvalidArgumentError(
        "expected 'step [N]', 'checkpoint [N]', 'begin NAME' or 'end NAME'");
  }
  if (words.size() != 2 || !IsSectionName(words[1])) {
    return absl::InvalidArgumentError(
        "a section name is 1 to 64 letters, digits or _ - . : / characters");
  }
  parsed.kind = words[0] == "begin" ? ProgressDatagram::Kind::kBegin : ProgressDatagram::Kind::kEnd;
  parsed.name = std::string(words[1]);
  return parsed;
}

bool ProgressTracker::Enabled() const {
  return rules_.hang_timeout_seconds() > 0 || rules_.learn() ||
         rules_.initial_timeout_seconds() > 0 || !rules_.section_timeout_seconds().empty();
}

void ProgressTracker::AddRank(int rank, common::TimePoint at) {
  Rank& r = ranks_[rank];
  r = Rank();
  r.started = at;
  r.last_report = at;
}

void ProgressTracker::RemoveRank(int rank) { ranks_.erase(rank); }

bool ProgressTracker::OnDatagram(int rank, absl::string_view datagram, common::TimePoint now) {
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return false;
  Rank& r = it->second;
  auto parsed = ParseProgress(datagram);
  if (!parsed.ok()) {
    ++r.rejected;
    r.changed = true;
    return false;
  }
  if (parsed->kind == ProgressDatagram::Kind::kHello) {
    r.hooked = true;  // not a report: the script has done nothing yet
    return true;
  }
  if (parsed->kind == ProgressDatagram::Kind::kHook && parsed->collectives == 0 &&
      parsed->step == 0) {
    // The hook's first counts, sent once torch.distributed is imported: not a report either
    // (the rank may wait in its rendezvous for as long as the slowest host takes to start).
    r.hooked = true;
    r.hook.collectives = 0;
    r.hook.last_op = parsed->name;
    return true;
  }
  if (r.reports > 0 && r.sections.empty()) {
    r.longest_interval = std::max(r.longest_interval, now - r.last_report);
    ++r.intervals;
  }
  ++r.reports;
  r.last_report = now;
  r.changed = true;
  switch (parsed->kind) {
    case ProgressDatagram::Kind::kStep:
      if (!r.explicit_steps) {
        r.explicit_steps = true;  // from now on the script's own steps are the step
        r.step = -1;
        r.recent_steps.clear();
      }
      // A bare `step` counts on, saturating: never past INT64_MAX into negative steps.
      NoteStep(r,
               parsed->step >= 0                               ? parsed->step
               : r.step == std::numeric_limits<int64_t>::max() ? r.step
                                                               : r.step + 1,
               now);
      break;
    case ProgressDatagram::Kind::kHook:
      OnHook(r, *parsed, now);
      break;
    case ProgressDatagram::Kind::kHello:
      break;  // handled above
    case ProgressDatagram::Kind::kCheckpoint:
      r.checkpoint = parsed->step >= 0 ? parsed->step : std::max<int64_t>(r.step, 0);
      r.checkpoint_at = now;
      break;
    case ProgressDatagram::Kind::kBegin:
      if (r.sections.size() == kMaxSectionDepth) r.sections.erase(r.sections.begin());
      r.sections.push_back(parsed->name);
      break;
    case ProgressDatagram::Kind::kEnd: {
      auto open = std::find(r.sections.rbegin(), r.sections.rend(), parsed->name);
      if (open != r.sections.rend()) r.sections.erase(std::prev(open.base()), r.sections.end());
      break;
    }
  }
  return true;
}

void ProgressTracker::NoteStep(Rank& r, int64_t step, common::TimePoint now) {
  r.step = step;
  r.recent_steps.emplace_back(r.step, now);
  if (r.recent_steps.size() > kStepWindow) r.recent_steps.pop_front();
}

// The hook's step: optimizer steps once there are any (the window restarts when they take
// over from collectives), else collectives; only when it changed.
void ProgressTracker::OnHook(Rank& r, const ProgressDatagram& hook, common::TimePoint now) {
  r.hook.collectives = hook.collectives;
  r.hook.last_op = hook.name;
  r.hook.inside = hook.inside;
  if (r.explicit_steps) return;
  if (hook.step > 0 && r.optimizer_steps == 0) r.recent_steps.clear();
  r.optimizer_steps = hook.step;
  const int64_t step = hook.step > 0 ? hook.step : hook.collectives;
  if (step != r.step) NoteStep(r, step, now);
}

HookCounts ProgressTracker::HookOf(int rank) const {
  auto it = ranks_.find(rank);
  return it == ranks_.end() ? HookCounts{} : it->second.hook;
}

std::optional<common::Duration> ProgressTracker::SilenceHint(const Rank& r) const {
  std::optional<common::Duration> wait;
  if (rules_.hang_timeout_seconds() > 0) wait = common::DurationOf(rules_.hang_timeout_seconds());
  if (rules_.learn()) wait = common::Duration(kLearnFloor);
  if (wait && r.hooked) wait = std::max(*wait, common::Duration(kHookedSilence));
  return wait;
}

std::vector<int> ProgressTracker::TakeSilentRanks(common::TimePoint now) {
  std::vector<int> silent;
  for (auto& [rank, r] : ranks_) {
    if (r.reports > 0 || r.silence_said) continue;
    const std::optional<common::Duration> wait = SilenceHint(r);
    if (!wait || now - r.started < *wait) continue;
    r.silence_said = true;
    silent.push_back(rank);
  }
  return silent;
}

std::optional<ProgressTracker::Bound> ProgressTracker::BoundOf(const Rank& r) const {
  const auto& sections = rules_.section_timeout_seconds();
  for (auto it = r.sections.rbegin(); it != r.sections.rend(); ++it) {
    auto bound = sections.find(*it);
    if (bound != sections.end() && bound->second > 0) {
      return Bound{common::DurationOf(bound->second), r.last_report, "section", *it};
    }
  }
  const double initial = rules_.initial_timeout_seconds();
  if (r.reports == 0) {
    if (initial > 0) return Bound{common::DurationOf(initial), r.started, "initial", ""};
    return std::nullopt;
  }
  if (rules_.learn()) {
    if (r.intervals >= kLearnIntervals) {
      const auto learned = common::DurationOf(common::SecondsOf(r.longest_interval) * kLearnFactor);
      return Bound{std::max(learned, common::Duration(kLearnFloor)), r.last_report, "learned", ""};
    }
    // Until learned, the initial bound since the last report; not for a rank the hook
    // reports for (its datagrams come often enough to learn from soon).
    if (initial > 0 && r.hook.collectives < 0) {
      return Bound{common::DurationOf(initial), r.last_report, "initial", ""};
    }
    return std::nullopt;
  }
  if (rules_.hang_timeout_seconds() > 0) {
    return Bound{common::DurationOf(rules_.hang_timeout_seconds()), r.last_report, "steady", ""};
  }
  return std::nullopt;
}

std::vector<v1::RankHung> ProgressTracker::CheckHangs(common::TimePoint now) {
  std::vector<v1::RankHung> hung;
  for (auto& [rank, r] : ranks_) {
    if (r.hung) continue;
    auto bound = BoundOf(r);
    if (!bound || now - bound->since < bound->bound) continue;
    r.hung = true;
    v1::RankHung event;
    event.set_rank(rank);
    event.set_silent_seconds(common::SecondsOf(now - bound->since));
    event.set_bound_seconds(common::SecondsOf(bound->bound));
    event.set_rule(bound->rule);
    event.set_section(bound->section);
    event.set_step(r.step);
    hung.push_back(std::move(event));
  }
  return hung;
}

std::optional<common::TimePoint> ProgressTracker::NextDeadline() const {
  std::optional<common::TimePoint> next;
  for (const auto& [rank, r] : ranks_) {
    if (r.hung) continue;
    auto bound = BoundOf(r);
    if (!bound) continue;
    const common::TimePoint due = bound->since + bound->bound;
    if (!next || due < *next) next = due;
  }
  return next;
}

std::optional<common::TimePoint> ProgressTracker::NextSilentRank() const {
  std::optional<common::TimePoint> next;
  for (const auto& [rank, r] : ranks_) {
    if (r.reports > 0 || r.silence_said) continue;
    const std::optional<common::Duration> wait = SilenceHint(r);
    if (wait && (!next || r.started + *wait < *next)) next = r.started + *wait;
  }
  return next;
}

double ProgressTracker::StepSeconds(const Rank& r) const {
  if (r.recent_steps.size() < 2) return 0;
  const auto& [first_step, first_at] = r.recent_steps.front();
  const auto& [last_step, last_at] = r.recent_steps.back();
  if (last_step <= first_step) return 0;
  return common::SecondsOf(last_at - first_at) / static_cast<double>(last_step - first_step);
}

std::vector<v1::RankProgress> ProgressTracker::TakeChanges(common::TimePoint now) {
  std::vector<v1::RankProgress> changes;
  for (auto& [rank, r] : ranks_) {
    if (!r.changed) continue;
    r.changed = false;
    v1::RankProgress progress;
    progress.set_rank(rank);
    progress.set_step(r.step);
    progress.set_reports(r.reports);
    progress.set_rejected(r.rejected);
    progress.set_age_seconds(r.reports > 0 ? common::SecondsOf(now - r.last_report) : 0);
    progress.set_step_seconds(StepSeconds(r));
    if (r.checkpoint >= 0) {
      progress.set_checkpoint(r.checkpoint);
      progress.set_checkpoint_age_seconds(common::SecondsOf(now - r.checkpoint_at));
    }
    if (!r.sections.empty()) progress.set_section(r.sections.back());
    if (r.hook.collectives >= 0) {
      progress.set_collectives(r.hook.collectives);
      progress.set_last_op(r.hook.last_op);
    }
    progress.set_optimizer_steps(r.optimizer_steps);
    changes.push_back(std::move(progress));
  }
  return changes;
}

}  // namespace gangrun::node
