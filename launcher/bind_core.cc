#include "launcher/bind_core.h"

#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace gangrun::launcher {
namespace {

std::vector<int> ExpandRanges(const std::vector<std::string>& ranges) {
  std::vector<int> cpus;
  for (const auto& range : ranges) {
    std::vector<std::string> ends = absl::StrSplit(range, '-');
    int first = 0, last = 0;
    if (!absl::SimpleAtoi(ends[0], &first)) continue;
    last = first;
    if (ends.size() == 2 && !absl::SimpleAtoi(ends[1], &last)) continue;
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  return cpus;
}

}  // namespace

CpuBinding WorkerCpus(const BindCore& bind, int local_rank, int local_worker_num, int cpu_count,
                      const std::optional<std::string>& visible_devices) {
  CpuBinding binding;
  if (bind.mode == BindCore::Mode::kOff) return binding;
  if (bind.mode == BindCore::Mode::kAuto) {
    int avg = local_worker_num > 0 ? cpu_count / local_worker_num : 0;
    if (avg == 0) {
      binding.warning = "not binding worker " + std::to_string(local_rank) + ": " +
                        std::to_string(cpu_count) + " CPUs cannot be split among " +
                        std::to_string(local_worker_num) + " workers";
      return binding;
    }
    for (int cpu = avg * local_rank; cpu < avg * local_rank + avg; ++cpu) {
      binding.cpus.push_back(cpu);
    }
    return binding;
  }
  int device = local_rank;
  if (visible_devices && !visible_devices->empty()) {
    std::vector<std::string> ids = absl::StrSplit(*visible_devices, ',');
    if (local_rank < static_cast<int>(ids.size())) absl::SimpleAtoi(ids[local_rank], &device);
  }
  int index = 0;
  for (const auto& [key, ranges] : bind.dict) {
    if (key == "scheduler") continue;
    if (index++ != local_rank) continue;
    if (key != "device" + std::to_string(device)) {
      binding.warning = "not binding worker " + std::to_string(local_rank) + ": its device is " +
                        std::to_string(device) + " but the bind_core entry is '" + key + "'";
      return binding;
    }
    binding.cpus = ExpandRanges(ranges);
    return binding;
  }
  return binding;
}

CpuBinding SchedulerCpus(const BindCore& bind) {
  CpuBinding binding;
  if (bind.mode != BindCore::Mode::kDict) return binding;
  for (const auto& [key, ranges] : bind.dict) {
    if (key == "scheduler") binding.cpus = ExpandRanges(ranges);
  }
  return binding;
}

std::string PythonList(const std::vector<int>& values) {
  return "[" + absl::StrJoin(values, ", ") + "]";
}

int CpuCount() {
  // The online CPUs, as /proc/cpuinfo's "processor" entries count them, but from
  // /sys/devices/system/cpu/online: on a large host the kernel takes milliseconds to write
  // /proc/cpuinfo (it samples every CPU's frequency), and this runs before every launch.
  const long count = sysconf(_SC_NPROCESSORS_ONLN);
  return count > 0 ? static_cast<int>(count) : 1;
}

}  // namespace gangrun::launcher
