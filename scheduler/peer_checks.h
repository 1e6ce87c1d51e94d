#pragma once
// What the scheduler accepts from a peer (daemon/checks.h: what the daemon accepts). A peer may be
// buggy, from another job, or hostile; nothing it sends is used before it is checked against the
// job's own options: counts, ranks, ports, names and lengths. A refused join names the node and the
// difference; the rest of the job goes on.

#include <string>

#include "absl/status/status.h"
#include "gangrun/v1/session.pb.h"

namespace gangrun::scheduler {

// The largest job any scheduler runs (launcher/options.h's kMaxWorkers).
inline constexpr int kMaxWorldSize = 1 << 20;
inline constexpr size_t kMaxNameBytes = 255;
inline constexpr size_t kMaxReasonBytes = 1024;
inline constexpr int kMaxLogTailLines = 100;

// What a joining launcher must agree with.
struct JobIdentity {
  int world_size = 0;      // as configured (an elastic job's maximum)
  int min_world_size = 0;  // = world_size for a fixed-size job
  std::string run_id;
  std::string personality;  // "" = any
};

// Checks a join's numbers and names, and that the node was started for this job.
absl::Status CheckJoinRequest(const v1::JoinRequest& join, const JobIdentity& job);

// "node 'a' (10.0.0.2, launcher pid 42)" from what a join says, made safe to print.
std::string DescribeJoin(const v1::JoinRequest& join);

// Makes a peer's free text safe to log and bounded: control characters become '?', and text
// beyond `max_bytes` is cut.
std::string Sanitize(const std::string& text, size_t max_bytes);

// A valid signal number to stop with (1..64), else SIGTERM.
int StopSignal(int signal);

// Checks an agent's registration and a submitted job's sizes.
// A name a peer gives (printable, 1 to kMaxNameBytes bytes), and a numeric address.
bool IsCleanName(const std::string& name);
bool IsNumericAddress(const std::string& address);

}  // namespace gangrun::scheduler
