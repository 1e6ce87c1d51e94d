#pragma once
// What the daemon holds against each agent across jobs (README "Agents' standing"): the
// failures its jobs attributed to it (its node lost or excluded, its launcher's health check
// failed), a quarantine once there are too many within a window, and an operator's drain. A
// daemon places jobs only on agents that are ok; a quarantined agent is ok again when its
// probe (its --health_check, which the daemon runs on a schedule) passes or an operator
// undrains it, a drained one only when undrained. Either release forgets its failures.
//
// Keyed by agent name, not by connection: an agent that reconnects (or comes back after a
// daemon failover, the records being in the store) keeps its standing. A plain value type,
// touched on the daemon's strand; every change is returned to the caller, who logs, counts,
// records and stores it.

#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "gangrun/v1/daemon.pb.h"
#include "nlohmann/json.hpp"

namespace gangrun::daemon {

class AgentStandings {
 public:
  struct Options {
    // Attributed failures within `window_seconds` that quarantine an agent; 0 = never.
    int quarantine_after = 3;
    double window_seconds = 24 * 3600;
  };
  enum class State { kOk, kQuarantined, kDrained };
  struct Failure {
    double unix = 0;
    std::string job_id;
    std::string why;  // at most kMaxWhyBytes
  };
  struct Record {
    State state = State::kOk;
    std::string reason;            // kQuarantined, kDrained: why (at most kMaxWhyBytes)
    double since_unix = 0;         // when it entered its state
    std::deque<Failure> failures;  // oldest first; at most kMaxFailures, none past the window
  };
  // A change of an agent's state, for the caller to say and keep.
  struct Change {
    std::string agent;
    State from, to;
    std::string reason;
  };
  // Bounds: each agent keeps its last kMaxFailures failures (the quarantine threshold is at
  // most this), each reason kMaxWhyBytes (and "..." where cut); records of at most kMaxAgents names
  // (an agent seen once and ok is forgotten first).
  static constexpr size_t kMaxFailures = 100;
  static constexpr size_t kMaxWhyBytes = 512;
  static constexpr size_t kMaxAgents = 100000;

  explicit AgentStandings(Options options) : options_(options) {}

  // A failure attributed to `agent` at `now_unix`; a change when it is now quarantined.
  std::optional<Change> Blame(const std::string& agent, const std::string& job_id,
                              const std::string& why, double now_unix);
  // `gangrun drain`: no job is placed on it until undrained. A change unless already drained.
  std::optional<Change> Drain(const std::string& agent, const std::string& reason, double now_unix);
  // `gangrun undrain`, or its probe passed (`why`): ok again, its failures forgotten. A change
  // unless it was ok.
  std::optional<Change> Release(const std::string& agent, const std::string& why, double now_unix);
  bool Placeable(const std::string& agent) const;
  const Record* Find(const std::string& agent) const;
  // The agents in `state` (the quarantined ones are probed), by name.
  std::vector<std::string> In(State state) const;

  // The store's form of a record ({"state", "reason", "since_unix", "failures": [...]}), and
  // back (a record that does not parse is ok and empty).
  nlohmann::json ToJson(const std::string& agent) const;
  void Restore(const std::string& agent, const nlohmann::json& record);
  // For `gangrun status`: its state, why, since when, its failures within the window.
  void Describe(const std::string& agent, double now_unix, v1::AgentStatus& status) const;

  static const char* Name(State state);

 private:
  Record& RecordOf(const std::string& agent);
  void Expire(Record& record, double now_unix) const;

  Options options_;
  std::map<std::string, Record> records_;
};

}  // namespace gangrun::daemon
