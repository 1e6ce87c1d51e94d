#pragma once
// GANGRUN_PROGRESS: one Unix datagram socket per local rank, bound in the node's runtime
// directory (mode 0700: only this user can send). A datagram's socket says whose it is, so a
// worker's subprocesses report as that rank; the kernel's word on the sender (SO_PASSCRED)
// comes with it, so that the node refuses a sibling rank's process sending to another rank's
// socket (Supervisor::OnProgressDatagram).
//
// Bounded: a datagram is read into a fixed buffer (longer ones arrive cut and are rejected),
// and each socket is read at most kBudgetPerSecond times a second. Past that the node stops
// reading it until the second is over; the kernel queue fills and the flooding worker's own
// sends wait (or fail with EAGAIN if non-blocking). Memory is the kernel's queue; the node's
// CPU is bounded by the budget, whatever the workers send.
//
// Runs on the io_context's thread (the node's strand).

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/datagram_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gangrun::node {

class ProgressChannel {
 public:
  static constexpr int kBudgetPerSecond = 10000;
  // `on_datagram(slot, sender, text)` for every datagram read; `sender` is the sending
  // process's pid as the kernel says it (0 when it said nothing).
  using Handler = std::function<void(int slot, pid_t sender, absl::string_view datagram)>;

  ProgressChannel(boost::asio::io_context& io, std::string dir, Handler on_datagram);
  ~ProgressChannel();

  // Binds one socket per slot (local rank) in [0, slots); more slots keep the ones bound.
  absl::Status Open(int slots);
  std::string PathFor(int slot) const;
  // Reads what the slot's socket holds now, within the budget (a worker that just exited:
  // its last reports before its exit).
  void ReadNow(int slot);
  // Datagrams read so far, all slots (for tests and benchmarks).
  uint64_t received() const { return received_; }

 private:
  struct Slot {
    std::unique_ptr<boost::asio::local::datagram_protocol::socket> socket;
    int read_this_second = 0;
    std::chrono::steady_clock::time_point second_started;
    bool paused = false;
  };
  void Wait(int slot);
  void Drain(int slot);
  // False when the handler destroyed this channel.
  bool ReadAvailable(int slot);
  void ResumeAfter();

  boost::asio::io_context& io_;
  std::string dir_;
  Handler on_datagram_;
  std::vector<Slot> slots_;
  boost::asio::steady_timer window_;
  bool window_armed_ = false;
  uint64_t received_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace gangrun::node
