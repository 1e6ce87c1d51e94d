#include "scheduler/peer_checks.h"

#include <arpa/inet.h>

#include <csignal>

#include "common/net.h"

namespace gangrun::scheduler {

bool IsNumericAddress(const std::string& address) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, address.c_str(), buf) == 1 ||
         inet_pton(AF_INET6, address.c_str(), buf) == 1;
}

bool IsCleanName(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

namespace {

absl::Status Refuse(const v1::JoinRequest& join, const std::string& why) {
  return absl::InvalidArgumentError(DescribeJoin(join) + " " + why);
}

std::string ElasticText(int min, int max) {
  return min == max ? std::to_string(max) : std::to_string(min) + ":" + std::to_string(max);
}

}  // namespace

std::string Sanitize(const std::string& text, size_t max_bytes) {
  std::string out = text.substr(0, max_bytes);
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  if (text.size() > max_bytes) out += "...";
  return out;
}

std::string DescribeJoin(const v1::JoinRequest& join) {
  std::string text = "node '" + Sanitize(join.node_name(), kMaxNameBytes) + "' (" +
                     Sanitize(join.host_address(), 64);
  if (join.pid() > 0) text += ", launcher pid " + std::to_string(join.pid());
  return text + ")";
}

int StopSignal(int signal) { return signal >= 1 && signal <= 64 ? signal : SIGTERM; }

absl::Status CheckJoinRequest(const v1::JoinRequest& join, const JobIdentity& job) {
  if (!IsCleanName(join.node_name())) {
    return Refuse(join, "has an empty, too long or unprintable node name");
  }
  if (!IsNumericAddress(join.host_address())) {
    return Refuse(join, "does not give a numeric host address");
  }
  // Bound: what a scheduler keeps of a node's addresses and sends to every node.
  if (join.addresses_size() > static_cast<int>(common::kMaxCandidates)) {
    return Refuse(join, "gives " + std::to_string(join.addresses_size()) + " addresses (at most " +
                            std::to_string(common::kMaxCandidates) + ")");
  }
  for (const auto& address : join.addresses()) {
    if (!IsNumericAddress(address)) return Refuse(join, "gives an address that is not numeric");
  }
  if (join.pid() < 0) return Refuse(join, "gives a negative launcher pid");
  if (join.free_port() < 1 || join.free_port() > 65535) {
    return Refuse(join, "offers port " + std::to_string(join.free_port()) +
                            " for MASTER_PORT (not in 1..65535)");
  }
  if (join.local_worker_num() < 1 || join.local_worker_num() > job.world_size) {
    return Refuse(join, "brings " + std::to_string(join.local_worker_num()) +
                            " worker(s); a node of this job brings 1 to " +
                            std::to_string(job.world_size));
  }
  if (join.node_rank() < -1 || join.node_rank() >= job.world_size) {
    return Refuse(join, "asks for node rank " + std::to_string(join.node_rank()) +
                            ", out of range: a job of " + std::to_string(job.world_size) +
                            " worker(s) has at most " + std::to_string(job.world_size) +
                            " node(s)");
  }
  // What older launchers do not say (0 / "") is not compared.
  if (join.world_size() != 0 &&
      (join.world_size() != job.world_size ||
       (join.min_world_size() != 0 && join.min_world_size() != job.min_world_size))) {
    return Refuse(
        join,
        "was started with --worker_num " +
            ElasticText(join.min_world_size() != 0 ? join.min_world_size() : join.world_size(),
                        join.world_size()) +
            ", but the job has --worker_num " + ElasticText(job.min_world_size, job.world_size));
  }
  if (!join.run_id().empty() && join.run_id() != job.run_id) {
    return Refuse(join, "was started with --run_id '" + Sanitize(join.run_id(), kMaxNameBytes) +
                            "', but the job's run id is '" + job.run_id + "'");
  }
  if (!join.personality().empty() && !job.personality.empty() &&
      join.personality() != job.personality) {
    return Refuse(join, "runs as " + Sanitize(join.personality(), 16) +
                            ", but the job's scheduler runs as " + job.personality);
  }
  return absl::OkStatus();
}

}  // namespace gangrun::scheduler
