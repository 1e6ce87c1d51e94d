#include "launcher/numa.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace gangrun::launcher {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return std::string(absl::StripAsciiWhitespace(text));
}

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}
std::vector<int> ParseCpuList(const std::string& text) {
  std::vector<int> cpus;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> range = absl::StrSplit(item, '-');
    int first = 0, last = 0;
    if (!absl::SimpleAtoi(range[0], &first)) continue;
    last = first;
    if (range.size() == 2 && !absl::SimpleAtoi(range[1], &last)) continue;
    for (int cpu = first; cpu <= last && cpu - first < 4096; ++cpu) cpus.push_back(cpu);
    // Bounded whatever the text asks (a hostile --bind_numa list): more than any machine has.
    if (cpus.size() > (size_t{1} << 16)) break;
  }
  return cpus;
}

// Entries of a directory whose names start with `prefix` followed by a number, by number.
std::map<int, std::string> Numbered(const std::string& dir, const std::string& prefix) {
  std::map<int, std::string> found;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return found;
  while (dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    int number = 0;
    if (name.rfind(prefix, 0) == 0 && absl::SimpleAtoi(name.substr(prefix.size()), &number)) {
      found[number] = dir + "/" + name;
    }
  }
  closedir(d);
  return found;
}

// NVIDIA display or 3D controllers, by PCI address, and the NUMA node each is on.
std::vector<int> GpuNodes(const std::string& sys_root) {
  std::map<std::string, int> gpus;
  const std::string dir = sys_root + "/bus/pci/devices";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return {};
  while (dirent* entry = readdir(d)) {
    const std::string device = dir + "/" + entry->d_name;
    if (entry->d_name[0] == '.' || ReadText(device + "/vendor") != "0x10de") continue;
    const std::string klass = ReadText(device + "/class");
    if (klass.rfind("0x0300", 0) != 0 && klass.rfind("0x0302", 0) != 0) continue;
    int node = -1;
    if (!absl::SimpleAtoi(ReadText(device + "/numa_node"), &node) || node < 0) continue;
    gpus[entry->d_name] = node;
  }
  closedir(d);
  std::vector<int> nodes;
  for (const auto& [address, node] : gpus) nodes.push_back(node);
  return nodes;
}

std::vector<int> Slice(const std::vector<int>& cpus, int part, int parts) {
  const size_t begin = cpus.size() * part / parts, end = cpus.size() * (part + 1) / parts;
  return std::vector<int>(cpus.begin() + begin, cpus.begin() + std::max(begin + 1, end));
}

}  // namespace

absl::StatusOr<NumaMode> ParseNumaMode(const std::string& text) {
  if (text == "node") return NumaMode::kNode;
  if (text == "socket") return NumaMode::kSocket;
  if (text == "exclusive") return NumaMode::kExclusive;
  if (text == "core-complex") return NumaMode::kCoreComplex;
  return absl::InvalidArgumentError("expected node, socket, exclusive or core-complex");
}

