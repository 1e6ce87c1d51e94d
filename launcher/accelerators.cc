// What torchrun's --nproc_per_node auto|cpu|gpu counts on this host (launcher/torchrun.h).

#include <dirent.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "launcher/torchrun.h"

namespace gangrun::launcher {

AcceleratorCounts CountAccelerators(const EnvLookup& env) {
  AcceleratorCounts counts;
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  counts.cpus = cpus > 0 ? static_cast<int>(std::min<long>(cpus, kMaxLocalWorkers)) : 1;
  if (auto visible = env("CUDA_VISIBLE_DEVICES")) {
    // torch counts the leading valid entries; a "-1" or an empty list hides every device.
    for (absl::string_view item : absl::StrSplit(*visible, ',', absl::SkipEmpty())) {
      if (absl::StripAsciiWhitespace(item).empty() || item[0] == '-') break;
      ++counts.gpus;
    }
    return counts;
  }
  if (DIR* dir = opendir("/proc/driver/nvidia/gpus")) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') ++counts.gpus;
    }
    closedir(dir);
  }
  return counts;
}

}  // namespace gangrun::launcher
