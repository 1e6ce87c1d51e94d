// gangrun-bench BENCHMARK [options]: rendezvous (formation and heartbeats of N simulated
// nodes), recovery (a lost node's place taken by a spare) or store (what a request to a job's
// store of record costs). See bench/README.md.

#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/sim_cluster.h"
#include "common/logging.h"
#include "rpc/process.h"

int main(int argc, char** argv) {
  using namespace gangrun;
  rpc::DisableDebugOnlyChecks();
  common::SetLogLevel("error");  // the simulated nodes: the results are the output
  std::vector<std::string> args(argv + 1, argv + argc);
  const std::string name = args.empty() ? "" : args[0];
  if (!args.empty()) args.erase(args.begin());
  if (name == "serve") return bench::Serve(args);
  if (name == "serve_torch_store") return bench::ServeTorchStore(args);
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return 1;
  const std::string path(self, static_cast<size_t>(n));
  try {
    if (name == "rendezvous") return bench::RendezvousMain(args, path);
    if (name == "recovery") return bench::RecoveryMain(args, path);
    if (name == "store") return bench::StoreMain(args);
    if (name == "torch_store") return bench::TorchStoreMain(args, path);
  } catch (const std::invalid_argument&) {
    std::fprintf(stderr, "gangrun-bench %s: an option's value is not a number\n", name.c_str());
    return 2;
  } catch (const std::out_of_range&) {
    std::fprintf(stderr, "gangrun-bench %s: an option's value is out of range\n", name.c_str());
    return 2;
  }
  std::fprintf(
      stderr,
      "usage: gangrun-bench rendezvous|recovery|store|torch_store [options]; gangrun-bench "
      "BENCHMARK "
      "--help for its options\n");
  return 2;
}
