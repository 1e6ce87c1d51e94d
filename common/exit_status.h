#pragma once
// How a process ended: exited(code) or signaled(signal), never folded together.

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace gangrun::common {

// The launcher's exit code for a node excluded from its job (cli/exit_codes.h has them all):
// the daemon knows such a launcher's end is the job's decision, not a failure.
inline constexpr int kExitExcluded = 6;

struct ExitStatus {
  bool signaled = false;
  int code = 0;    // exit code when !signaled
  int signal = 0;  // signal number when signaled

  static ExitStatus Exited(int code) { return {false, code, 0}; }
  static ExitStatus Signaled(int sig) { return {true, 0, sig}; }
  // Decodes a waitpid() status word.
  static ExitStatus FromWaitStatus(int wstatus);

  bool success() const { return !signaled && code == 0; }
  // "exited with code 3" / "was killed by signal 9 (SIGKILL)".
  std::string ToString() const;
  // The shell convention: the code, or 128 + signal.
  int ShellCode() const { return signaled ? 128 + signal : code; }
};

// "SIGKILL" for 9, "signal 77" for unknown numbers.
std::string SignalName(int sig);
// A signal by name or number: "SIGUSR1", "USR1" (any case) or "10"; nullopt for anything else.
std::optional<int> ParseSignal(std::string_view text);

}  // namespace gangrun::common
