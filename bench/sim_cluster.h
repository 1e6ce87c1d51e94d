#pragma once
// What gangrun-bench's benchmarks share: a real scheduler in a process of its own (so that its
// CPU can be measured alone), many simulated nodes in this one, each a real node session on its
// own TCP connection, and the scheduler's CPU time. Benchmarks, not tests.

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gangrun::bench {

// Raises this process's soft file limit to its hard one.
void RaiseFileLimit();
// One line saying what to do when the hard file limit cannot hold `connections` sockets.
absl::Status CheckFileLimit(int connections);

// A process's CPU time in user space and in the kernel, in seconds.
struct Cpu {
  double user = 0, sys = 0;
  double total() const { return user + sys; }
  Cpu operator-(const Cpu& other) const { return {user - other.user, sys - other.sys}; }
};
Cpu CpuOf(pid_t pid);

// The scheduler process's settings, as `gangrun-bench serve` takes them.
struct ServeOptions {
  int world = 1;
  double node_timeout = 5;
  int spares = 0;
  int max_restarts = 0;
  // A store of record (etcd://...; "" = none): the scheduler campaigns for a run's key and
  // writes the job's record at each generation, as a launcher with --store does.
  std::string store;
  std::string token;  // the job's token ("" = none), given to the process in its environment
};
// `gangrun-bench serve WORLD NODE_TIMEOUT SPARES MAX_RESTARTS [STORE]`: listens on 127.0.0.1:0,
// prints the port, serves until killed (or its parent dies).
int Serve(const std::vector<std::string>& args);

struct Server {
  pid_t pid = -1;
  int port = 0;
};
// Starts `self serve ...` and reads its port.
absl::StatusOr<Server> StartServer(const std::string& self, const ServeOptions& options);
// Starts `argv` (argv[0] a path) with `env`, which prints the port it listens on first.
absl::StatusOr<Server> StartPortPrinter(std::vector<std::string> argv,
                                        std::vector<std::string> env);
// Kills and reaps it.
void StopServer(const Server& server);

// A benchmark's "--name value" options: each `flags` entry takes its value, or says why it
// cannot (what it takes). The exit code to end with (0 after --help, 2 for bad options, one
// line and `usage` printed), or nullopt to run.
using Flags = std::map<std::string, std::function<std::string(const std::string&)>>;
std::optional<int> ParseFlags(const std::vector<std::string>& args, const char* usage,
                              const Flags& flags);
// A flag that reads a number of at least `least` into `field`; anything else (not wholly a
// number, out of range, below `least`) is refused.
std::function<std::string(const std::string&)> IntFlag(int& field, int least);
std::function<std::string(const std::string&)> DoubleFlag(double& field, double least);

// The benchmarks (argv without the program and the benchmark's name); exit code.
int RendezvousMain(const std::vector<std::string>& args, const std::string& self);
int RecoveryMain(const std::vector<std::string>& args, const std::string& self);

// gangrun-bench store (bench/store.cc).
int StoreMain(const std::vector<std::string>& args);
// gangrun-bench torch_store (bench/torch_store.cc), and the store process it starts.
int TorchStoreMain(const std::vector<std::string>& args, const std::string& self);
int ServeTorchStore(const std::vector<std::string>& args);

}  // namespace gangrun::bench
