// Validation of a launcher's options before anything starts: one line, InvalidArgument (exit
// 2), naming the option. ValidateValues needs nothing but the options; Validate adds what
// depends on this host (files, directories, CPUs, TLS material).

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/net.h"
#include "common/numbers.h"
#include "launcher/options.h"
#include "rpc/credentials.h"
#include "store/store_config.h"

namespace gangrun::launcher {
namespace {

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

absl::Status CheckReadable(const std::string& option, const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Invalid("cannot read --" + option + " '" + path + "': " + std::strerror(errno));
  }
  close(fd);
  return absl::OkStatus();
}

absl::Status CheckCounts(const Options& o) {
  if (o.worker_num <= 0 || o.worker_num > kMaxWorkers) {
    return Invalid("--worker_num must be in 1.." + std::to_string(kMaxWorkers) + " (got " +
                   std::to_string(o.worker_num) + ")");
  }
  if (o.worker_num_min < 0 || (o.worker_num_min > 0 && o.worker_num_min > o.worker_num)) {
    return Invalid("--worker_num MIN:MAX needs 1 <= MIN <= MAX (got " +
                   std::to_string(o.worker_num_min) + ":" + std::to_string(o.worker_num) + ")");
  }
  if (o.local_worker_num <= 0 || o.local_worker_num > kMaxLocalWorkers) {
    return Invalid("--local_worker_num must be in 1.." + std::to_string(kMaxLocalWorkers) +
                   " (got " + std::to_string(o.local_worker_num) + ")");
  }
  if (o.local_worker_num > o.worker_num) {
    return Invalid("--local_worker_num (" + std::to_string(o.local_worker_num) +
                   ") is greater than --worker_num (" + std::to_string(o.worker_num) + ")");
  }
  if (o.node_rank < -1) {
    return Invalid("--node_rank must be -1 (automatic) or >= 0 (got " +
                   std::to_string(o.node_rank) + ")");
  }
  if (o.node_rank >= o.worker_num) {
    return Invalid("--node_rank " + std::to_string(o.node_rank) + " is out of range: a job of " +
                   std::to_string(o.worker_num) + " worker(s) has at most " +
                   std::to_string(o.worker_num) + " node(s)");
  }
  if (o.max_restarts < 0) return Invalid("--max_restarts must be >= 0");
  return absl::OkStatus();
}

absl::Status CheckPortsAndTimes(const Options& o) {
  if (o.master_port < 1 || o.master_port > 65535) {
    return Invalid("--master_port must be in 1..65535 (got " + std::to_string(o.master_port) + ")");
  }
  if (o.personality == Personality::kMsrun && o.master_port == 65535) {
    return Invalid("--master_port 65535 leaves no port for gangrun's scheduler (master_port+1)");
  }
  if (o.health_port < -1 || o.health_port > 65535) {
    return Invalid("--health_port must be -1 (off), 0 or 1..65535 (got " +
                   std::to_string(o.health_port) + ")");
  }
  if (o.metrics_port < -1 || o.metrics_port > 65535) {
    return Invalid("--metrics_port must be -1 (off), 0 (any free port) or 1..65535 (got " +
                   std::to_string(o.metrics_port) + ")");
  }
  if (o.heartbeat_interval <= 0) return Invalid("--heartbeat_interval must be greater than 0");
  if (o.node_timeout <= 0) return Invalid("--node_timeout must be greater than 0");
  if (o.node_timeout <= o.heartbeat_interval) {
    return Invalid("--node_timeout (" + std::to_string(o.node_timeout) +
                   " s) must be longer than --heartbeat_interval (" +
                   std::to_string(o.heartbeat_interval) +
                   " s), or nodes would be lost between two heartbeats");
  }
  return absl::OkStatus();
}

absl::Status CheckSimulation(const Options& o) {
  if (o.sim_level < -1 || o.sim_level > 3) {
    return Invalid("--sim_level must be one of -1, 0, 1, 2, 3 (got " + std::to_string(o.sim_level) +
                   ")");
  }
  if (o.sim_rank_id < -1) {
    return Invalid("--sim_rank_id must be -1 or >= 0 (got " + std::to_string(o.sim_rank_id) + ")");
  }
  return absl::OkStatus();
}

// The nearest directory that exists at or above `path` (relative paths start at ".").
std::string NearestExisting(std::string path) {
  while (!path.empty()) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0) return path;
    const size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  return ".";
}

