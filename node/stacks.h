#pragma once
// Where a hung rank is: its stack, captured without changing the user's code.
//
// Python workers: unless --progress_hook False, every worker's PYTHONPATH starts with the
// node's hook directory, whose sitecustomize.py (node/python/sitecustomize.py) registers
// faulthandler for GANGRUN_STACK_SIGNAL (writing every thread's stack to
// GANGRUN_STACK_DIR/<pid>.stack), counts torch.distributed's collectives and optimizer steps
// for GANGRUN_PROGRESS (node/progress.h, "hook"), and then runs the sitecustomize that would
// otherwise have been found. faulthandler's handler is C code, so it
// answers even when the interpreter is stuck inside a C call holding the GIL. A Python started
// with -E, -I or -S has no hook. Native workers (and Python ones without the hook): eu-stack
// (elfutils) attaches with ptrace and prints every thread. Neither there: the rank is named
// with the reason.
//
// Capture is parallel and bounded: every rank gets the same deadline, and a rank that cannot
// be sampled by then is named with "not sampled within N s", never waited for.
//
// Runs on the io_context's thread (the node's strand).

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "gangrun/v1/progress.pb.h"

namespace gangrun::node {

// The part of a captured stack that is kept and sent (the rest is cut).
inline constexpr size_t kMaxStackBytes = 32 * 1024;

struct StackTarget {
  int rank = 0;
  pid_t pid = 0;
};

class StackSampler {
 public:
  virtual ~StackSampler() = default;
  // Adds what a worker needs to be sampled (the Python hook's variables) to its environment.
  virtual void AddWorkerEnv(std::vector<std::string>& env) const = 0;
  // Captures every target's stack at once; `done` gets one RankStack per target, in order,
  // by `timeout` at the latest.
  virtual void Capture(std::vector<StackTarget> targets, common::Duration timeout,
                       std::function<void(std::vector<v1::RankStack>)> done) = 0;
};

class SystemStackSampler : public StackSampler {
 public:
  // Writes the hook into `runtime_dir`/python and makes `runtime_dir`/stacks.
  static absl::StatusOr<std::unique_ptr<SystemStackSampler>> Create(boost::asio::io_context& io,
                                                                    const std::string& runtime_dir);
  ~SystemStackSampler() override;

  void AddWorkerEnv(std::vector<std::string>& env) const override;
  void Capture(std::vector<StackTarget> targets, common::Duration timeout,
               std::function<void(std::vector<v1::RankStack>)> done) override;

  static int StackSignal();  // SIGRTMIN + 6: no default action a program relies on

 private:
  struct Session;
  struct Probe;
  SystemStackSampler(boost::asio::io_context& io, std::string runtime_dir);
  void StartPython(const std::shared_ptr<Session>& session, size_t index, off_t size_before);
  void PollPython(const std::shared_ptr<Session>& session, size_t index, off_t size_before,
                  off_t size_seen);
  void StartNative(const std::shared_ptr<Session>& session, size_t index);
  const std::string& EuStack();
  void ReadNative(const std::shared_ptr<Session>& session, size_t index);
  void Finish(const std::shared_ptr<Session>& session, size_t index);

  boost::asio::io_context& io_;
  std::string hook_dir_;
  std::string stack_dir_;
  std::optional<std::string> eu_stack_;  // its path once looked up; "" = not installed
  std::vector<std::shared_ptr<Session>> sessions_;
};

// The innermost frame in user code of a faulthandler dump's main thread (the last thread it
// lists), as "function (file.py:line)"; frames of the standard library and of installed
// packages are skipped unless there is nothing else. "" = no frame found.
std::string PythonWhere(absl::string_view dump);
// The same for eu-stack output (its first thread, the main one): the innermost frame with a
// symbol outside the system's libraries, as "function (file.c:line)" where the binary has
// debug information (eu-stack -s), else "function (module)".
std::string NativeWhere(absl::string_view stack);

}  // namespace gangrun::node
