#pragma once
// --bind_core, msrun's rule, applied by the launcher itself (no taskset):
//  - True: local worker i gets CPUs [avg*i, avg*i+avg-1] with avg = cpu_count / local workers.
//  - a dict: worker i takes the i-th non-"scheduler" entry, whose key must name its physical
//    device (device<i>, or the i-th id of ASCEND_RT_VISIBLE_DEVICES); otherwise it is left
//    unbound with a warning, as msrun does. "scheduler" binds the MindSpore scheduler process.

#include <optional>
#include <string>
#include <vector>

#include "launcher/options.h"

namespace gangrun::launcher {

struct CpuBinding {
  std::vector<int> cpus;  // empty = not bound
  std::string warning;    // why a requested binding was not applied
};

CpuBinding WorkerCpus(const BindCore& bind, int local_rank, int local_worker_num, int cpu_count,
                      const std::optional<std::string>& visible_devices);
CpuBinding SchedulerCpus(const BindCore& bind);

// Python's str() of a list of ints: "[0, 1, 2]" (the value of MSRUN_CPU_LIST).
std::string PythonList(const std::vector<int>& values);

// The number of online CPUs: what msrun counts as the "processor" lines of /proc/cpuinfo, read
// from /sys/devices/system/cpu/online instead (sysconf), which is cheap on any host.
int CpuCount();

}  // namespace gangrun::launcher
