// gangrun-bench rendezvous --nodes N --heartbeat_interval S --duration D
//
// Starts a real scheduler (gRPC server, its own process, so its CPU can be measured alone),
// then N simulated nodes in this process, each a real node session on its own channel and
// TCP connection. Measures:
//   ready_s: from the first join to the moment every node holds its rank assignment;
//   scheduler_cpu_s: the scheduler process's CPU time (utime+stime) over the same span;
//   heartbeat_cpu_core_fraction: the scheduler's CPU time per wall second while every node
//     sends a heartbeat each S seconds for D seconds.
// The last line printed is JSON. A benchmark, not a test.

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/logging.h"
#include "common/spawn.h"
#include "node/grpc_link.h"
#include "rpc/channel.h"
#include "scheduler/grpc_server.h"
#include "scheduler/kv_store.h"
#include "scheduler/scheduler.h"

namespace {

using namespace gangrun;
using Clock = std::chrono::steady_clock;

void RaiseFileLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// The scheduler process: listens on 127.0.0.1:0, prints the port, serves until killed.
int Serve(int world) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  RaiseFileLimit();
  common::SetLogLevel("warn");
  boost::asio::io_context io;
  common::AsioClock clock(io.get_executor());
  scheduler::Scheduler::Options options;
  options.world_size = world;
  options.cluster_timeout = std::chrono::seconds(600);
  options.node_timeout = std::chrono::seconds(600);
  scheduler::Scheduler sched(clock, options);
  scheduler::KvStore store(clock);
  auto server = scheduler::SchedulerServer::Start(io, sched, store, {"127.0.0.1:0", "", nullptr});
  if (!server.ok()) {
    std::fprintf(stderr, "cannot start the scheduler: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("%d\n", (*server)->port());
  std::fflush(stdout);
  sched.Start();
  auto guard = boost::asio::make_work_guard(io);
  io.run();
  return 0;
}

double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  unsigned long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoul(field);
    if (i == 15) stime = std::stoul(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

int Rendezvous(int nodes, double heartbeat_interval, double duration, int per_channel,
               const std::string& self) {
  RaiseFileLimit();
  int out_pipe[2];
  if (pipe(out_pipe) != 0) return 1;
  common::SpawnOptions spawn;
  spawn.exec_path = self;
  spawn.argv = {self, "serve", std::to_string(nodes)};
  spawn.env = common::CurrentEnvironment();
  spawn.fds = {{1, out_pipe[1]}};
  auto server_pid = common::Spawn(spawn);
  close(out_pipe[1]);
  if (!server_pid.ok()) return 1;
  FILE* out = fdopen(out_pipe[0], "r");
  int port = 0;
  if (std::fscanf(out, "%d", &port) != 1) return 1;
  const std::string target = "127.0.0.1:" + std::to_string(port);

  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });
  std::atomic<int> assigned{0}, lost{0};
  std::atomic<int64_t> last_assigned_ns{0};
  std::vector<std::unique_ptr<node::GrpcSchedulerLink>> links(nodes);
  // --nodes_per_channel K: K simulated nodes share a channel (one TCP connection), each with
  // its own session stream, so that 10,000 of them fit beside the scheduler on two cores.
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  if (per_channel > 1) {
    for (int i = 0; i < nodes; i += per_channel) {
      channels.push_back(rpc::MakeChannel(target, nullptr, "", std::chrono::seconds(60)));
    }
  }
  const double cpu_at_start = CpuSeconds(*server_pid);
  const auto start = Clock::now();
  // Nodes join concurrently, as real hosts would; several threads open the sessions.
  const int openers = 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < openers; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < nodes; i += openers) {
        node::GrpcSchedulerLink::Options options;
        options.target = target;
        options.keepalive = std::chrono::seconds(60);
        if (!channels.empty()) options.channel = channels[i / per_channel];
        links[i] = std::make_unique<node::GrpcSchedulerLink>(io, options);
        links[i]->Connect(
            [&](const v1::NodeCommand& command) {
              if (command.has_start()) {
                last_assigned_ns = (Clock::now() - start).count();
                ++assigned;
              }
            },
            [&](const std::string&, bool) { ++lost; });
        v1::NodeEvent join;
        join.mutable_join()->set_node_name("sim" + std::to_string(i));
        join.mutable_join()->set_host_address("127.0.0." + std::to_string(1 + i % 250));
        join.mutable_join()->set_node_rank(-1);
        join.mutable_join()->set_local_worker_num(1);
        join.mutable_join()->set_free_port(20000 + i % 1000);
        links[i]->Send(join);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::fprintf(stderr, "all %d sessions opened after %.3f s\n", nodes,
               std::chrono::duration<double>(Clock::now() - start).count());
  const auto deadline = start + std::chrono::seconds(120);
  while (assigned < nodes && lost == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double ready_s = static_cast<double>(last_assigned_ns.load()) / 1e9;
  const double scheduler_cpu_s = CpuSeconds(*server_pid) - cpu_at_start;
  std::fprintf(stderr, "%d/%d nodes ready in %.3f s (%d lost)\n", assigned.load(), nodes, ready_s,
               lost.load());

  // Heartbeats, spread evenly over each interval.
  v1::NodeEvent heartbeat;
  heartbeat.set_generation(1);
  heartbeat.mutable_heartbeat();
  const double cpu_before = CpuSeconds(*server_pid);
  const auto hb_start = Clock::now();
  const auto step = std::chrono::duration<double>(heartbeat_interval / nodes);
  long sent = 0;
  const auto end = hb_start + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(duration));
  auto next = hb_start;
  for (size_t i = 0; next < end; i = (i + 1) % links.size()) {
    links[i]->Send(heartbeat);
    ++sent;
    next += std::chrono::duration_cast<Clock::duration>(step);
    std::this_thread::sleep_until(std::min(next, end));
  }
  const double wall = std::chrono::duration<double>(Clock::now() - hb_start).count();
  const double cpu = CpuSeconds(*server_pid) - cpu_before;
  std::fprintf(stderr, "%ld heartbeats in %.2f s; scheduler CPU %.3f s\n", sent, wall, cpu);

  links.clear();
  guard.reset();
  io.stop();
  io_thread.join();
  kill(*server_pid, SIGKILL);
  waitpid(*server_pid, nullptr, 0);
  std::printf(
      "{\"nodes\": %d, \"ready_s\": %.4f, \"scheduler_cpu_s\": %.4f, "
      "\"heartbeat_cpu_core_fraction\": %.4f}\n",
      nodes, assigned == nodes ? ready_s : -1.0, scheduler_cpu_s, cpu / wall);
  return assigned == nodes ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  if (args.size() == 3 && args[1] == "serve") return Serve(std::stoi(args[2]));
  int nodes = 1000, per_channel = 1;
  double interval = 1.0, duration = 10.0;
  if (args.size() < 2 || args[1] != "rendezvous") {
    std::fprintf(stderr,
                 "usage: gangrun-bench rendezvous --nodes N --heartbeat_interval S --duration D "
                 "[--nodes_per_channel K]\n");
    return 2;
  }
  for (size_t i = 2; i + 1 < args.size(); i += 2) {
    if (args[i] == "--nodes")
      nodes = std::stoi(args[i + 1]);
    else if (args[i] == "--heartbeat_interval")
      interval = std::stod(args[i + 1]);
    else if (args[i] == "--duration")
      duration = std::stod(args[i + 1]);
    else if (args[i] == "--nodes_per_channel")
      per_channel = std::max(1, std::stoi(args[i + 1]));
    else {
      std::fprintf(stderr, "unknown option %s\n", args[i].c_str());
      return 2;
    }
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return 1;
  return Rendezvous(nodes, interval, duration, per_channel,
                    std::string(self, static_cast<size_t>(n)));
}
