// Agents' standing across jobs (README "Agents' standing"; the record is
// daemon/agent_standing.h): the failures a job attributes to an agent, the quarantine and the
// operator's drain that keep jobs off it, and the probes that bring a quarantined agent back.
// Part of the Daemon actor (daemon.h): the same strand, the same state.

#include <algorithm>
#include <chrono>

#include "common/logging.h"
#include "daemon/daemon.h"

namespace gangrun::daemon {

using common::UnixNow;

void Daemon::BlameAgent(const std::string& agent, const std::string& job_id,
                        const std::string& why) {
  Job* job = FindJob(job_id);
  if (job == nullptr) return;
  // The name comes from a node's join, which anyone holding the job's token can send: only an
  // agent the job was placed on can be blamed (a job cannot quarantine another's agents).
  if (std::none_of(job->placed_on.begin(), job->placed_on.end(),
                   [&](const auto& placed) { return placed.first == agent; })) {
    common::Logger("daemon")->warn(
        "job {}: a failure put on agent '{}', where the job does not run, is ignored: {}", job_id,
        agent, why);
    return;
  }
  job->blamed.insert(agent);
  common::Logger("daemon")->warn("agent '{}': a failure in job {}: {}", agent, job_id, why);
  telemetry_.Record(Event::kAgentFailure, {{"name", agent}, {"job_id", job_id}, {"reason", why}});
  auto change = standings_.Blame(agent, job_id, why, UnixNow());
  SaveStanding(agent);
  if (change) OnStandingChanged(*change);
}

void Daemon::OnStandingChanged(const AgentStandings::Change& change) {
  const char* to = AgentStandings::Name(change.to);
  ++standing_changes_[to];
  if (change.to == AgentStandings::State::kOk) {
    common::Logger("daemon")->warn("agent '{}' is placed again ({} before): {}", change.agent,
                                   AgentStandings::Name(change.from), change.reason);
  } else {
    common::Logger("daemon")->warn(
        "agent '{}' is {}: no job is placed on it until {}: {}", change.agent, to,
        change.to == AgentStandings::State::kDrained
            ? "`gangrun undrain " + change.agent + "`"
            : "its health check passes or `gangrun undrain " + change.agent + "`",
        change.reason);
  }
  telemetry_.Record(Event::kAgentStanding, {{"name", change.agent},
                                            {"from", AgentStandings::Name(change.from)},
                                            {"to", to},
                                            {"reason", change.reason}});
  if (change.to == AgentStandings::State::kQuarantined) ArmProbes();
  if (change.to == AgentStandings::State::kOk) TryPlace();
}

void Daemon::SaveStanding(const std::string& agent) {
  if (options_.store != nullptr) options_.store->SaveAgent(agent, standings_.ToJson(agent));
}

absl::StatusOr<std::string> Daemon::Drain(const v1::DrainRequest& request) {
  GANGRUN_ON_STRAND(strand_);
  const std::string& name = request.agent();
  auto registered = AgentNamed(name);
  if (registered == agents_.end() && standings_.Find(name) == nullptr) {
    std::string names;
    for (const auto& [id, agent] : agents_) {
      if (agent.registered) names += (names.empty() ? "" : ", ") + agent.info.name();
    }
    return absl::NotFoundError(
        "no agent named '" + name + "' is registered or recorded" +
        (names.empty() ? std::string(" (none is registered)") : " (registered: " + names + ")"));
  }
  std::optional<AgentStandings::Change> change;
  if (request.undrain()) {
    change = standings_.Release(name, "undrained by an operator", UnixNow());
  } else {
    change =
        standings_.Drain(name, Sanitize(request.reason(), AgentStandings::kMaxWhyBytes), UnixNow());
  }
  SaveStanding(name);
  if (!change) {
    return "agent '" + name + "' is " +
           AgentStandings::Name(standings_.Find(name) != nullptr ? standings_.Find(name)->state
                                                                 : AgentStandings::State::kOk) +
           " already; nothing changed";
  }
  OnStandingChanged(*change);
  std::string said = "agent '" + name + "': " + AgentStandings::Name(change->from) + " -> " +
                     AgentStandings::Name(change->to);
  if (change->to == AgentStandings::State::kDrained && registered != agents_.end() &&
      !registered->second.jobs.empty()) {
    said += "; its " + std::to_string(registered->second.jobs.size()) +
            " running job(s) go on, no new job is placed on it";
  }
  return said;
}

void Daemon::ArmProbes() {
  if (probe_timer_) return;
  probe_timer_ =
      clock_.After(common::DurationOf(options_.probe_interval), [this] { ProbeQuarantined(); });
}

void Daemon::ProbeQuarantined() {
  probe_timer_.reset();
  const std::vector<std::string> quarantined = standings_.In(AgentStandings::State::kQuarantined);
  if (quarantined.empty() || !active_) return;
  for (const std::string& name : quarantined) {
    auto it = AgentNamed(name);
    if (it == agents_.end() || !it->second.info.health_check()) continue;
    common::Logger("daemon")->info("probing quarantined agent '{}' (its --health_check)", name);
    v1::AgentCommand command;
    command.mutable_probe();
    it->second.handle->Send(command);
  }
  ArmProbes();
}

void Daemon::OnProbed(const Agent& agent, const v1::AgentProbed& probed) {
  const std::string& name = agent.info.name();
  const std::string message = Sanitize(probed.message(), AgentStandings::kMaxWhyBytes);
  if (!probed.healthy()) {
    common::Logger("daemon")->warn("agent '{}' stays quarantined: {}", name, message);
    return;
  }
  auto change = standings_.Release(name, "its health check passed: " + message, UnixNow());
  SaveStanding(name);
  if (change) OnStandingChanged(*change);
}

}  // namespace gangrun::daemon
