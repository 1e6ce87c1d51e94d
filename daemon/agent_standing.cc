#include "daemon/agent_standing.h"

#include "scheduler/job_record.h"
#include "scheduler/peer_checks.h"

namespace gangrun::daemon {

const char* AgentStandings::Name(State state) {
  switch (state) {
    case State::kOk:
      return "ok";
    case State::kQuarantined:
      return "quarantined";
    case State::kDrained:
      return "drained";
  }
  return "?";
}

AgentStandings::Record& AgentStandings::RecordOf(const std::string& agent) {
  auto it = records_.find(agent);
  if (it != records_.end()) return it->second;
  if (records_.size() >= kMaxAgents) {
    // The bound: an ok agent's record goes first (it holds only failures), else any.
    auto victim = records_.begin();
    for (auto at = records_.begin(); at != records_.end(); ++at) {
      if (at->second.state == State::kOk) {
        victim = at;
        break;
      }
    }
    records_.erase(victim);
  }
  return records_[agent];
}

void AgentStandings::Expire(Record& record, double now_unix) const {
  while (!record.failures.empty() &&
         record.failures.front().unix < now_unix - options_.window_seconds) {
    record.failures.pop_front();
  }
}

std::optional<AgentStandings::Change> AgentStandings::Blame(const std::string& agent,
                                                            const std::string& job_id,
                                                            const std::string& why,
                                                            double now_unix) {
  Record& record = RecordOf(agent);
  Expire(record, now_unix);
  record.failures.push_back({now_unix, job_id, scheduler::Sanitize(why, kMaxWhyBytes)});
  if (record.failures.size() > kMaxFailures) record.failures.pop_front();
  const int count = static_cast<int>(record.failures.size());
  if (record.state != State::kOk || options_.quarantine_after <= 0 ||
      count < options_.quarantine_after) {
    return std::nullopt;
  }
  record.state = State::kQuarantined;
  record.since_unix = now_unix;
  record.reason = scheduler::Sanitize(
      std::to_string(count) + " failures attributed to it within " +
          std::to_string(static_cast<int64_t>(options_.window_seconds)) +
          " s (--quarantine_after " + std::to_string(options_.quarantine_after) +
          "), the last in job " + job_id + ": " + why,
      kMaxWhyBytes);
  return Change{agent, State::kOk, State::kQuarantined, record.reason};
}

std::optional<AgentStandings::Change> AgentStandings::Drain(const std::string& agent,
                                                            const std::string& reason,
                                                            double now_unix) {
  Record& record = RecordOf(agent);
  if (record.state == State::kDrained) return std::nullopt;
  const State from = record.state;
  record.state = State::kDrained;
  record.since_unix = now_unix;
  record.reason =
      scheduler::Sanitize(reason.empty() ? "drained by an operator" : reason, kMaxWhyBytes);
  return Change{agent, from, State::kDrained, record.reason};
}

std::optional<AgentStandings::Change> AgentStandings::Release(const std::string& agent,
                                                              const std::string& why,
                                                              double now_unix) {
  auto it = records_.find(agent);
  if (it == records_.end()) return std::nullopt;
  Record& record = it->second;
  record.failures.clear();
  if (record.state == State::kOk) return std::nullopt;
  const State from = record.state;
  record.state = State::kOk;
  record.since_unix = now_unix;
  record.reason.clear();
  return Change{agent, from, State::kOk, scheduler::Sanitize(why, kMaxWhyBytes)};
}

bool AgentStandings::Placeable(const std::string& agent) const {
  const Record* record = Find(agent);
  return record == nullptr || record->state == State::kOk;
}

const AgentStandings::Record* AgentStandings::Find(const std::string& agent) const {
  auto it = records_.find(agent);
  return it == records_.end() ? nullptr : &it->second;
}

std::vector<std::string> AgentStandings::In(State state) const {
  std::vector<std::string> names;
  for (const auto& [name, record] : records_) {
    if (record.state == state) names.push_back(name);
  }
  return names;
}

nlohmann::json AgentStandings::ToJson(const std::string& agent) const {
  const Record* record = Find(agent);
  if (record == nullptr) return {{"name", agent}, {"state", "ok"}};
  nlohmann::json failures = nlohmann::json::array();
  for (const Failure& failure : record->failures) {
    failures.push_back({{"unix", failure.unix}, {"job", failure.job_id}, {"why", failure.why}});
  }
  return {{"name", agent},
          {"state", Name(record->state)},
          {"reason", record->reason},
          {"since_unix", record->since_unix},
          {"failures", std::move(failures)}};
}

void AgentStandings::Restore(const std::string& agent, const nlohmann::json& json) {
  if (!json.is_object()) return;
  using scheduler::RecordField;  // a field of another type reads as its fallback
  Record record;
  const std::string state = RecordField<std::string>(json, "state", "");
  record.state = state == "quarantined" ? State::kQuarantined
                 : state == "drained"   ? State::kDrained
                                        : State::kOk;
  record.reason = scheduler::Sanitize(RecordField<std::string>(json, "reason", ""), kMaxWhyBytes);
  record.since_unix = RecordField(json, "since_unix", 0.0);
  if (const auto failures = json.find("failures"); failures != json.end() && failures->is_array()) {
    for (const auto& failure : *failures) {
      if (!failure.is_object()) continue;
      record.failures.push_back(
          {RecordField(failure, "unix", 0.0), RecordField<std::string>(failure, "job", ""),
           scheduler::Sanitize(RecordField<std::string>(failure, "why", ""), kMaxWhyBytes)});
      if (record.failures.size() > kMaxFailures) record.failures.pop_front();
    }
  }
  RecordOf(agent) = std::move(record);
}

void AgentStandings::Describe(const std::string& agent, double now_unix,
                              v1::AgentStatus& status) const {
  const Record* record = Find(agent);
  status.set_state(Name(record != nullptr ? record->state : State::kOk));
  if (record == nullptr) return;
  status.set_reason(record->reason);
  status.set_since_unix(record->since_unix);
  for (const Failure& failure : record->failures) {
    if (failure.unix < now_unix - options_.window_seconds) continue;  // past the window
    v1::AgentFailure* out = status.add_failures();
    out->set_unix(failure.unix);
    out->set_job_id(failure.job_id);
    out->set_why(failure.why);
  }
}

}  // namespace gangrun::daemon
