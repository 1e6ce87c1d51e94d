// gangrun-bench rendezvous --nodes N --heartbeat_interval S --duration D [--transport T]
//                          [--nodes_per_channel K] [--node_timeout T] [--store URL]
//                          [--open_batch B]
//
// Starts a real scheduler (its own process, so its CPU can be measured alone), then N
// simulated nodes in this process, each a real node session on its own TCP connection:
// --transport session (the default, what a plaintext job uses: node/tcp_link.h) or grpc (the
// gRPC stream of jobs with TLS, here without TLS; --nodes_per_channel K > 1 lets K nodes
// share a channel). Measures:
//   ready_s: from the first join to the moment every node holds its rank assignment;
//   scheduler_cpu_s: the scheduler process's CPU time (utime+stime) over the same span;
//   heartbeat_cpu_core_fraction: the scheduler's CPU time per wall second while every node
//     sends a heartbeat each S seconds for D seconds.
// Each simulated node keeps its connection alive as a real one does for --node_timeout T
// (default 5 s, the product's) and heartbeat interval S: a ping every S (a session ping, or
// an HTTP/2 ping that gRPC's transport answers), which the scheduler reads as a heartbeat on
// the connection, and a Heartbeat message as often as the scheduler's HeartbeatPolicy asks
// (scheduler/liveness.h).
// The scheduler runs with the same node timeout; a node it loses is counted in "lost".
// --store etcd://HOST:PORT: the scheduler first wins a run's key in etcd and writes the job's
// record at each generation, as a launcher with --store does (README "A store of record").
// --open_batch B: the simulated nodes open B sessions per turn of their loop, so that they
// answer the scheduler's challenges between openings as independent hosts would (default 0:
// every session in one turn, the nodes' thread answering nothing until all have connected).
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
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "bench/sim_cluster.h"
#include "common/clock.h"
#include "common/logging.h"
#include "node/grpc_link.h"
#include "node/session_link.h"
#include "node/tcp_link.h"
#include "rpc/channel.h"
#include "rpc/process.h"
#include "rpc/session_auth.h"
#include "scheduler/scheduler.h"

namespace gangrun::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Params {
  int nodes = 1000;
  double heartbeat_interval = 1.0;
  double duration = 10.0;
  int per_channel = 1;
  double node_timeout = 5.0;
  int open_batch = 0;  // --open_batch: sessions opened per turn of the nodes' loop (0: all)
  bool grpc = false;   // --transport grpc
  std::string store;   // --store etcd://...: the scheduler keeps the job's record there
  // --token: the job's token, set on the scheduler and every node (session transport): a
  // random one unless given; "none" for a job without one.
  std::string token = absl::BytesToHexString(rpc::RandomBytes(16));
};

