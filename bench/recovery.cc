// gangrun-bench recovery --nodes N [--spares S] [--node_timeout T] [--heartbeat_interval H]
//
// A lost node's place taken by a hot spare, at scale: a real scheduler in its own process
// (--spare_nodes S, --max_restarts 1), N simulated nodes of one worker that form generation 1,
// then S spares that join beyond the job's size and are told they wait. One node (the middle
// one) then loses its connection, as a host that dies does. Every simulated node answers an
// abort by ending its generation, as a launcher whose workers stopped does. Measures:
//   formed_s: from the first join to every node holding generation 1's assignment;
//   recovery_s: from the loss to every node of the job (the survivors and the promoted spare)
//     holding generation 2's assignment; the spare's assignment is the lost node's ranks;
//   recovery_scheduler_cpu_s: the scheduler's CPU time over the same span.
// The last line printed is JSON. A benchmark, not a test.

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/sim_cluster.h"
#include "common/clock.h"
#include "node/session_link.h"
#include "node/tcp_link.h"

namespace gangrun::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Params {
  int nodes = 1000;
  int spares = 1;
  double node_timeout = 5.0;
  double heartbeat_interval = 1.0;
};

common::Duration Seconds(double s) {
  return std::chrono::duration_cast<common::Duration>(std::chrono::duration<double>(s));
}

// The simulated nodes: their sessions on one io_context, and what they were told.
class SimulatedNodes {
 public:
  SimulatedNodes(boost::asio::io_context& io, const std::string& target, const Params& params)
      : io_(io), clock_(io.get_executor()) {
    link_.target = target;
    link_.heartbeat_interval = Seconds(params.heartbeat_interval);
    link_.node_timeout = Seconds(params.node_timeout);
    tcp_.target = target;
    tcp_.connect_timeout = node::ConnectTimeoutFor(link_.heartbeat_interval);
    tcp_.handshake_timeout = std::chrono::seconds(30);
  }

  // Opens `count` more sessions, each joining with one worker (on the io thread).
  void Open(int count) {
    std::promise<void> opened;
    boost::asio::post(io_, [&] {
      for (int n = 0; n < count; ++n) {
        const int i = static_cast<int>(links_.size());
        links_.push_back(std::make_unique<node::SessionLink>(
            clock_, link_, node::TcpSessionConnection::Factory(io_, tcp_)));
        first_rank_.push_back(-1);
        generation_.push_back(0);
        links_[i]->Connect([this, i](const v1::NodeCommand& command) { OnCommand(i, command); },
                           [this](const std::string&, bool) { ++lost_; });
        v1::NodeEvent join;
        join.mutable_join()->set_node_name("sim" + std::to_string(i));
        join.mutable_join()->set_host_address("127.0.0." + std::to_string(1 + i % 250));
        join.mutable_join()->set_node_rank(-1);
        join.mutable_join()->set_local_worker_num(1);
        join.mutable_join()->set_free_port(20000 + i % 1000);
        links_[i]->Send(join);
      }
      opened.set_value();
    });
    opened.get_future().wait();
  }

  // Its connection goes, as when its host dies.
  void Kill(int i) {
    std::promise<void> done;
    boost::asio::post(io_, [&] {
      links_[i].reset();
      done.set_value();
    });
    done.get_future().wait();
  }

  void CloseAll() {
    std::promise<void> done;
    boost::asio::post(io_, [&] {
      links_.clear();
      done.set_value();
    });
    done.get_future().wait();
  }

