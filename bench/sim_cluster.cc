#include "bench/sim_cluster.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "common/clock.h"
#include "common/event_loop.h"
#include "common/logging.h"
#include "common/spawn.h"
#include "common/status.h"
#include "scheduler/grpc_server.h"
#include "scheduler/kv_store.h"
#include "scheduler/scheduler.h"
#include "store/run_store.h"
#include "store/worker.h"

namespace gangrun::bench {

void RaiseFileLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

absl::Status CheckFileLimit(int connections) {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return absl::OkStatus();
  const rlim_t needed = static_cast<rlim_t>(connections) + 64;  // + the processes' own files
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed) {
    return absl::ResourceExhaustedError(
        "gangrun-bench: " + std::to_string(connections) + " connections need about " +
        std::to_string(needed) + " open files in the benchmark and in its scheduler, but the " +
        "hard file limit is " + std::to_string(limit.rlim_max) + ", enough for " +
        std::to_string(limit.rlim_max > 64 ? limit.rlim_max - 64 : 0) +
        " nodes; raise it (ulimit -Hn as root, LimitNOFILE= in a unit) or use fewer nodes");
  }
  return absl::OkStatus();
}

Cpu CpuOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 > line.size()) return {};  // it is gone
  std::istringstream rest(line.substr(paren + 2));
  std::string field;
  unsigned long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoul(field);
    if (i == 15) stime = std::stoul(field);
  }
  const auto tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  return {static_cast<double>(utime) / tick, static_cast<double>(stime) / tick};
}

// The scheduler's part of a job with a store (launcher/store_role.cc does the same for a
// launcher): a lease, a won campaign, and every record written with the term's fence.
struct BenchStore {
  std::unique_ptr<store::RunStore> run;
  std::unique_ptr<store::LeaseKeeper> keeper;
  std::unique_ptr<store::Worker> worker;
  store::Record record;
  int64_t term = 0;
};

absl::StatusOr<std::unique_ptr<BenchStore>> OpenStore(const std::string& url, double node_timeout,
                                                      scheduler::Scheduler::Options& options) {
  ASSIGN_OR_RETURN(store::StoreConfig config, store::ParseStoreUrl(url));
  ASSIGN_OR_RETURN(auto client, store::EtcdClient::Connect(config));
  auto bench = std::make_unique<BenchStore>();
  bench->run =
      std::make_unique<store::RunStore>(std::move(client), "bench-" + std::to_string(getpid()));
  const int64_t ttl = store::LeaseSecondsFor(
      std::chrono::duration_cast<common::Duration>(std::chrono::duration<double>(node_timeout)));
  ASSIGN_OR_RETURN(int64_t lease, bench->run->client().GrantLease(ttl));
  store::SchedulerInfo me;
  me.host = "bench";
  me.address = "127.0.0.1:0";
  me.pid = static_cast<int>(getpid());
  ASSIGN_OR_RETURN(auto campaign, bench->run->Run(me, lease));
  if (!campaign.won) return absl::FailedPreconditionError("the bench's run key is taken");
  bench->term = campaign.scheduler.term;
  bench->keeper = std::make_unique<store::LeaseKeeper>(
      bench->run->client(), lease, std::chrono::seconds(ttl), [](const std::string&) {});
  bench->worker = std::make_unique<store::Worker>();
  options.may_start = [keeper = bench->keeper.get()] { return keeper->Valid(); };
  return bench;
}

// The job's token, for the scheduler process (not on its command line).
constexpr char kTokenVariable[] = "GANGRUN_BENCH_TOKEN";

