// gangrun progress: a worker's progress report from a shell (README "Progress, hangs and
// stragglers"): `gangrun progress step 12`, `gangrun progress begin checkpoint`. One datagram
// to $GANGRUN_PROGRESS, the socket the worker's node serves.

#include "node/progress.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_join.h"
#include "cli/command.h"
#include "common/env_names.h"
#include "common/status.h"
#include "common/version.h"

namespace gangrun::cli {
namespace {

constexpr char kProgress[] = "progress";

}  // namespace

CommandResult RunProgress(const CommandArgs& command) {
  if (command.args.size() == 1 && command.args[0] == "--version") {
    std::printf("%s\n", common::VersionLine("gangrun progress").c_str());
    return absl::OkStatus();
  }
  if (AsksForHelp(command.args)) {
    PrintHelp(kProgress, "report this worker's progress to its gangrun node ($GANGRUN_PROGRESS)",
              "step [N] | checkpoint [N] | begin NAME | end NAME",
              "Commands:\n"
              "  step [N]                    a step, numbered or not\n"
              "  checkpoint [N]              a checkpoint holding step N (without N: the last\n"
              "                              step) was saved; a restart redoes only what came\n"
              "                              after it (the ledger's lost work)\n"
              "  begin NAME                  the start of a named section\n"
              "  end NAME                    its end");
    return absl::OkStatus();
  }
  const std::string datagram = absl::StrJoin(command.args, " ");
  auto parsed = node::ParseProgress(datagram);
  if (command.args.empty() || !parsed.ok()) {
    return UsageError(kProgress, (command.args.empty() ? std::string("nothing to report")
                                                       : std::string(parsed.status().message())));
  }
  const std::optional<std::string> path = command.env(env::kProgress);
  if (!path || path->empty()) {
    return absl::FailedPreconditionError(
        std::string(env::kProgress) + " is not set: run this inside a worker that gangrun started");
  }
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path->size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(std::string(env::kProgress) +
                                      " is too long for a socket path");
  }
  std::memcpy(address.sun_path, path->c_str(), path->size());
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return common::ErrnoToStatus(errno, "socket");
  timeval timeout{5, 0};  // a node that stopped reading must not hold a script for ever
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  ssize_t sent = sendto(fd, datagram.data(), datagram.size(), 0,
                        reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  const int error = errno;
  // The node checks whose report it is by the sender's pid when it reads it: a sender gone by
  // then cannot be told from a sibling's forgery and is ignored. So this command lives until
  // its datagram is read (a Unix datagram stays charged to its sender until then), at most
  // kReadWait; a node that reads later gets a report it may ignore.
  constexpr auto kReadWait = std::chrono::seconds(2);
  const auto deadline = std::chrono::steady_clock::now() + kReadWait;
  for (int unread = 0; sent >= 0 && ioctl(fd, SIOCOUTQ, &unread) == 0 && unread > 0 &&
                       std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  close(fd);
  if (sent < 0) {
    return absl::UnavailableError("cannot report to " + *path + ": " + std::strerror(error) +
                                  " (is the worker's gangrun node still running?)");
  }
  return absl::OkStatus();
}

}  // namespace gangrun::cli