int Rendezvous(const Params& params, const std::string& self) {
  const int nodes = params.nodes;
  const int per_channel = params.per_channel;
  const auto node_timeout = std::chrono::duration_cast<common::Duration>(
      std::chrono::duration<double>(params.node_timeout));
  const auto heartbeat_interval = std::chrono::duration_cast<common::Duration>(
      std::chrono::duration<double>(params.heartbeat_interval));
  // How often each node sends a Heartbeat message: every tick until the scheduler's
  // HeartbeatPolicy says otherwise (node::MessageIntervalFor, node::HeartbeatMessageDue).
  std::vector<std::atomic<common::Duration::rep>> message_interval(nodes);
  if (absl::Status fits = CheckFileLimit(params.nodes); !fits.ok()) {
    std::fprintf(stderr, "%s\n", std::string(fits.message()).c_str());
    return 2;
  }
  RaiseFileLimit();
  ServeOptions serve;
  serve.world = nodes;
  serve.node_timeout = params.node_timeout;
  serve.store = params.store;
  serve.token = params.token;
  auto server = StartServer(self, serve);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  const std::string target = "127.0.0.1:" + std::to_string(server->port);

  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });
  std::atomic<int> assigned{0}, lost{0};
  std::atomic<int64_t> last_assigned_ns{0};
  std::vector<std::unique_ptr<node::RemoteSchedulerLink>> links(nodes);
  // --nodes_per_channel K: K simulated nodes share a channel (one TCP connection), each with
  // its own session stream, so that 10,000 of them fit beside the scheduler on two cores.
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  if (per_channel > 1) {
    for (int i = 0; i < nodes; i += per_channel) {
      channels.push_back(rpc::MakeChannel(target, nullptr, "", "", std::chrono::seconds(60)));
    }
  }
  const Cpu cpu_at_start = CpuOf(server->pid);
  const auto start = Clock::now();
  auto on_command = [&](int i) {
    return [&, i](const v1::NodeCommand& command) {
      if (command.has_heartbeat_policy()) {
        message_interval[i] =
            node::MessageIntervalFor(heartbeat_interval, command.heartbeat_policy()).count();
      }
      if (command.has_finished()) ++lost;  // the job ended: the scheduler lost a node
      if (command.has_start()) {
        last_assigned_ns = (Clock::now() - start).count();
        ++assigned;
      }
    };
  };
  auto join = [](int i) {
    v1::NodeEvent join;
    join.mutable_join()->set_node_name("sim" + std::to_string(i));
    join.mutable_join()->set_host_address("127.0.0." + std::to_string(1 + i % 250));
    join.mutable_join()->set_node_rank(-1);
    join.mutable_join()->set_local_worker_num(1);
    join.mutable_join()->set_free_port(20000 + i % 1000);
    return join;
  };
  // Every simulated node's session lives on the io_context, as a launcher's does: every node
  // is opened there, at once.
  common::AsioClock clock(io.get_executor());
  node::SessionLink::Options link;
  link.target = target;
  link.heartbeat_interval = heartbeat_interval;
  link.node_timeout = node_timeout;
  node::TcpSessionConnection::Options tcp;
  tcp.target = target;
  tcp.token = params.token;
  tcp.connect_timeout = node::ConnectTimeoutFor(heartbeat_interval);
  tcp.handshake_timeout = std::chrono::seconds(30);
  node::GrpcSessionConnection::Options grpc;
  grpc.target = target;
  grpc.keepalive = heartbeat_interval;
  grpc.keepalive_timeout = node_timeout + 4 * heartbeat_interval;
  std::promise<void> opened;
  const int batch = params.open_batch > 0 ? params.open_batch : nodes;
  // Opens nodes [from, from + batch), then posts the next batch behind whatever the nodes'
  // loop has to do meanwhile (the scheduler's challenges to answer).
  std::function<void(int)> open_from = [&](int from) {
    for (int i = from; i < std::min(nodes, from + batch); ++i) {
      node::ConnectionFactory factory;
      if (params.grpc) {
        if (!channels.empty()) grpc.channel = channels[i / per_channel];
        factory = node::GrpcSessionConnection::Factory(io, grpc);
      } else {
        factory = node::TcpSessionConnection::Factory(io, tcp);
      }
      links[i] = std::make_unique<node::SessionLink>(clock, link, std::move(factory));
      links[i]->Connect(on_command(i), [&](const std::string&, bool) { ++lost; });
      links[i]->Send(join(i));
    }
    if (from + batch >= nodes) return opened.set_value();
    boost::asio::post(io, [&, next = from + batch] { open_from(next); });
  };
  boost::asio::post(io, [&] { open_from(0); });
  opened.get_future().wait();
  std::fprintf(stderr, "all %d sessions opened after %.3f s\n", nodes,
               std::chrono::duration<double>(Clock::now() - start).count());
  const auto deadline = start + std::chrono::seconds(120);
  while (assigned < nodes && lost == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double ready_s = static_cast<double>(last_assigned_ns.load()) / 1e9;
  const double scheduler_cpu_s = (CpuOf(server->pid) - cpu_at_start).total();
  std::fprintf(stderr, "%d/%d nodes ready in %.3f s (%d lost)\n", assigned.load(), nodes, ready_s,
               lost.load());

  // Each node's heartbeat tick, spread evenly over each interval; a tick sends a Heartbeat
  // message when the node's message interval has passed (the pings go on their own).
  v1::NodeEvent heartbeat;
  heartbeat.set_generation(1);
  heartbeat.mutable_heartbeat();
  const Cpu cpu_before = CpuOf(server->pid);
  const auto hb_start = Clock::now();
  const auto step = std::chrono::duration<double>(params.heartbeat_interval / nodes);
  long sent = 0, ticks = 0;
  std::vector<common::TimePoint> last_sent(links.size());
  const auto end = hb_start + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(params.duration));
  auto next = hb_start;
  for (size_t i = 0; next < end; i = (i + 1) % links.size()) {
    const auto now = Clock::now();
    ++ticks;
    if (node::HeartbeatMessageDue(now, last_sent[i], heartbeat_interval,
                                  common::Duration(message_interval[i].load()))) {
      boost::asio::post(io, [&links, &heartbeat, i] { links[i]->Send(heartbeat); });
      last_sent[i] = now;
      ++sent;
    }
    next += std::chrono::duration_cast<Clock::duration>(step);
    std::this_thread::sleep_until(std::min(next, end));
  }
  const double wall = std::chrono::duration<double>(Clock::now() - hb_start).count();
  const Cpu cpu = CpuOf(server->pid) - cpu_before;
  std::fprintf(stderr,
               "%ld heartbeat ticks, %ld heartbeat messages in %.2f s; scheduler CPU %.3f s "
               "(%.3f s user, %.3f s kernel)\n",
               ticks, sent, wall, cpu.total(), cpu.user, cpu.sys);

  const int lost_in_run = lost.load();
  // The scheduler goes first, so that it does not report every simulated node as lost.
  StopServer(*server);
  // The links go on their io_context's thread, which then stops.
  std::promise<void> closed;
  boost::asio::post(io, [&] {
    links.clear();
    closed.set_value();
  });
  closed.get_future().wait();
  guard.reset();
  io.stop();
  io_thread.join();
  std::printf(
      "{\"nodes\": %d, \"ready_s\": %.4f, \"scheduler_cpu_s\": %.4f, "
      "\"heartbeat_cpu_core_fraction\": %.4f, \"heartbeat_cpu_user_fraction\": %.4f, "
      "\"lost\": %d}\n",
      nodes, assigned == nodes ? ready_s : -1.0, scheduler_cpu_s, cpu.total() / wall,
      cpu.user / wall, lost_in_run);
  return assigned == nodes && lost_in_run == 0 ? 0 : 1;
}

}  // namespace