int Serve(const std::vector<std::string>& args) {
  if (args.size() != 4 && args.size() != 5) return 2;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  RaiseFileLimit();
  common::SetLogLevel("warn");
  boost::asio::io_context io;
  common::AsioClock clock(io.get_executor());
  scheduler::Scheduler::Options options;
  options.world_size = std::stoi(args[0]);
  options.cluster_timeout = std::chrono::seconds(600);
  options.node_timeout = std::chrono::duration_cast<common::Duration>(
      std::chrono::duration<double>(std::stod(args[1])));
  options.spare_nodes = std::stoi(args[2]);
  options.max_restarts = std::stoi(args[3]);
  std::unique_ptr<BenchStore> bench_store;
  if (args.size() == 5) {
    auto opened = OpenStore(args[4], std::stod(args[1]), options);
    if (!opened.ok()) {
      std::fprintf(stderr, "%s\n", std::string(opened.status().message()).c_str());
      return 1;
    }
    bench_store = std::move(*opened);
  }
  scheduler::Scheduler sched(clock, options);
  if (bench_store) {
    sched.SetOnRecord([b = bench_store.get()](nlohmann::json record) {
      record["term"] = b->term;
      b->worker->Post([b, record = std::move(record)] {
        b->record.value = record;
        auto written = b->run->WriteRecord(b->term, b->record);
        if (!written.ok() || !*written) std::fprintf(stderr, "the record was not written\n");
      });
    });
  }
  scheduler::KvStore store(clock);
  const char* token = std::getenv(kTokenVariable);
  auto server = scheduler::SchedulerServer::Start(
      io, sched, store, {"127.0.0.1:0", token != nullptr ? token : "", nullptr, ""});
  if (!server.ok()) {
    std::fprintf(stderr, "cannot start the scheduler: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("%d\n", (*server)->port());
  std::fflush(stdout);
  sched.Start();
  auto guard = boost::asio::make_work_guard(io);
  common::RunEventLoop(io, [&server] { return (*server)->Busy(); });  // as a launcher does
  return 0;
}

absl::StatusOr<Server> StartServer(const std::string& self, const ServeOptions& options) {
  std::vector<std::string> argv = {self,
                                   "serve",
                                   std::to_string(options.world),
                                   std::to_string(options.node_timeout),
                                   std::to_string(options.spares),
                                   std::to_string(options.max_restarts)};
  if (!options.store.empty()) argv.push_back(options.store);
  std::vector<std::string> env = common::CurrentEnvironment();
  if (!options.token.empty()) env.push_back(std::string(kTokenVariable) + "=" + options.token);
  return StartPortPrinter(std::move(argv), std::move(env));
}

absl::StatusOr<Server> StartPortPrinter(std::vector<std::string> argv,
                                        std::vector<std::string> env) {
  int out_pipe[2];
  if (pipe(out_pipe) != 0) return absl::InternalError("pipe failed");
  common::SpawnOptions spawn;
  spawn.exec_path = argv[0];
  spawn.argv = std::move(argv);
  spawn.env = std::move(env);
  spawn.fds = {{1, out_pipe[1]}};
  auto pid = common::Spawn(spawn);
  close(out_pipe[1]);
  if (!pid.ok()) {
    close(out_pipe[0]);
    return pid.status();
  }
  FILE* out = fdopen(out_pipe[0], "r");
  int port = 0;
  const bool read = std::fscanf(out, "%d", &port) == 1;
  std::fclose(out);
  if (!read) {
    StopServer({*pid, 0});
    return absl::UnavailableError(spawn.argv[0] + " did not start");
  }
  return Server{*pid, port};
}

std::optional<int> ParseFlags(const std::vector<std::string>& args, const char* usage,
                              const Flags& flags) {
  for (size_t i = 0; i < args.size(); i += 2) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::fputs(usage, stdout);
      return 0;
    }
    if (i + 1 >= args.size()) {
      std::fprintf(stderr, "%s needs a value\n%s", args[i].c_str(), usage);
      return 2;
    }
    auto flag = flags.find(args[i]);
    if (flag == flags.end()) {
      std::fprintf(stderr, "unknown option %s\n%s", args[i].c_str(), usage);
      return 2;
    }
    if (const std::string wanted = flag->second(args[i + 1]); !wanted.empty()) {
      std::fprintf(stderr, "%s: '%s' is not a value it takes (%s)\n%s", args[i].c_str(),
                   args[i + 1].c_str(), wanted.c_str(), usage);
      return 2;
    }
  }
  return std::nullopt;
}

// Whole strings only ("12abc" is not 12), in range.
template <typename Number>
static bool ParseNumber(const std::string& v, Number& out) {
  if (v.empty()) return false;
  size_t used = 0;
  try {
    if constexpr (std::is_same_v<Number, int>) {
      out = std::stoi(v, &used);
    } else {
      out = std::stod(v, &used);
      if (!std::isfinite(out)) return false;
    }
  } catch (const std::logic_error&) {  // invalid_argument, out_of_range
    return false;
  }
  return used == v.size();
}

std::function<std::string(const std::string&)> IntFlag(int& field, int least) {
  return [&field, least](const std::string& v) -> std::string {
    int value = 0;
    if (!ParseNumber(v, value) || value < least) {
      return "an integer of at least " + std::to_string(least);
    }
    field = value;
    return "";
  };
}

std::function<std::string(const std::string&)> DoubleFlag(double& field, double least) {
  return [&field, least](const std::string& v) -> std::string {
    double value = 0;
    if (!ParseNumber(v, value) || value < least) {
      char text[64];
      std::snprintf(text, sizeof(text), "a number of at least %g", least);
      return text;
    }
    field = value;
    return "";
  };
}

void StopServer(const Server& server) {
  kill(server.pid, SIGKILL);
  waitpid(server.pid, nullptr, 0);
}

}  // namespace gangrun::bench
