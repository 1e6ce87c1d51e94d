#pragma once
// Helpers for tests that run real processes. Everything waits for an event (a pidfd, a
// FIFO) with a deadline; nothing sleeps to synchronise.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/exit_status.h"

namespace gangrun::testing {

using std::chrono::milliseconds;

// A fresh directory, removed with its contents at the end of the scope.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A FIFO that workers write one-line reports to (see helpers/test_worker.cc).
class ReportFifo {
 public:
  explicit ReportFifo(const std::string& path);
  ~ReportFifo();
  const std::string& path() const { return path_; }
  // The next line, or nullopt if none arrives within `timeout`.
  std::optional<std::string> ReadLine(milliseconds timeout);
  // `count` lines, or fewer if the timeout passes first.
  std::vector<std::string> ReadLines(size_t count, milliseconds timeout);

 private:
  std::string path_;
  int fd_ = -1;
  int keep_open_ = -1;
  std::string buffer_;
};

// A process started by a test (the gangrun binary, usually), with its output in files.
struct Launched {
  pid_t pid = -1;
  std::string stdout_path;
  std::string stderr_path;
  std::string Stdout() const;
  std::string Stderr() const;
};

// Waits until the launched process's stderr contains `text` (event-driven: inotify on the
// file); false if it does not within `timeout` or the process ends first.
bool WaitForStderr(const Launched& launched, const std::string& text, milliseconds timeout);
bool WaitForStdout(const Launched& launched, const std::string& text, milliseconds timeout);

// Starts `argv` (argv[0] is the program path) in `cwd` with the test's environment plus
// `extra_env`. Its output goes to files in `output_dir`, or its stdout to `stdout_fd` (a pipe
// the test holds, say) when that is >= 0.
Launched Launch(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                const std::string& cwd, const std::string& output_dir, int stdout_fd = -1);

// Waits for our child `pid` to exit and reaps it; nullopt on timeout (it is left running).
std::optional<common::ExitStatus> WaitExit(pid_t pid, milliseconds timeout);

// Waits until `pid` (any process) has ended; true if it ended within `timeout`.
bool WaitGone(pid_t pid, milliseconds timeout);
// Waits until `pid` (any process) has been reaped by its parent, not just exited: a pidfd
// reports POLLHUP then (Linux >= 6.9; older kernels wait out `timeout` and then look at /proc).
bool WaitReaped(pid_t pid, milliseconds timeout);
bool IsAlive(pid_t pid);
// A child in its own process group that holds `path` open until killed (then reap it with
// WaitReaped): its pid, once the file is open; -1 if it could not open it.
pid_t HoldFileOpen(const std::string& path);

// Reaps zombies among our children; kills and reaps live ones after `timeout`. Returns the
// pids that were still alive (a test failure: something outlived the launcher).
std::vector<pid_t> ReapChildren(milliseconds timeout);

// A TCP port on 127.0.0.1 that is free right now, as text (for command lines).
std::string FreePort();

// A port P on 127.0.0.1 such that P and P+1 are both free right now (msrun's layout:
// MindSpore on P, gangrun's scheduler on P+1).
int FreePortPair();

std::string ReadFile(const std::string& path);

// A KiB figure of /proc/<pid>/status ("VmRSS", "VmHWM", ...); -1 if there is none.
long ProcStatusKiB(pid_t pid, const std::string& field);

// Under AddressSanitizer (or ThreadSanitizer) a process's resident memory is mostly the
// sanitizer's (shadow memory, the quarantine that keeps freed blocks): memory bounds are
// checked in the plain build only; everything else is checked in every build.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kMemoryIsMeasurable = false;
#else
inline constexpr bool kMemoryIsMeasurable = true;
#endif
std::vector<std::string> Split(const std::string& text, char separator);

// Runs a shell command quietly; true on exit status 0.
bool Shell(const std::string& command);

// With openssl, in `dir`: a CA (ca.pem, ca.key) and `name`.pem / `name`.key, a certificate for
// 127.0.0.1 it signed, good for a server and a client. True when openssl succeeded.
bool MakeTestCertificates(const std::string& dir, const std::string& name);

// Paths of the binaries under test (set by CMake).
std::string GangrunBinary();
std::string MsrunBinary();
std::string TorchrunBinary();
std::string TestWorkerBinary();

}  // namespace gangrun::testing
