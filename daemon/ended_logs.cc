#include "daemon/ended_logs.h"

#include "absl/strings/str_join.h"

namespace gangrun::daemon {

EndedJobLogs::EndedJobLogs(common::Clock& clock, v1::JobLogPlace place, int world_size,
                           std::vector<Agent> agents, std::vector<std::string> missing,
                           Daemon daemon)
    : place_(std::move(place)),
      world_size_(world_size),
      missing_(std::move(missing)),
      daemon_(std::move(daemon)),
      pump_(*this, clock) {
  for (const Agent& agent : agents) agents_[agent.id] = agent.name;
  if (agents_.empty()) {
    found_ = true;
    return;
  }
  find_timer_ = clock.After(kFindTimeout, [this] { Found(); });
  for (const auto& [id, name] : agents_) {
    v1::AgentCommand command;
    *command.mutable_find_logs()->mutable_place() = place_;
    daemon_.send(id, std::move(command));
  }
}

EndedJobLogs::~EndedJobLogs() {
  for (auto& [id, pending] : pending_) {
    pending.sink->Finish(absl::UnavailableError("the job's logs are read no more"));
  }
}

void EndedJobLogs::OnFound(int agent_id, const v1::JobLogsFound& found) {
  auto agent = agents_.find(agent_id);
  if (found_ || agent == agents_.end() || !answered_.insert(agent_id).second) return;
  if (!found.error().empty()) errors_[agent_id] = found.error().substr(0, 256);
  for (int rank : found.ranks()) {
    // A rank of the job the first agent to name it reads (agents on one host may share the
    // log directory).
    if (rank < 0 || rank >= world_size_ || places_.count(rank) > 0) continue;
    places_[rank] = Place{agent_id, agent->second, 0, false};
  }
  if (answered_.size() == agents_.size()) Found();
}

void EndedJobLogs::Found() {
  if (found_) return;
  found_ = true;
  find_timer_.reset();
  auto pending = std::move(pending_);
  pending_.clear();
  for (auto& [id, stream] : pending) {
    if (std::string missing = Missing(stream.request); !missing.empty()) {
      stream.sink->Finish(absl::NotFoundError(missing));
      continue;
    }
    auto opened = pump_.Open(stream.request, stream.sink);
    if (!opened.ok()) {
      stream.sink->Finish(opened.status());
      continue;
    }
    streams_[id] = *opened;
  }
}

std::string EndedJobLogs::Missing(const v1::LogsRequest& request) const {
  std::vector<int> absent;
  if (request.ranks().empty()) {
    if (!places_.empty()) return "";
    absent.push_back(-1);
  }
  for (int rank : request.ranks()) {
    if (rank < 0 || rank >= world_size_) {
      return "there is no rank " + std::to_string(rank) + " in job " + place_.job_id() +
             " (ranks 0-" + std::to_string(world_size_ - 1) + ")";
    }
    if (places_.count(rank) == 0) absent.push_back(rank);
  }
  if (absent.empty()) return "";
  std::string why = absent.front() < 0
                        ? "no agent holds a log of job " + place_.job_id()
                        : "no agent holds the log of rank " + std::to_string(absent.front()) +
                              " of job " + place_.job_id();
  std::vector<std::string> asked;
  for (const auto& [id, name] : agents_) {
    auto error = errors_.find(id);
    asked.push_back(error == errors_.end() ? name : name + " (" + error->second + ")");
  }
  why += "; asked: " + (asked.empty() ? std::string("none") : absl::StrJoin(asked, ", "));
  if (!missing_.empty()) {
    why += "; not connected: " + absl::StrJoin(missing_, ", ");
  }
  return why;
}

absl::StatusOr<uint64_t> EndedJobLogs::OpenLogs(const v1::LogsRequest& request,
                                                std::shared_ptr<scheduler::LogsSink> sink) {
  if (found_) {
    if (std::string missing = Missing(request); !missing.empty()) {
      return absl::NotFoundError(missing);
    }
    auto opened = pump_.Open(request, std::move(sink));
    if (!opened.ok()) return opened.status();
    streams_[++opened_] = *opened;
    return opened_;
  }
  if (pending_.size() >= static_cast<size_t>(scheduler::LogsPump::kMaxLogStreams)) {
    return absl::UnavailableError("too many gangrun logs streams wait for this job's agents");
  }
  pending_[++opened_] = Pending{request, std::move(sink)};
  return opened_;
}

void EndedJobLogs::LogsWritten(uint64_t id) {
  if (auto it = streams_.find(id); it != streams_.end()) pump_.Written(it->second);
}

void EndedJobLogs::CloseLogs(uint64_t id) {
  pending_.erase(id);
  if (auto it = streams_.find(id); it != streams_.end()) {
    pump_.Close(it->second);
    streams_.erase(it);
  }
}

std::string EndedJobLogs::HostOf(int node_id) const {
  auto it = agents_.find(node_id);
  return it == agents_.end() ? std::string() : it->second;
}

void EndedJobLogs::Send(int node_id, v1::NodeCommand command) {
  if (!command.has_read_log() || !daemon_.connected(node_id)) return;
  v1::AgentCommand read;
  *read.mutable_read_log()->mutable_place() = place_;
  *read.mutable_read_log()->mutable_read() = std::move(*command.mutable_read_log());
  daemon_.send(node_id, std::move(read));
}

}  // namespace gangrun::daemon