namespace {

// What --bind_numa may be, whoever wrote it (its JSON reaches the launcher's parser before
// anything checks it): text or file at most kMaxBindNumaBytes, nested at most
// kMaxBindNumaDepth deep (the parser and its error messages recurse), ids 0..kMaxBindNumaId
// (a CPU or memory node number; past it an id was a mistake, not a machine), at most
// kMaxBindNumaIds of them in all.
constexpr size_t kMaxBindNumaBytes = 1 << 20;
constexpr int kMaxBindNumaDepth = 8;
constexpr int kMaxBindNumaId = 65535;
constexpr size_t kMaxBindNumaIds = 1 << 16;

// The deepest nesting of [ and { outside strings, counted without a parser.
int JsonDepth(const std::string& text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// A .json file's text: a regular file (not a FIFO, a device, a directory, whatever a link
// points at) of at most kMaxBindNumaBytes.
absl::StatusOr<std::string> ReadBindFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return absl::InvalidArgumentError("a readable .json file");
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError("a .json file that is a regular file");
  }
  if (st.st_size > static_cast<off_t>(kMaxBindNumaBytes)) {
    close(fd);
    return absl::InvalidArgumentError("a .json file of at most 1 MiB");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  const ssize_t n = text.empty() ? 0 : pread(fd, text.data(), text.size(), 0);
  close(fd);
  if (n < 0) return absl::InvalidArgumentError("a readable .json file");
  text.resize(static_cast<size_t>(n));
  return text;
}

// "numa", the default, or the string `value` holds; anything else is refused.
absl::StatusOr<std::string> Mode(const nlohmann::json& config, const char* name) {
  auto it = config.find(name);
  if (it == config.end()) return std::string("numa");
  if (!it->is_string()) return absl::InvalidArgumentError(std::string(name) + " as a string");
  return it->get<std::string>();
}

// At most 60 characters of `value`, for messages.
std::string Shown(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

absl::Status ReadIntLists(const nlohmann::json& value, const char* name,
                          std::map<std::string, std::vector<int>>& out, size_t& ids) {
  if (value.is_null()) return absl::OkStatus();
  if (!value.is_object()) return absl::InvalidArgumentError(std::string(name) + " as a dict");
  for (const auto& [key, items] : value.items()) {
    if (!items.is_array()) {
      return absl::InvalidArgumentError(std::string(name) + "." + key + " as a list");
    }
    std::vector<int>& list = out[key];
    for (const auto& item : items) {
      std::vector<int> found;
      if (item.is_number_integer()) {
        const int64_t id = item.get<int64_t>();
        if (id >= 0 && id <= kMaxBindNumaId) found.push_back(static_cast<int>(id));
      } else if (item.is_string()) {
        found = ParseCpuList(item.get<std::string>());
      }
      const bool in_range = std::all_of(found.begin(), found.end(),
                                        [](int id) { return id >= 0 && id <= kMaxBindNumaId; });
      if (found.empty() || !in_range) {
        return absl::InvalidArgumentError("ids or ranges of 0.." + std::to_string(kMaxBindNumaId) +
                                          " in " + std::string(name) + "." + key + ", not " +
                                          Shown(item));
      }
      ids += found.size();
      if (ids > kMaxBindNumaIds) {
        return absl::InvalidArgumentError("at most " + std::to_string(kMaxBindNumaIds) +
                                          " ids in bind_cpu and bind_memory");
      }
      list.insert(list.end(), found.begin(), found.end());
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BindNuma> ParseBindNuma(const std::string& text) {
  BindNuma bind;
  bind.text = text;
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "false" || lower == "0" || lower.empty()) return bind;
  if (lower == "true" || lower == "1") {
    bind.mode = BindNuma::Mode::kAuto;
    return bind;
  }
  std::string json_text = text;
  if (absl::EndsWith(text, ".json")) {
    ASSIGN_OR_RETURN(json_text, ReadBindFile(text));
    bind.file = text;
  }
  if (json_text.size() > kMaxBindNumaBytes) {
    return absl::InvalidArgumentError("a JSON dict of at most 1 MiB");
  }
  if (JsonDepth(json_text) > kMaxBindNumaDepth) {
    return absl::InvalidArgumentError("a JSON dict nested at most " +
                                      std::to_string(kMaxBindNumaDepth) + " deep");
  }
  auto json = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) {
    return absl::InvalidArgumentError(
        "False, True, a JSON dict or a .json file with bind_config, bind_cpu and bind_memory");
  }
  bind.mode = BindNuma::Mode::kConfig;
  auto config_it = json.find("bind_config");
  const nlohmann::json config = config_it == json.end() ? nlohmann::json::object() : *config_it;
  if (!config.is_object()) return absl::InvalidArgumentError("bind_config as a dict");
  ASSIGN_OR_RETURN(bind.cpu_mode, Mode(config, "bind_cpu_mode"));
  ASSIGN_OR_RETURN(bind.memory_mode, Mode(config, "bind_memory_mode"));
  if (bind.cpu_mode != "numa" && bind.cpu_mode != "cpu" && bind.cpu_mode != "none") {
    return absl::InvalidArgumentError("bind_cpu_mode numa, cpu or none");
  }
  if (bind.memory_mode != "numa" && bind.memory_mode != "none") {
    return absl::InvalidArgumentError("bind_memory_mode numa or none");
  }
  size_t ids = 0;
  auto field = [&json](const char* name) {
    auto it = json.find(name);
    return it == json.end() ? nlohmann::json() : *it;
  };
  RETURN_IF_ERROR(ReadIntLists(field("bind_cpu"), "bind_cpu", bind.bind_cpu, ids));
  RETURN_IF_ERROR(ReadIntLists(field("bind_memory"), "bind_memory", bind.bind_memory, ids));
  return bind;
}

std::optional<NumaBinding> BindNumaFor(const BindNuma& bind, const NumaTopology& topology,
                                       int local_rank, int local_worker_num) {
  if (bind.mode == BindNuma::Mode::kOff) return std::nullopt;
  const std::optional<NumaBinding> node =
      NumaBindingFor(topology, NumaMode::kNode, local_rank, local_worker_num);
  if (bind.mode == BindNuma::Mode::kAuto) return node;
  const std::string device = "device" + std::to_string(local_rank);
  NumaBinding binding;
  if (bind.cpu_mode == "numa" && node) binding.cpus = node->cpus;
  if (bind.cpu_mode == "cpu") {
    if (auto cpus = bind.bind_cpu.find(device); cpus != bind.bind_cpu.end()) {
      binding.cpus = cpus->second;
    }
  }
  if (bind.memory_mode == "numa") {
    if (auto memory = bind.bind_memory.find(device); memory != bind.bind_memory.end()) {
      binding.memory_nodes = memory->second;
    } else if (node) {
      binding.memory_nodes = node->memory_nodes;
    }
  }
  if (binding.cpus.empty() && binding.memory_nodes.empty()) return std::nullopt;
  return binding;
}

NumaMode NumaModeOf(const std::string& text) {
  auto mode = ParseNumaMode(text);
  return mode.ok() ? *mode : NumaMode::kNone;
}

NumaTopology ReadNumaTopology(const std::string& sys_root) {
  NumaTopology topology;
  for (const auto& [node, path] : Numbered(sys_root + "/devices/system/node", "node")) {
    std::vector<int> cpus = ParseCpuList(ReadText(path + "/cpulist"));
    if (!cpus.empty()) topology.node_cpus[node] = std::move(cpus);
  }
  for (const auto& [cpu, path] : Numbered(sys_root + "/devices/system/cpu", "cpu")) {
    int package = 0;
    if (absl::SimpleAtoi(ReadText(path + "/topology/physical_package_id"), &package)) {
      topology.cpu_package[cpu] = package;
    }
    const std::vector<int> l3 = ParseCpuList(ReadText(path + "/cache/index3/shared_cpu_list"));
    if (!l3.empty()) topology.cpu_l3[cpu] = l3.front();
  }
  topology.gpu_nodes = GpuNodes(sys_root);
  return topology;
}

std::optional<NumaBinding> NumaBindingFor(const NumaTopology& topology, NumaMode mode,
                                          int local_rank, int local_worker_num) {
  if (mode == NumaMode::kNone || topology.node_cpus.size() < 2 || local_worker_num < 1) {
    return std::nullopt;
  }
  std::vector<int> nodes;
  for (const auto& [node, cpus] : topology.node_cpus) nodes.push_back(node);
  // The node of every local rank: its GPU's, else its share.
  auto node_of = [&](int rank) {
    if (rank < static_cast<int>(topology.gpu_nodes.size()) &&
        topology.node_cpus.count(topology.gpu_nodes[rank])) {
      return topology.gpu_nodes[rank];
    }
    return nodes[static_cast<size_t>(rank) * nodes.size() / local_worker_num];
  };
  const int node = node_of(local_rank);
  const std::vector<int>& node_cpus = topology.node_cpus.at(node);
  // This rank's place among the ranks on its node.
  int place = 0, on_node = 0;
  for (int rank = 0; rank < local_worker_num; ++rank) {
    if (node_of(rank) != node) continue;
    if (rank < local_rank) ++place;
    ++on_node;
  }
  NumaBinding binding;
  binding.memory_nodes = {node};
  switch (mode) {
    case NumaMode::kNode:
      binding.cpus = node_cpus;
      break;
    case NumaMode::kExclusive:
      binding.cpus = Slice(node_cpus, place, on_node);
      break;
    case NumaMode::kSocket: {
      auto package = topology.cpu_package.find(node_cpus.front());
      binding.memory_nodes.clear();
      for (const auto& [other, cpus] : topology.node_cpus) {
        auto other_package = topology.cpu_package.find(cpus.front());
        const bool same = package == topology.cpu_package.end()
                              ? other == node
                              : other_package != topology.cpu_package.end() &&
                                    other_package->second == package->second;
        if (!same) continue;
        binding.cpus.insert(binding.cpus.end(), cpus.begin(), cpus.end());
        binding.memory_nodes.push_back(other);
      }
      break;
    }
    case NumaMode::kCoreComplex: {
      std::map<int, std::vector<int>> complexes;  // first CPU of the L3 group -> CPUs
      for (int cpu : node_cpus) {
        auto l3 = topology.cpu_l3.find(cpu);
        complexes[l3 == topology.cpu_l3.end() ? node_cpus.front() : l3->second].push_back(cpu);
      }
      auto chosen = complexes.begin();
      std::advance(chosen, place % complexes.size());
      binding.cpus = chosen->second;
      break;
    }
    case NumaMode::kNone:
      return std::nullopt;
  }
  std::sort(binding.cpus.begin(), binding.cpus.end());
  return binding;
}

}  // namespace gangrun::launcher