  // Waits until `done()` or `limit` passes; false if it passed or a session ended.
  template <typename Done>
  bool WaitFor(Done done, std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (!done() && lost_ == 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return done();
  }

  int starts(uint64_t generation) const { return starts_.at(generation).load(); }
  int spares() const { return spares_.load(); }
  int lost() const { return lost_.load(); }
  int first_rank(int i) const { return first_rank_.at(i); }  // read once the io thread is idle
  Clock::time_point last_start() const { return Clock::time_point(Clock::duration(last_start_)); }

 private:
  void OnCommand(int i, const v1::NodeCommand& command) {
    if (command.has_spare()) ++spares_;
    if (command.has_finished()) ++lost_;  // the job ended: not what this benchmark measures
    if (command.has_start() && command.generation() < starts_.size()) {
      first_rank_[i] = command.start().assignment().first_rank();
      last_start_ = Clock::now().time_since_epoch().count();
      ++starts_[command.generation()];
    }
    if (command.has_start()) generation_[i] = command.generation();
    // As a launcher does: a generation it ran ends when its workers stopped (a spare that
    // just took a place ran none of it).
    if (command.has_abort() && links_[i] && generation_[i] == command.generation()) {
      v1::NodeEvent ended;
      ended.set_generation(command.generation());
      ended.mutable_generation_ended();
      links_[i]->Send(ended);
    }
  }

  boost::asio::io_context& io_;
  common::AsioClock clock_;
  node::SessionLink::Options link_;
  node::TcpSessionConnection::Options tcp_;
  std::vector<std::unique_ptr<node::RemoteSchedulerLink>> links_;
  std::vector<int> first_rank_;
  std::vector<uint64_t> generation_;          // the last generation each node was told to start
  std::array<std::atomic<int>, 3> starts_{};  // Start commands received, by generation
  std::atomic<int> spares_{0}, lost_{0};
  std::atomic<Clock::rep> last_start_{0};
};

int Recovery(const Params& params, const std::string& self) {
  if (absl::Status fits = CheckFileLimit(params.nodes + params.spares); !fits.ok()) {
    std::fprintf(stderr, "%s\n", std::string(fits.message()).c_str());
    return 2;
  }
  RaiseFileLimit();
  ServeOptions serve;
  serve.world = params.nodes;
  serve.node_timeout = params.node_timeout;
  serve.spares = params.spares;
  serve.max_restarts = 1;
  auto server = StartServer(self, serve);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });
  SimulatedNodes sim(io, "127.0.0.1:" + std::to_string(server->port), params);
  const int n = params.nodes;
  const auto start = Clock::now();
  sim.Open(n);
  bool ok = sim.WaitFor([&] { return sim.starts(1) == n; }, std::chrono::seconds(120));
  const double formed_s = std::chrono::duration<double>(sim.last_start() - start).count();
  std::fprintf(stderr, "%d/%d nodes formed generation 1 in %.3f s\n", sim.starts(1), n, formed_s);
  sim.Open(params.spares);
  ok = ok && sim.WaitFor([&] { return sim.spares() == params.spares; }, std::chrono::seconds(60));
  std::fprintf(stderr, "%d/%d spares waiting\n", sim.spares(), params.spares);

  const int victim = n / 2;
  const int victim_rank = sim.first_rank(victim);
  const Cpu cpu_before = CpuOf(server->pid);
  const auto lost_at = Clock::now();
  sim.Kill(victim);
  ok = ok && sim.WaitFor([&] { return sim.starts(2) == n; }, std::chrono::seconds(120));
  const double recovery_s = std::chrono::duration<double>(sim.last_start() - lost_at).count();
  const Cpu cpu = CpuOf(server->pid) - cpu_before;
  const int lost = sim.lost();
  StopServer(*server);  // first, so that it does not see every node go
  const bool spare_took_it = ok && sim.first_rank(n) == victim_rank;
  std::fprintf(stderr,
               "%d/%d nodes hold generation 2 %.3f s after the loss; the spare has rank %d (the "
               "lost node's: %d); scheduler CPU %.3f s\n",
               sim.starts(2), n, recovery_s, sim.first_rank(n), victim_rank, cpu.total());
  sim.CloseAll();
  guard.reset();
  io.stop();
  io_thread.join();
  std::printf(
      "{\"nodes\": %d, \"spares\": %d, \"formed_s\": %.4f, \"recovery_s\": %.4f, "
      "\"recovery_scheduler_cpu_s\": %.4f, \"spare_took_the_place\": %s, \"lost\": %d}\n",
      n, params.spares, formed_s, ok ? recovery_s : -1.0, cpu.total(),
      spare_took_it ? "true" : "false", lost);
  return spare_took_it && lost == 0 ? 0 : 1;
}

constexpr char kUsage[] =
    "usage: gangrun-bench recovery --nodes N [--spares S] [--node_timeout T] "
    "[--heartbeat_interval H]\n";

}  // namespace

int RecoveryMain(const std::vector<std::string>& args, const std::string& self) {
  Params params;
  const Flags flags = {
      {"--nodes", IntFlag(params.nodes, 2)},
      {"--spares", IntFlag(params.spares, 1)},
      {"--node_timeout", DoubleFlag(params.node_timeout, 0.1)},
      {"--heartbeat_interval", DoubleFlag(params.heartbeat_interval, 0.01)},
  };
  if (auto code = ParseFlags(args, kUsage, flags)) return *code;
  return Recovery(params, self);
}

}  // namespace gangrun::bench
