// gangrun-bench torch_store --ranks N [--server gangrun|torch]
//
// N simulated ranks through the init pattern of a torch job against a torch store in a process
// of its own: gangrun's (scheduler/torch_store.h, started as `gangrun-bench serve_torch_store`)
// or torch's own TCPStore server (Debian's python3-torch, `TCPStore(is_master=True)` in a small
// Python host). Each rank, on a connection of its own, speaks torch 1.x's protocol (the one both
// servers speak): add("init/", 1) as torch's client does at connection; set its own key; wait for
// rank 0's key and get it (as NCCL's unique id is passed); add 1 to the barrier's counter (the
// last arrival sets the barrier's key) and wait for the barrier's key. Reported: the time from
// the first connect until every rank is past the barrier, and the store process's CPU. One
// thread drives every rank with epoll. The last line printed is JSON. A benchmark, not a test.

#include "scheduler/torch_store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/sim_cluster.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/spawn.h"
#include "scheduler/kv_store.h"

namespace gangrun::bench {
namespace {

using Clock = std::chrono::steady_clock;

// torch 1.x's query types (scheduler/torch_store_protocol.h).
constexpr char kSet = 0, kGet = 2, kAdd = 3, kWait = 5;
constexpr size_t kValueBytes = 32;  // a rank's address, as gloo and NCCL store them

std::string U64(uint64_t value) {
  std::string out(8, '\0');
  std::memcpy(out.data(), &value, 8);
  return out;
}
std::string Str(const std::string& text) { return U64(text.size()) + text; }

// Torch's own server, for comparison: Debian's torch, its file limit raised.
constexpr char kTorchHost[] = R"PY(
import resource, sys, time, datetime
import torch.distributed as dist
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
store = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=600),
                      wait_for_workers=False)
print(store.port, flush=True)
while True:
    time.sleep(3600)
)PY";

struct Rank {
  int fd = -1;
  int step = 0;
  size_t expect = 0;  // bytes of the answer awaited
  std::string got;
};

class Ranks {
 public:
  Ranks(int n, int port) : ranks_(static_cast<size_t>(n)), port_(port) {}

  // Drives every rank to the end; false (with a line) when one fails.
  bool Run() {
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (!Connect(r)) return false;
    }
    std::vector<epoll_event> events(1024);
    while (done_ < ranks_.size()) {
      const int n = epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), 30000);
      if (n <= 0) {
        std::fprintf(stderr, "no answer within 30 s (%zu of %zu ranks past the barrier)\n", done_,
                     ranks_.size());
        return false;
      }
      for (int i = 0; i < n; ++i) {
        if (!OnEvent(events[i].data.u64, events[i].events)) return false;
      }
    }
    for (auto& rank : ranks_) close(rank.fd);
    close(epoll_);
    return true;
  }

 private:
  bool Connect(size_t r) {
    Rank& rank = ranks_[r];
    rank.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(rank.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port_));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(rank.fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 &&
        errno != EINPROGRESS) {
      std::fprintf(stderr, "connect: %s\n", std::strerror(errno));
      return false;
    }
    epoll_event event{};
    event.events = EPOLLOUT | EPOLLIN;
    event.data.u64 = r;
    return epoll_ctl(epoll_, EPOLL_CTL_ADD, rank.fd, &event) == 0;
  }

  bool Send(Rank& rank, const std::string& bytes, size_t expect) {
    // Small queries into an empty socket buffer: sent whole or the benchmark stops.
    if (send(rank.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(bytes.size())) {
      std::fprintf(stderr, "send: %s\n", std::strerror(errno));
      return false;
    }
    rank.expect = expect;
    rank.got.clear();
    return true;
  }

  bool OnEvent(uint64_t r, uint32_t events) {
    Rank& rank = ranks_[r];
    if (rank.step == 0 && (events & EPOLLOUT)) {  // connected: torch's client adds to "init/"
      epoll_event event{};
      event.events = EPOLLIN;
      event.data.u64 = r;
      epoll_ctl(epoll_, EPOLL_CTL_MOD, rank.fd, &event);
      rank.step = 1;
      return Send(rank, std::string(1, kAdd) + Str("init/") + U64(1), 8);
    }
    if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return true;
    char buffer[256];
    const ssize_t n = recv(rank.fd, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      if (n < 0 && errno == EAGAIN) return true;
      std::fprintf(stderr, "rank %lu: the store closed the connection at step %d\n",
                   static_cast<unsigned long>(r), rank.step);
      return false;
    }
    rank.got.append(buffer, static_cast<size_t>(n));
    if (rank.got.size() < rank.expect) return true;
    const std::string own = "/rank_" + std::to_string(r);
    switch (rank.step++) {
      case 1:  // set its key, wait for rank 0's
        return Send(rank,
                    std::string(1, kSet) + Str(own) + Str(std::string(kValueBytes, 'a')) +
                        std::string(1, kWait) + U64(1) + Str("/rank_0"),
                    1);
      case 2:
        return Send(rank, std::string(1, kGet) + Str("/rank_0"), 8 + kValueBytes);
      case 3:
        return Send(rank, std::string(1, kAdd) + Str("/barrier") + U64(1), 8);
      case 4: {
        uint64_t arrived = 0;
        std::memcpy(&arrived, rank.got.data(), 8);
        std::string query;
        if (arrived == ranks_.size())
          query = std::string(1, kSet) + Str("/barrier/done") + Str("1");
        return Send(rank, query + std::string(1, kWait) + U64(1) + Str("/barrier/done"), 1);
      }
      default:
        ++done_;
        return true;
    }
  }

  std::vector<Rank> ranks_;
  int port_;
  int epoll_ = -1;
  size_t done_ = 0;
};

}  // namespace

