#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "launcher/options.h"

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

}  // namespace

absl::Status Validate(const Options& o) {
  if (o.worker_num <= 0) {
    return Invalid("--worker_num must be greater than 0 (got " + std::to_string(o.worker_num) +
                   ")");
  }
  if (o.worker_num_min < 0 || (o.worker_num_min > 0 && o.worker_num_min > o.worker_num)) {
    return Invalid("--worker_num MIN:MAX needs 1 <= MIN <= MAX (got " +
                   std::to_string(o.worker_num_min) + ":" + std::to_string(o.worker_num) + ")");
  }
  if (o.local_worker_num <= 0) {
    return Invalid("--local_worker_num must be greater than 0 (got " +
                   std::to_string(o.local_worker_num) + ")");
  }
  if (o.local_worker_num > o.worker_num) {
    return Invalid("--local_worker_num (" + std::to_string(o.local_worker_num) +
                   ") is greater than --worker_num (" + std::to_string(o.worker_num) + ")");
  }
  if (o.master_port < 1 || o.master_port > 65535) {
    return Invalid("--master_port must be in 1..65535 (got " + std::to_string(o.master_port) + ")");
  }
  if (o.personality == Personality::kMsrun && o.master_port == 65535) {
    return Invalid("--master_port 65535 leaves no port for gangrun's scheduler (master_port+1)");
  }
  if (o.node_rank < -1) {
    return Invalid("--node_rank must be -1 (automatic) or >= 0 (got " +
                   std::to_string(o.node_rank) + ")");
  }
  if (o.sim_level < -1 || o.sim_level > 3) {
    return Invalid("--sim_level must be one of -1, 0, 1, 2, 3 (got " + std::to_string(o.sim_level) +
                   ")");
  }
  if (o.sim_rank_id < -1) {
    return Invalid("--sim_rank_id must be -1 or >= 0 (got " + std::to_string(o.sim_rank_id) + ")");
  }
  if (o.max_restarts < 0) return Invalid("--max_restarts must be >= 0");
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
  if (!o.rank_table_file.empty()) {
    if (absl::Status s = CheckReadable("rank_table_file", o.rank_table_file); !s.ok()) return s;
  }
  if (!o.token_file.empty()) {
    if (absl::Status s = CheckReadable("token_file", o.token_file); !s.ok()) return s;
  }
  for (const auto& [option, path] : {std::pair<std::string, std::string>{"tls_cert", o.tls_cert},
                                     {"tls_key", o.tls_key},
                                     {"tls_ca", o.tls_ca}}) {
    if (path.empty()) continue;
    if (absl::Status s = CheckReadable(option, path); !s.ok()) return s;
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return Invalid("--tls_cert and --tls_key must be given together");
  }
  if (!o.log_dir.empty()) {
    struct stat st;
    if (stat(o.log_dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
      return Invalid("--log_dir '" + o.log_dir + "' exists and is not a directory");
    }
  }
  if (o.worker_log_name.find('/') != std::string::npos) {
    return Invalid("--worker_log_name must be a file name prefix, without '/'");
  }
  if (o.task_script.empty()) {
    return Invalid("missing task script (usage: " +
                   std::string(o.personality == Personality::kMsrun ? "msrun" : "gangrun") +
                   " [options] <task_script> [task_script_args...])");
  }
  return absl::OkStatus();
}

}  // namespace gangrun::launcher
