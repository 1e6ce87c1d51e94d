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

// Returns the exit code for main() in the PID 1 parent (after the child has ended), or
// nullopt in the child and whenever this process is not PID 1 (or GANGRUN_NO_INIT is set).
std::optional<int> MaybeBecomeInit();

}  // namespace gangrun::common