// A directory gangrun will create files in: it, or what would hold it, must be a writable
// directory on a real file system (not /proc or /sys).
absl::Status CheckWritableDir(const std::string& option, const std::string& dir) {
  const std::string existing = NearestExisting(dir);
  struct stat st;
  if (stat(existing.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Invalid("--" + option + " '" + dir + "': '" + existing + "' is not a directory");
  }
  struct statfs fs;
  if (statfs(existing.c_str(), &fs) == 0 &&
      (fs.f_type == 0x9fa0 /* PROC_SUPER_MAGIC */ || fs.f_type == 0x62656572 /* SYSFS_MAGIC */)) {
    return Invalid("--" + option + " '" + dir +
                   "' is on /proc or /sys, not a file system for logs");
  }
  if (access(existing.c_str(), W_OK | X_OK) != 0) {
    return Invalid("--" + option + " '" + dir + "': cannot write in '" + existing +
                   "': " + std::strerror(errno));
  }
  return absl::OkStatus();
}

absl::Status CheckWritableFile(const std::string& option, const std::string& path) {
  if (access(path.c_str(), F_OK) == 0) {
    if (access(path.c_str(), W_OK) != 0) {
      return Invalid("cannot write --" + option + " '" + path + "': " + std::strerror(errno));
    }
    return absl::OkStatus();
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : path.substr(0, std::max<size_t>(1, slash));
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
      access(dir.c_str(), W_OK | X_OK) != 0) {
    return Invalid("cannot create --" + option + " '" + path + "': '" + dir +
                   "' is not a writable directory");
  }
  return absl::OkStatus();
}

// The log directory, or (when it is still to be made) the directory it will be made in, must
// be one that no other user can plant or swap files in (common::CheckLogDirectory).
absl::Status CheckLogDirectorySafe(const std::string& log_dir) {
  std::string dir = log_dir.empty() ? "." : log_dir;
  std::string what =
      log_dir.empty() ? "the log directory (the current directory; see --log_dir)" : "--log_dir";
  struct stat st;
  while (stat(dir.c_str(), &st) != 0) {
    const size_t slash = dir.find_last_of('/');
    if (slash == std::string::npos) {
      dir = ".";
    } else {
      dir = slash == 0 ? "/" : dir.substr(0, slash);
    }
    what = "--log_dir " + log_dir + " would be made in";
    if (dir == "." || dir == "/") break;
  }
  absl::Status safe = common::CheckLogDirectory(dir, what);
  return safe.ok() ? safe : Invalid(std::string(safe.message()));
}

// Every CPU named by --bind_core must be one this launcher may run on.
absl::Status CheckBindCoreCpus(const BindCore& bind) {
  if (bind.mode != BindCore::Mode::kDict) return absl::OkStatus();
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return absl::OkStatus();
  for (const auto& [key, ranges] : bind.dict) {
    for (const std::string& range : ranges) {
      // The parser made sure the range is "A" or "A-B" with A <= B.
      const size_t dash = range.find('-');
      const int first = static_cast<int>(
          common::ParseInt(range.substr(0, dash), 0, INT_MAX).value_or(CPU_SETSIZE));
      const int last =
          dash == std::string::npos
              ? first
              : static_cast<int>(
                    common::ParseInt(range.substr(dash + 1), 0, INT_MAX).value_or(CPU_SETSIZE));
      for (int cpu = first; cpu <= last; ++cpu) {
        if (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed)) {
          return Invalid("--bind_core: CPU " + std::to_string(cpu) + " of '" + key +
                         "' does not exist on this host or is not available to this launcher (" +
                         std::to_string(CPU_COUNT(&allowed)) + " CPUs are)");
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckStore(const Options& o) {
  const bool tls = !o.store_cacert.empty() || !o.store_cert.empty() || !o.store_key.empty();
  if (o.store.empty()) {
    if (tls) return Invalid("--store_cacert, --store_cert and --store_key need a --store");
    if (o.store_follow) return Invalid("--store_follow needs a --store");
    return absl::OkStatus();
  }
  if (auto parsed = store::ParseStoreUrl(o.store); !parsed.ok()) {
    return Invalid(std::string(parsed.status().message()));
  }
  if (o.store_cert.empty() != o.store_key.empty()) {
    return Invalid("--store_cert and --store_key must be given together");
  }
  if (o.run_id.empty()) {
    return Invalid(
        "--store needs a --run_id: the store keeps each job under its run id, and "
        "every launcher of the job must name the same one");
  }
  if (o.personality == Personality::kMsrun) {
    return Invalid(
        "--store is not available as msrun: MindSpore's scheduler process cannot move "
        "to another host (use gangrun or torchrun)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateValues(const Options& o) {
  if (absl::Status s = CheckCounts(o); !s.ok()) return s;
  if (absl::Status s = CheckPortsAndTimes(o); !s.ok()) return s;
  if (absl::Status s = CheckSimulation(o); !s.ok()) return s;
  if (o.access.tls_cert.empty() != o.access.tls_key.empty()) {
    return Invalid("--tls_cert and --tls_key must be given together");
  }
  if (!o.local_addr.empty() && !common::IsIpv4Literal(o.local_addr) &&
      !common::IsIpv6Literal(o.local_addr)) {
    return Invalid("--local_addr '" + QuoteValue(o.local_addr) +
                   "' is not an IPv4 or IPv6 address");
  }
  if (o.worker_log_name.find('/') != std::string::npos) {
    return Invalid("--worker_log_name must be a file name prefix, without '/'");
  }
  if (o.time_limit_signal != 0 && o.time_limit <= 0) {
    return Invalid("--time_limit_signal needs a --time_limit");
  }
  if (o.time_limit_signal != 0 && o.time_limit_signal_before >= o.time_limit) {
    return Invalid(absl::StrCat("--time_limit_signal's ", o.time_limit_signal_before,
                                " s is not before --time_limit ", o.time_limit, " s"));
  }
  if (o.health_check.find('\0') != std::string::npos || o.health_check.size() > 4096) {
    return Invalid("--health_check must be one shell command of at most 4096 bytes");
  }
  if (absl::Status s = CheckStore(o); !s.ok()) return s;
  if (o.task_script.empty()) {
    // torch's own words under torchrun, msrun's otherwise.
    return Invalid(o.personality == Personality::kTorchrun
                       ? "missing training script (usage: torchrun [options] <training_script> "
                         "[training_script_args...])"
                       : "missing task script (usage: " + PersonalityName(o.personality) +
                             " [options] <task_script> [task_script_args...])");
  }
  return absl::OkStatus();
}

absl::Status Validate(const Options& o) {
  if (absl::Status s = ValidateValues(o); !s.ok()) return s;
  if (!o.rank_table_file.empty()) {
    if (absl::Status s = CheckReadable("rank_table_file", o.rank_table_file); !s.ok()) return s;
  }
  if (!o.access.token_file.empty()) {
    if (absl::Status s = CheckReadable("token_file", o.access.token_file); !s.ok()) return s;
  }
  for (const auto& [option, path] :
       {std::pair<std::string, std::string>{"tls_cert", o.access.tls_cert},
        {"tls_key", o.access.tls_key},
        {"tls_ca", o.access.tls_ca},
        {"store_cacert", o.store_cacert},
        {"store_cert", o.store_cert},
        {"store_key", o.store_key}}) {
    if (path.empty()) continue;
    if (absl::Status s = CheckReadable(option, path); !s.ok()) return s;
  }
  if (absl::Status s = rpc::CheckTlsFiles(o.access); !s.ok()) return s;
  if (!o.log_dir.empty()) {
    struct stat st;
    if (stat(o.log_dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
      return Invalid("--log_dir '" + o.log_dir + "' exists and is not a directory");
    }
  }
  if (absl::Status s = CheckWritableDir("log_dir", o.log_dir.empty() ? "." : o.log_dir); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckLogDirectorySafe(o.log_dir); !s.ok()) return s;
  // The runtime directory (progress sockets, the timer pipe, the Python hook) goes there.
  if (absl::Status s = common::CheckSafeDirectoryPath(common::TempBase(), "$TMPDIR"); !s.ok()) {
    return Invalid(std::string(s.message()));
  }
  if (!o.event_log.empty()) {
    if (absl::Status s = CheckWritableFile("event_log", o.event_log); !s.ok()) return s;
  }
  const int binders = (o.bind_core.mode != BindCore::Mode::kOff) + !o.numa_binding.empty() +
                      (o.bind_numa.mode != BindNuma::Mode::kOff);
  if (binders > 1) {
    return Invalid(
        "--bind_core, --bind_numa and --numa_binding each choose the workers' CPUs: give one");
  }
  return CheckBindCoreCpus(o.bind_core);
}

}  // namespace gangrun::launcher
