#include "common/exit_status.h"

#include <sys/wait.h>

#include <csignal>
#include <cstring>

namespace gangrun::common {

ExitStatus ExitStatus::FromWaitStatus(int wstatus) {
  if (WIFSIGNALED(wstatus)) return Signaled(WTERMSIG(wstatus));
  return Exited(WEXITSTATUS(wstatus));
}

std::string ExitStatus::ToString() const {
  if (signaled) {
    return "was killed by signal " + std::to_string(signal) + " (" + SignalName(signal) + ")";
  }
  return "exited with code " + std::to_string(code);
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev == nullptr) return "signal " + std::to_string(sig);
  return std::string("SIG") + abbrev;
}

}  // namespace gangrun::common
