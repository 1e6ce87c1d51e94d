#pragma once
// NUMA binding: torchrun's --numa-binding and msrun's --bind_numa. Each local rank's CPUs
// (sched_setaffinity) and memory (set_mempolicy MPOL_BIND) go to one NUMA node — its
// accelerator's where the topology says which (a GPU's PCI device names its node; local rank
// i is GPU i, as torch assumes), else the rank's share of the nodes (rank i of n on node
// i * nodes / n). The modes, as torch's:
//   node         every CPU of the rank's node
//   socket       every CPU of the socket (package) the node is on, memory on its nodes
//   exclusive    the node's CPUs split into disjoint equal parts among the ranks on it
//   core-complex the CPUs that share one L3 cache within the node, one complex per rank on
//                it (round-robin when there are more ranks than complexes)
// A host with one NUMA node has nothing to bind: the launcher says so once and binds nothing.
//
// The topology is read from sysfs (/sys/devices/system/node, /sys/devices/system/cpu,
// /sys/bus/pci/devices) under a root that tests replace with a tree of their own.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gangrun::launcher {

enum class NumaMode { kNone, kNode, kSocket, kExclusive, kCoreComplex };

// "node", "socket", "exclusive", "core-complex"; InvalidArgument otherwise.
absl::StatusOr<NumaMode> ParseNumaMode(const std::string& text);

struct NumaTopology {
  std::map<int, std::vector<int>> node_cpus;  // NUMA node -> its CPUs
  std::map<int, int> cpu_package;             // CPU -> physical package (socket)
  std::map<int, int> cpu_l3;                  // CPU -> the first CPU of its L3 group
  std::vector<int> gpu_nodes;                 // NVIDIA GPU i (PCI order) -> NUMA node
};

NumaTopology ReadNumaTopology(const std::string& sys_root = "/sys");

// --numa_binding's mode ("" or anything unparsable: kNone; validation refused those).
NumaMode NumaModeOf(const std::string& text);

struct NumaBinding {
  std::vector<int> cpus;
  std::vector<int> memory_nodes;
};

// Local rank `local_rank` of `local_worker_num`; nullopt when there is nothing to bind
// (kNone, or one NUMA node).
std::optional<NumaBinding> NumaBindingFor(const NumaTopology& topology, NumaMode mode,
                                          int local_rank, int local_worker_num);

// msrun's --bind_numa: False, True (every local rank's CPUs and memory on its NUMA node, as
// --numa_binding node), or a JSON dict (or a .json file holding one) with
//   bind_config: {bind_cpu_mode: numa|cpu|none, bind_memory_mode: numa|none}
//   bind_cpu:    {"device0": ["0-9"], ...}   (bind_cpu_mode cpu: device i's CPU ranges)
//   bind_memory: {"device0": [0], ...}       (device i's memory nodes; default: its NUMA node)
// A file's path is exported to the workers as MSRUN_BIND_FILE.
struct BindNuma {
  enum class Mode { kOff, kAuto, kConfig } mode = Mode::kOff;
  std::string cpu_mode = "numa";
  std::string memory_mode = "numa";
  std::map<std::string, std::vector<int>> bind_cpu;
  std::map<std::string, std::vector<int>> bind_memory;
  std::string file;  // the .json file it came from ("" = none)
  std::string text;  // as given
};
// InvalidArgument says what is wrong.
absl::StatusOr<BindNuma> ParseBindNuma(const std::string& text);
std::optional<NumaBinding> BindNumaFor(const BindNuma& bind, const NumaTopology& topology,
                                       int local_rank, int local_worker_num);

}  // namespace gangrun::launcher
