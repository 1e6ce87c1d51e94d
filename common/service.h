#pragma once
// Running as a service or a container's first process.
//
// systemd: SdNotify() speaks the sd_notify protocol (a datagram to $NOTIFY_SOCKET, abstract
// when it starts with '@') without libsystemd; Watchdog sends WATCHDOG=1 at half of
// $WATCHDOG_USEC from the io_context, so a wedged event loop stops the pings.
//
// PID 1: MaybeBecomeInit() makes a process that finds itself PID 1 (a container entrypoint,
// `unshare --pid --fork`) split in two, like tini: the parent stays PID 1, forwards every
// signal to the child and reaps every zombie that the namespace re-parents to it; the child
// returns and runs gangrun as usual. The parent exits with the child's status.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"

namespace gangrun::common {

// Sends `state` (e.g. "READY=1", "STOPPING=1", "STATUS=...") to $NOTIFY_SOCKET. No-op when
// the variable is unset; returns false when sending failed.
bool SdNotify(const std::string& state);

class Watchdog {
 public:
  // Pings every half of $WATCHDOG_USEC when systemd asked for a watchdog for this process.
  explicit Watchdog(Clock& clock);
  bool enabled() const { return interval_ > Duration::zero(); }

 private:
  void Ping();
  Clock& clock_;
  Duration interval_{};
  std::unique_ptr<Timer> timer_;
};

// Raises this process's soft limit on open files to its hard limit: a scheduler holds a
// connection per node (10,000 nodes need 10,000 descriptors), and idle peers must not be able
// to exhaust a 1024 limit. The limit the user gave is kept in GANGRUN_INTERNAL_NOFILE (for
// gangrun processes this one starts) and given back to workers (SpawnOptions::file_limit).
void RaiseFileLimit();
// The soft limit on open files this process was started with (before RaiseFileLimit).
uint64_t OriginalFileLimit();

// Returns the exit code for main() in the PID 1 parent (after the child has ended), or
// nullopt in the child and whenever this process is not PID 1 (or GANGRUN_NO_INIT is set).
std::optional<int> MaybeBecomeInit();

}  // namespace gangrun::common
