#pragma once
// Test-only fakes and builders for the scheduler: a node link that records what it is sent,
// and the NodeEvents nodes send.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gangrun/v1/session.pb.h"
#include "scheduler/scheduler.h"

namespace gangrun::testing {

class FakeNodeLink : public scheduler::NodeLink {
 public:
  explicit FakeNodeLink(bool in_process = false) : in_process_(in_process) {}
  void Send(const v1::NodeCommand& command) override { commands.push_back(command); }
  void Close() override { closed = true; }
  void Drop() override { dropped = true; }
  bool InProcess() const override { return in_process_; }
  std::string PeerEndpoint() const override { return peer; }
  std::optional<common::Duration> SinceLastData() const override {
    if (!since_last_data) return std::nullopt;
    ++data_reads;
    return since_last_data();
  }
  bool DataProvesLoop() const override { return data_proves_loop; }
  void OnSweep() override { ++sweeps; }

  bool rejected() const { return !commands.empty() && commands.back().has_rejected(); }
  bool started() const { return !commands.empty() && commands.back().has_start(); }
  bool aborted() const { return !commands.empty() && commands.back().has_abort(); }
  std::string reason() const { return rejected() ? commands.back().rejected().reason() : ""; }

  std::vector<v1::NodeCommand> commands;
  bool closed = false;
  bool dropped = false;  // lost: the scheduler let go of it
  std::string peer;      // its connection's remote endpoint ("" = no TCP connection)
  // Set: the link reads its own connection's last data (a node session's), counted.
  std::function<std::optional<common::Duration>()> since_last_data;
  mutable int data_reads = 0;
  bool data_proves_loop = false;  // a quiet session's: its ticks come from its launcher's loop
  int sweeps = 0;                 // the heartbeat sweeps that called it

 private:
  bool in_process_;
};

// A join as a launcher sends it (a valid one unless the test changes it).
inline v1::NodeEvent JoinEvent(const std::string& name, const std::string& address, int node_rank,
                               int workers, int free_port = 30000) {
  v1::NodeEvent event;
  auto* join = event.mutable_join();
  join->set_node_name(name);
  join->set_host_address(address);
  join->set_node_rank(node_rank);
  join->set_local_worker_num(workers);
  join->set_free_port(free_port);
  return event;
}

inline v1::NodeEvent StartedEvent(uint64_t generation, int rank, int pid) {
  v1::NodeEvent event;
  event.set_generation(generation);
  event.mutable_worker_started()->set_rank(rank);
  event.mutable_worker_started()->set_pid(pid);
  return event;
}

inline v1::NodeEvent ExitedEvent(uint64_t generation, int rank, int code, bool stopped = false,
                                 int signal = 0) {
  v1::NodeEvent event;
  event.set_generation(generation);
  auto* exited = event.mutable_worker_exited();
  exited->set_rank(rank);
  exited->set_pid(500 + rank);
  exited->mutable_exit()->set_exit_code(code);
  exited->mutable_exit()->set_signal(signal);
  exited->set_stopped_by_us(stopped);
  return event;
}

inline v1::NodeEvent EndedEvent(uint64_t generation) {
  v1::NodeEvent event;
  event.set_generation(generation);
  event.mutable_generation_ended();
  return event;
}

inline v1::NodeEvent HealthEvent(int round, bool healthy, const std::string& message = "") {
  v1::NodeEvent event;
  auto* checked = event.mutable_health_checked();
  checked->set_round(round);
  checked->set_healthy(healthy);
  checked->set_message(message);
  return event;
}

inline v1::NodeEvent HeartbeatEvent() {
  v1::NodeEvent event;
  event.mutable_heartbeat();
  return event;
}

}  // namespace gangrun::testing
