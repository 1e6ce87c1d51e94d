#pragma once
// Who outside the job holds this host's accelerators: processes that keep a device file open
// (a previous job's worker that never died, a notebook, a monitoring tool holding a context)
// make the next generation's workers fail to get the device or its memory, and nothing else
// names them (Megatron-LM #2774; NVRx only polls the GPU's memory). A failed rank's report
// carries them (WorkerExited.device_holders), and --restart_rules can match them.
//
// Scans /proc/<pid>/fd of every process but this job's own process groups, comparing each open
// file's path (the link's text: never touching the file, which could sit on a hung file
// system) with the device files' real paths. A process whose fds cannot be read (another
// user's, without CAP_SYS_PTRACE) is skipped. No device file: no scan at all. It costs with the
// processes and their descriptors: 0.6 ms for this 2-core VM's 69 processes and 474
// descriptors. The node runs it once per generation, at the first failure.

#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

namespace gangrun::node {

// Bounds: at most kMaxHolders holders are named and kMaxProcesses processes scanned (a host's
// pid_max is 4 million; scanning more than this would delay the report by seconds).
inline constexpr size_t kMaxHolders = 16;
inline constexpr size_t kMaxProcesses = 65536;

// The device files `patterns` (shell globs, e.g. "/dev/nvidia[0-9]*") name on this host.
std::vector<std::string> DeviceFiles(const std::vector<std::string>& patterns);

// "pid 4242 (python3, uid 1000) holds /dev/nvidia0", one per process (its first such file),
// for processes outside `ours` (process group ids) holding one of `files`; pid order.
std::vector<std::string> DeviceHolders(const std::vector<std::string>& files,
                                       const std::set<pid_t>& ours);

}  // namespace gangrun::node