int ServeTorchStore(const std::vector<std::string>& args) {
  if (!args.empty()) return 2;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  RaiseFileLimit();
  common::SetLogLevel("warn");
  boost::asio::io_context io;
  common::AsioClock clock(io.get_executor());
  scheduler::KvStore store(clock);
  auto server = scheduler::TorchStore::Start(io, clock, store, {"127.0.0.1"});
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("%d\n", (*server)->port());
  std::fflush(stdout);
  auto guard = boost::asio::make_work_guard(io);
  io.run();
  return 0;
}

int TorchStoreMain(const std::vector<std::string>& args, const std::string& self) {
  int ranks = 1000;
  std::string which = "gangrun";
  const Flags flags = {
      {"--ranks", IntFlag(ranks, 1)},
      {"--server",
       [&which](const std::string& v) {
         which = v;
         return v == "gangrun" || v == "torch" ? "" : "gangrun or torch";
       }},
  };
  if (auto code = ParseFlags(
          args, "usage: gangrun-bench torch_store --ranks N [--server gangrun|torch]\n", flags)) {
    return *code;
  }
  RaiseFileLimit();
  if (absl::Status fits = CheckFileLimit(ranks); !fits.ok()) {
    std::fprintf(stderr, "%s\n", std::string(fits.message()).c_str());
    return 2;
  }
  auto server =
      which == "gangrun"
          ? StartPortPrinter({self, "serve_torch_store"}, common::CurrentEnvironment())
          : StartPortPrinter({"/usr/bin/python3", "-c", kTorchHost}, common::CurrentEnvironment());
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  const Cpu before = CpuOf(server->pid);
  const auto start = Clock::now();
  Ranks simulated(ranks, server->port);
  const bool ok = simulated.Run();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const Cpu used = CpuOf(server->pid) - before;
  StopServer(*server);
  if (!ok) return 1;
  std::printf(
      "{\"server\": \"%s\", \"ranks\": %d, \"past_barrier_s\": %.3f, \"store_cpu_s\": %.3f}\n",
      which.c_str(), ranks, seconds, used.total());
  return 0;
}

}  // namespace gangrun::bench
