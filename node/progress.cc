#include "node/progress.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace gangrun::node {
namespace {

using Seconds = std::chrono::duration<double>;

common::Duration FromSeconds(double seconds) {
  return std::chrono::duration_cast<common::Duration>(Seconds(seconds));
}

}  // namespace

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
  if (words[0] == "step") {
    if (words.size() > 2) return absl::InvalidArgumentError("expected 'step [N]'");
    if (words.size() == 2 && (!absl::SimpleAtoi(words[1], &parsed.step) || parsed.step < 0)) {
      return absl::InvalidArgumentError("step number must be an integer >= 0");
    }
    return parsed;
  }
  if (words[0] != "begin" && words[0] != "end") {
    return absl::InvalidArgumentError("expected 'step [N]', 'begin NAME' or 'end NAME'");
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

void ProgressTracker::CountRejected(int rank, uint64_t count) {
  auto it = ranks_.find(rank);
  if (it == ranks_.end() || count == 0) return;
  it->second.rejected += count;
  it->second.changed = true;
}

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
  if (r.reports > 0 && r.sections.empty()) {
    r.longest_interval = std::max(r.longest_interval, now - r.last_report);
    ++r.intervals;
  }
  ++r.reports;
  r.last_report = now;
  r.changed = true;
  switch (parsed->kind) {
    case ProgressDatagram::Kind::kStep:
      r.step = parsed->step >= 0 ? parsed->step : r.step + 1;
      r.recent_steps.emplace_back(r.step, now);
      if (r.recent_steps.size() > kStepWindow) r.recent_steps.pop_front();
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

std::optional<ProgressTracker::Bound> ProgressTracker::BoundOf(const Rank& r) const {
  const auto& sections = rules_.section_timeout_seconds();
  for (auto it = r.sections.rbegin(); it != r.sections.rend(); ++it) {
    auto bound = sections.find(*it);
    if (bound != sections.end() && bound->second > 0) {
      return Bound{FromSeconds(bound->second), r.last_report, "section", *it};
    }
  }
  const double initial = rules_.initial_timeout_seconds();
  if (r.reports == 0) {
    if (initial > 0) return Bound{FromSeconds(initial), r.started, "initial", ""};
    return std::nullopt;
  }
  if (rules_.learn()) {
    if (r.intervals >= kLearnIntervals) {
      const auto learned = std::chrono::duration_cast<common::Duration>(
          Seconds(Seconds(r.longest_interval).count() * kLearnFactor));
      return Bound{std::max(learned, common::Duration(kLearnFloor)), r.last_report, "learned", ""};
    }
    if (initial > 0) return Bound{FromSeconds(initial), r.last_report, "initial", ""};
    return std::nullopt;
  }
  if (rules_.hang_timeout_seconds() > 0) {
    return Bound{FromSeconds(rules_.hang_timeout_seconds()), r.last_report, "steady", ""};
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
    event.set_silent_seconds(Seconds(now - bound->since).count());
    event.set_bound_seconds(Seconds(bound->bound).count());
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

double ProgressTracker::StepSeconds(const Rank& r) const {
  if (r.recent_steps.size() < 2) return 0;
  const auto& [first_step, first_at] = r.recent_steps.front();
  const auto& [last_step, last_at] = r.recent_steps.back();
  if (last_step <= first_step) return 0;
  return Seconds(last_at - first_at).count() / static_cast<double>(last_step - first_step);
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
    progress.set_age_seconds(r.reports > 0 ? Seconds(now - r.last_report).count() : 0);
    progress.set_step_seconds(StepSeconds(r));
    if (!r.sections.empty()) progress.set_section(r.sections.back());
    changes.push_back(std::move(progress));
  }
  return changes;
}

}  // namespace gangrun::node
