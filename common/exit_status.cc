#include "common/exit_status.h"

#include <sys/wait.h>

#include <algorithm>
#include <cctype>
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

std::optional<int> ParseSignal(std::string_view text) {
  if (text.empty()) return std::nullopt;
  if (std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (text.size() > 2) return std::nullopt;
    const int number = std::stoi(std::string(text));
    return number >= 1 && number < NSIG ? std::optional<int>(number) : std::nullopt;
  }
  std::string upper;
  for (char c : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper.rfind("SIG", 0) == 0) upper = upper.substr(3);
  for (int sig = 1; sig < NSIG; ++sig) {
    const char* abbrev = sigabbrev_np(sig);
    if (abbrev != nullptr && upper == abbrev) return sig;
  }
  return std::nullopt;
}

}  // namespace gangrun::common
