#pragma once
// The launcher's end of the keeper (see keeper.h): starts the keeper process and talks to
// it over a SOCK_SEQPACKET socket on the launcher's io_context. Runs on one strand (the
// io_context's single thread); it is owned by the launcher and must outlive every
// ProcessManager that uses it.

#include <sys/types.h>

#include <boost/asio/generic/seq_packet_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/clock.h"
#include "node/process_backend.h"

namespace gangrun::v1 {
class KeeperRequest;
}

namespace gangrun::node {

// Forks the keeper now, for the next KeeperClient::Start(io, {}) of this process to take:
// a launch creates it first thing, so that the keeper's start (the fork, its copy-on-write
// faults, its first steps) overlaps with option parsing instead of preceding the first spawn.
// A keeper nobody took is closed and reaped when this object goes. One at a time, on the
// main thread, while the process has a single thread.
class KeeperPrestart {
 public:
  KeeperPrestart();
  ~KeeperPrestart();
  KeeperPrestart(const KeeperPrestart&) = delete;
  KeeperPrestart& operator=(const KeeperPrestart&) = delete;

 private:
  pid_t forked_ = -1;  // the keeper this object forked, while no Start has taken it
};

class KeeperClient : public ProcessBackend {
 public:
  // Starts `keeper_argv` (e.g. {"/proc/self/exe", "__keeper"}; the socket's fd number is
  // appended) and connects to it. An empty `keeper_argv` forks this process into the keeper
  // instead, which is faster; call it so only while this process has a single thread.
  static absl::StatusOr<std::unique_ptr<KeeperClient>> Start(
      boost::asio::io_context& io, const std::vector<std::string>& keeper_argv);
  ~KeeperClient() override;

  void Spawn(const ProcessSpec& spec, std::function<void(absl::StatusOr<pid_t>)> done) override;
  void SignalGroup(pid_t pgid, int sig) override;
  void SetExitHandler(std::function<void(pid_t, common::ExitStatus)> handler) override {
    on_exit_ = std::move(handler);
  }
  // Called if the keeper goes away without being asked to (its workers died with it), before
  // the spawns it had not answered fail.
  void SetLostHandler(std::function<void()> handler) { on_lost_ = std::move(handler); }

  // The keeper removes `path` (and everything in it) when it exits, also after the launcher
  // died with SIGKILL.
  void OwnDirectory(const std::string& path);
  // Asks the keeper to kill everything left below it (SIGTERM, SIGKILL after `grace`) and
  // calls `done` once it says all of it is reaped (or once it is gone). The keeper itself
  // exits right after; the destructor reaps it, so nothing outlives this object.
  void Shutdown(common::Duration grace, std::function<void()> done);
  pid_t keeper_pid() const { return keeper_pid_; }

 private:
  KeeperClient(boost::asio::io_context& io, int fd, pid_t keeper_pid);
  void Send(const v1::KeeperRequest& request);
  void ReadNext();
  void OnKeeperGone();

  boost::asio::generic::seq_packet_protocol::socket socket_;
  pid_t keeper_pid_;
  uint64_t next_id_ = 1;
  bool shutting_down_ = false;
  bool gone_ = false;
  // One event; left uninitialised (new char[]), so that only the pages an event is written to
  // are ever touched.
  static constexpr size_t kBufferSize = 64 * 1024;
  std::unique_ptr<char[]> buffer_;
  boost::asio::socket_base::message_flags receive_flags_ = 0;
  std::map<uint64_t, std::function<void(absl::StatusOr<pid_t>)>> pending_spawns_;
  std::function<void(pid_t, common::ExitStatus)> on_exit_;
  std::function<void()> on_lost_;
  std::function<void()> on_shutdown_;
  common::ThreadAffinity strand_;  // the io_context's thread: every entry point checks it
};

}  // namespace gangrun::node
