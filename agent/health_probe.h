#pragma once
// The agent's --health_check, run when the daemon probes it (AgentProbe): a quarantined agent
// whose check passes is placed again (README "Agents' standing"). One run at a time, in its
// own process group through /bin/sh -c, bounded by its timeout (SIGKILL to the group); its
// verdict names the check, how it ended and the last line of its output.
//
// The agent is a subreaper and reaps every child itself (waitpid(-1)): it hands the probe's
// exit over with OnReaped. On the agent's strand.

#include <sys/types.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/exit_status.h"

namespace gangrun::agent {

class HealthProbe {
 public:
  using Done = std::function<void(bool healthy, const std::string& message)>;
  // Of its output, the last kTailBytes are kept (its last line comes from them).
  static constexpr size_t kTailBytes = 1024;

  HealthProbe(boost::asio::io_context& io, common::Clock& clock, std::string command,
              common::Duration timeout);
  ~HealthProbe();

  // Runs the check; `done` once it has ended and its output is read. A run while one is
  // under way gets that one's verdict.
  void Run(Done done);
  // Whether `pid` was the check's (then its exit is taken).
  bool OnReaped(pid_t pid, common::ExitStatus status);
  const std::string& command() const { return command_; }

 private:
  struct Running;
  void Read(std::shared_ptr<Running> running);
  void MaybeDone(std::shared_ptr<Running> running);

  boost::asio::io_context& io_;
  common::Clock& clock_;
  const std::string command_;
  const common::Duration timeout_;
  std::shared_ptr<Running> running_;
};

}  // namespace gangrun::agent
