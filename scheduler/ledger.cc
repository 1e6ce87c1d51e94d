// Where a job's wall time went (scheduler/ledger.h).

#include "scheduler/ledger.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"

namespace gangrun::scheduler {

using common::SecondsOf;

namespace {

// "3.2 s", "47 s", "1 m 9 s", "2 h 5 m".
std::string Spoken(double seconds) {
  char text[32];
  if (seconds < 1) {  // a job over in a blink: "40 ms", not "0.0 s"
    std::snprintf(text, sizeof(text), "%.0f ms", seconds * 1000);
    return text;
  }
  if (seconds < 10) {
    std::snprintf(text, sizeof(text), "%.1f s", seconds);
    return text;
  }
  const auto whole = static_cast<int64_t>(seconds + 0.5);
  if (whole < 60) return std::to_string(whole) + " s";
  if (whole < 3600) return std::to_string(whole / 60) + " m " + std::to_string(whole % 60) + " s";
  return std::to_string(whole / 3600) + " h " + std::to_string(whole % 3600 / 60) + " m";
}

}  // namespace

nlohmann::json LedgerJson(const v1::Ledger& ledger) {
  return {
      {"wall_seconds", ledger.wall_seconds()},
      {"ettr", ledger.ettr()},
      {"lost_work_seconds", ledger.lost_work_seconds()},
      {"checkpoint_step", ledger.checkpoint_step()},
      {"replacement_wait_seconds", ledger.replacement_wait_seconds()},
      {"silent_losses", ledger.silent_losses()},
      {"silent_loss_seconds", ledger.silent_loss_seconds()},
      {"what_if", ledger.what_if()},
      {"seconds", std::map<std::string, double>(ledger.seconds().begin(), ledger.seconds().end())}};
}

v1::Ledger LedgerFromJson(const nlohmann::json& json) {
  v1::Ledger ledger;
  auto number = [](const nlohmann::json& value) {
    return value.is_number() ? std::max(0.0, value.get<double>()) : 0.0;
  };
  if (!json.is_object()) return ledger;
  if (auto wall = json.find("wall_seconds"); wall != json.end()) {
    ledger.set_wall_seconds(number(*wall));
  }
  if (auto ettr = json.find("ettr"); ettr != json.end()) {
    ledger.set_ettr(std::min(1.0, number(*ettr)));
  }
  if (auto lost = json.find("lost_work_seconds"); lost != json.end()) {
    ledger.set_lost_work_seconds(number(*lost));
  }
  if (auto wait = json.find("replacement_wait_seconds"); wait != json.end()) {
    ledger.set_replacement_wait_seconds(number(*wait));
  }
  if (auto losses = json.find("silent_losses");
      losses != json.end() && losses->is_number_integer()) {
    ledger.set_silent_losses(static_cast<int32_t>(
        std::clamp<int64_t>(losses->get<int64_t>(), 0, std::numeric_limits<int32_t>::max())));
  }
  if (auto silence = json.find("silent_loss_seconds"); silence != json.end()) {
    ledger.set_silent_loss_seconds(number(*silence));
  }
  if (auto what_if = json.find("what_if"); what_if != json.end() && what_if->is_string()) {
    ledger.set_what_if(what_if->get<std::string>().substr(0, 1024));
  }
  ledger.set_checkpoint_step(-1);
  if (auto step = json.find("checkpoint_step"); step != json.end() && step->is_number_integer()) {
    ledger.set_checkpoint_step(std::max<int64_t>(-1, step->get<int64_t>()));
  }
  auto seconds = json.find("seconds");
  if (seconds == json.end() || !seconds->is_object()) return ledger;
  for (size_t i = 0; i < static_cast<size_t>(LedgerPhase::kCount); ++i) {
    const std::string name(LedgerPhaseName(static_cast<LedgerPhase>(i)));
    if (auto value = seconds->find(name); value != seconds->end() && number(*value) > 0) {
      (*ledger.mutable_seconds())[name] = number(*value);
    }
  }
  return ledger;
}

std::string DescribeLedger(const v1::Ledger& ledger) {
  const auto training = ledger.seconds().find("training");
  std::string text = Spoken(ledger.wall_seconds()) + " in all, ETTR " +
                     std::to_string(static_cast<int>(ledger.ettr() * 100 + 0.5)) + "% (training " +
                     Spoken(training == ledger.seconds().end() ? 0 : training->second) + ")";
  std::vector<std::pair<double, std::string>> losses;
  for (const auto& [phase, seconds] : ledger.seconds()) {
    if (phase == "training" || seconds < 0.05) continue;
    std::string name = phase;  // "health_checks" is said "health checks"
    std::replace(name.begin(), name.end(), '_', ' ');
    losses.emplace_back(seconds, name);
  }
  if (ledger.lost_work_seconds() >= 0.05) {
    losses.emplace_back(ledger.lost_work_seconds(), "training redone after restarts");
  }
  std::sort(losses.rbegin(), losses.rend());
  for (size_t i = 0; i < losses.size() && i < 3; ++i) {
    text += (i == 0 ? "; the largest losses: " : ", ") + losses[i].second + " " +
            Spoken(losses[i].first);
  }
  if (ledger.checkpoint_step() >= 0) {
    text += "; last checkpoint: step " + std::to_string(ledger.checkpoint_step());
  }
  return text;
}

std::string WhatIf(const v1::Ledger& ledger, const WhatIfSettings& settings) {
  std::vector<std::string> saved;
  if (settings.spare_nodes == 0 && ledger.replacement_wait_seconds() >= kWhatIfFloorSeconds) {
    saved.push_back("a hot spare (--spare_nodes 1) would have saved about " +
                    Spoken(ledger.replacement_wait_seconds()) +
                    " of reforming: the wait for a node to take a lost one's place");
  }
  const double longest = SecondsOf(settings.longest_silence);
  const double tighter = std::max(
      {1.0, std::ceil(3 * SecondsOf(settings.heartbeat_interval)), std::ceil(2 * longest)});
  const double cut = ledger.silent_loss_seconds() - ledger.silent_losses() * tighter;
  if (ledger.silent_losses() > 0 && tighter < SecondsOf(settings.node_timeout) &&
      cut >= kWhatIfFloorSeconds) {
    char silent[32];
    std::snprintf(silent, sizeof(silent), "%.1f", longest);
    saved.push_back("a node timeout of " + std::to_string(static_cast<int64_t>(tighter)) +
                    " s (--node_timeout; no node that stayed was silent for more than " + silent +
                    " s) would have saved about " + Spoken(cut) + " of detecting: " +
                    std::to_string(ledger.silent_losses()) + " node(s) lost to silence");
  }
  return absl::StrJoin(saved, "; ");
}

Ledger::Ledger(common::Clock& clock, std::optional<common::TimePoint> queued_since)
    : clock_(clock), since_(clock.Now()), entered_(since_), opened_(since_) {
  if (!queued_since || *queued_since >= since_) return;
  opened_ = *queued_since;
  Of(job_, LedgerPhase::kQueued) = since_ - *queued_since;
  Of(generations_[0], LedgerPhase::kQueued) = since_ - *queued_since;
}

std::string_view LedgerPhaseName(LedgerPhase phase) {
  switch (phase) {
    case LedgerPhase::kQueued:
      return "queued";
    case LedgerPhase::kForming:
      return "forming";
    case LedgerPhase::kStarting:
      return "starting";
    case LedgerPhase::kTraining:
      return "training";
    case LedgerPhase::kStalled:
      return "stalled";
    case LedgerPhase::kDetecting:
      return "detecting";
    case LedgerPhase::kStopping:
      return "stopping";
    case LedgerPhase::kBackoff:
      return "backoff";
    case LedgerPhase::kHealthChecks:
      return "health_checks";
    case LedgerPhase::kReforming:
      return "reforming";
    case LedgerPhase::kCount:
      break;
  }
  return "unknown";
}

void Ledger::Accumulate(common::TimePoint now) {
  if (closed_ || now <= since_) return;
  if (awaiting_) replacement_wait_ += now - since_;
  Of(job_, phase_) += now - since_;
  Of(generations_[generation_], phase_) += now - since_;
  since_ = now;
}

void Ledger::Open() {
  if (!on_change_) return;
  const common::Duration queued = Of(job_, LedgerPhase::kQueued);
  on_change_({0, queued > common::Duration::zero() ? LedgerPhase::kQueued : phase_, phase_, queued,
              false});
}

void Ledger::Become(LedgerPhase to) {
  if (to == phase_) return;
  const Change change{generation_, phase_, to, clock_.Now() - entered_, false};
  phase_ = to;
  entered_ = clock_.Now();
  if (on_change_) on_change_(change);
}

void Ledger::Move(PhaseTimes& times, uint64_t generation, LedgerPhase from, LedgerPhase to,
                  common::Duration span) {
  if (span <= common::Duration::zero()) return;
  Of(times, from) -= span;
  Of(job_, from) -= span;
  Of(times, to) += span;
  Of(job_, to) += span;
  if (on_change_) on_change_({generation, from, to, span, true});
}

void Ledger::OnState(JobState to) {
  if (closed_) return;
  Accumulate(clock_.Now());  // what came before is the old phase's (and wait's)
  awaiting_ = to == JobState::kAwaitingReplacement;
  switch (to) {
    case JobState::kForming:
      return Become(generation_ == 0 ? LedgerPhase::kForming : LedgerPhase::kReforming);
    case JobState::kAwaitingReplacement:
      return Become(LedgerPhase::kReforming);
    case JobState::kRunning:
      return Become(LedgerPhase::kTraining);
    case JobState::kCapturing:
      return Become(LedgerPhase::kDetecting);
    case JobState::kStopping:
      return Become(LedgerPhase::kStopping);
    case JobState::kBackingOff:
      return Become(LedgerPhase::kBackoff);
    case JobState::kFinished:
      closed_ = clock_.Now();
      return;
  }
}

void Ledger::OnSilentLoss(common::Duration silence) {
  if (closed_ || silence <= common::Duration::zero()) return;
  ++silent_losses_;
  silent_loss_ += silence;
  Reclassify(LedgerPhase::kDetecting, silence);
}

void Ledger::OnHealthChecks(bool waiting) {
  if (closed_) return;
  const LedgerPhase from = waiting ? LedgerPhase::kReforming : LedgerPhase::kHealthChecks;
  if (phase_ != from) return;
  Accumulate(clock_.Now());
  Become(waiting ? LedgerPhase::kHealthChecks : LedgerPhase::kReforming);
}

void Ledger::OnGenerationStarted(uint64_t generation, int world, bool adopted) {
  if (closed_) return;
  Accumulate(clock_.Now());  // what came before is the last generation's
  if (!adopted && generation_ > 0 && generation != generation_) {
    Settle(generation_);
    // The new generation starts from the last checkpoint: what the last one trained after its
    // own last checkpoint (all of it, without one) is done again.
    Redone& last = redone_[generation_];
    const common::Duration trained = Of(generations_[generation_], LedgerPhase::kTraining);
    last.lost = std::max(common::Duration::zero(), trained - last.training_at_checkpoint);
    lost_ += last.lost;
  }
  generation_ = generation;
  generations_[generation_];
  redone_[generation_];
  while (generations_.size() > kGenerationsKept) generations_.erase(generations_.begin());
  while (redone_.size() > kGenerationsKept) redone_.erase(redone_.begin());
  world_ = world;
  reporting_ = 0;
  redone_[generation_].started = adopted;
  running_since_ = clock_.Now();
}

void Ledger::Settle(uint64_t generation) {
  auto redone = redone_.find(generation);
  if (!reports_ || redone == redone_.end() || redone->second.started || redone->second.settled) {
    return;
  }
  redone->second.settled = true;
  PhaseTimes& times = generations_[generation];
  Move(times, generation, LedgerPhase::kTraining, LedgerPhase::kStarting,
       Of(times, LedgerPhase::kTraining));
  lost_ -= redone->second.lost;
  redone->second.lost = common::Duration::zero();
}

void Ledger::OnFirstReport() {
  Redone& current = redone_[generation_];
  if (closed_ || current.started || ++reporting_ < world_) return;
  current.started = true;
  if (!std::exchange(reports_, true)) {
    for (const auto& [generation, redone] : redone_) {
      if (generation != generation_) Settle(generation);
    }
  }
  if (phase_ != LedgerPhase::kTraining) return;
  Accumulate(clock_.Now());
  // Until now the generation was starting, not training.
  PhaseTimes& generation = generations_[generation_];
  Move(generation, generation_, LedgerPhase::kTraining, LedgerPhase::kStarting,
       std::min(clock_.Now() - running_since_, Of(generation, LedgerPhase::kTraining)));
}

void Ledger::OnCheckpoint(int64_t step, common::Duration age) {
  if (closed_ || generation_ == 0) return;
  Redone& redone = redone_[generation_];
  if (step <= redone.checkpoint_step) return;
  Accumulate(clock_.Now());
  redone.checkpoint_step = step;
  checkpoint_step_ = std::max(checkpoint_step_, step);
  // The training counted since it was saved is after it (the node tells of it a heartbeat
  // late at most).
  const common::Duration trained = Of(generations_[generation_], LedgerPhase::kTraining);
  const common::Duration since = phase_ == LedgerPhase::kTraining
                                     ? std::clamp(age, common::Duration::zero(), trained)
                                     : common::Duration::zero();
  redone.training_at_checkpoint = trained - since;
}

void Ledger::Reclassify(LedgerPhase to, common::Duration span) {
  if (closed_ || span <= common::Duration::zero()) return;
  Accumulate(clock_.Now());
  PhaseTimes& generation = generations_[generation_];
  // Out of the current generation's training first, then its starting.
  for (LedgerPhase from : {LedgerPhase::kTraining, LedgerPhase::kStarting}) {
    const common::Duration moved = std::min(span, Of(generation, from));
    Move(generation, generation_, from, to, moved);
    span -= moved;
  }
}

v1::Ledger Ledger::ToProto() const {
  const common::TimePoint now = closed_.value_or(clock_.Now());
  PhaseTimes job = job_;
  std::map<uint64_t, PhaseTimes> generations = generations_;
  if (!closed_ && now > since_) {
    job[static_cast<size_t>(phase_)] += now - since_;
    generations[generation_][static_cast<size_t>(phase_)] += now - since_;
  }
  v1::Ledger ledger;
  const double wall = SecondsOf(now - opened_);
  ledger.set_wall_seconds(wall);
  ledger.set_phase(std::string(LedgerPhaseName(phase_)));
  for (size_t i = 0; i < job.size(); ++i) {
    const std::string name(LedgerPhaseName(static_cast<LedgerPhase>(i)));
    if (job[i] > common::Duration::zero()) (*ledger.mutable_seconds())[name] = SecondsOf(job[i]);
  }
  const double training = SecondsOf(job[static_cast<size_t>(LedgerPhase::kTraining)]);
  const double lost = std::min(training, SecondsOf(lost_));
  ledger.set_lost_work_seconds(lost);
  ledger.set_checkpoint_step(checkpoint_step_);
  common::Duration waited = replacement_wait_;
  if (!closed_ && awaiting_ && now > since_) waited += now - since_;
  ledger.set_replacement_wait_seconds(SecondsOf(waited));
  ledger.set_silent_losses(silent_losses_);
  ledger.set_silent_loss_seconds(SecondsOf(silent_loss_));
  ledger.set_ettr(wall > 0 ? (training - lost) / wall : 0);
  for (const auto& [number, seconds] : generations) {
    v1::GenerationLedger* generation = ledger.add_generations();
    generation->set_generation(number);
    if (auto redone = redone_.find(number); redone != redone_.end()) {
      generation->set_lost_work_seconds(SecondsOf(redone->second.lost));
      generation->set_checkpoint_step(redone->second.checkpoint_step);
    } else {
      generation->set_checkpoint_step(-1);
    }
    for (size_t i = 0; i < seconds.size(); ++i) {
      if (seconds[i] <= common::Duration::zero()) continue;
      (*generation->mutable_seconds())[std::string(LedgerPhaseName(static_cast<LedgerPhase>(i)))] =
          SecondsOf(seconds[i]);
    }
  }
  return ledger;
}

}  // namespace gangrun::scheduler