constexpr char kUsage[] =
    "usage: gangrun-bench rendezvous --nodes N --heartbeat_interval S --duration D "
    "[--transport session|grpc] [--nodes_per_channel K] [--node_timeout T] [--store URL] "
    "[--token TOKEN|none] [--open_batch B]\n";

int RendezvousMain(const std::vector<std::string>& args, const std::string& self) {
  Params params;
  const Flags flags = {
      {"--nodes", IntFlag(params.nodes, 1)},
      {"--heartbeat_interval", DoubleFlag(params.heartbeat_interval, 0.01)},
      {"--duration", DoubleFlag(params.duration, 0.1)},
      {"--nodes_per_channel", IntFlag(params.per_channel, 1)},
      {"--node_timeout", DoubleFlag(params.node_timeout, 0.1)},
      {"--open_batch", IntFlag(params.open_batch, 1)},
      {"--store",
       [&params](const std::string& v) {
         params.store = v;
         return v.rfind("etcd://", 0) == 0 ? "" : "etcd://HOST:PORT";
       }},
      {"--token",
       [&params](const std::string& v) {
         params.token = v;
         return v.empty() ? "a token, or none" : "";
       }},
      {"--transport",
       [&params](const std::string& v) {
         params.grpc = v == "grpc";
         return v == "session" || v == "grpc" ? "" : "session or grpc";
       }},
  };
  if (auto code = ParseFlags(args, kUsage, flags)) return *code;
  if (params.per_channel > 1) params.grpc = true;  // channels are gRPC's
  if (params.token == "none") params.token.clear();
  if (params.grpc) params.token.clear();  // gRPC sessions would need call credentials here
  return Rendezvous(params, self);
}

}  // namespace gangrun::bench
