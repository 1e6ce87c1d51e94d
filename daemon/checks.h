#pragma once
// What the daemon accepts from its peers before anything else looks at it: an agent's
// registration and a submitted job's shape (scheduler/peer_checks.h checks the nodes'). What a
// job's options mean is checked by the launcher's own code (ConfigureSubmittedJob).

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/daemon.h"
#include "gangrun/v1/daemon.pb.h"

namespace gangrun::daemon {

inline constexpr int kMaxAgentSlots = 4096;

absl::Status CheckAgentRegister(const v1::AgentRegister& reg);
// Sizes only (how many options, how long, how many task arguments).
absl::Status CheckSubmitJob(const v1::SubmitJob& job);

// A submitted job's settings: its launch spec parsed and checked with the launcher's own code
// (what depends on the agents' hosts is checked by their launchers).
absl::StatusOr<Daemon::JobConfig> ConfigureSubmittedJob(const v1::SubmitJob& job);

}  // namespace gangrun::daemon
