// `gangrun logs`, the scheduler's half (scheduler/logs.h).

#include "scheduler/logs.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "scheduler/peer_checks.h"

namespace gangrun::scheduler {
namespace {

// --follow at the end of a rank's log: read it again this much later.
constexpr auto kFollowInterval = std::chrono::milliseconds(200);
// A read its node has not answered this long is asked again (the answer was lost with a
// connection); after kReadRetries such tries the rank ends.
constexpr auto kReadTimeout = std::chrono::seconds(5);
constexpr int kReadRetries = 5;
// How often a stream looks at reads that are due or late.
constexpr auto kLogsTick = std::chrono::milliseconds(200);

v1::LogChunk EndOf(int rank, const std::string& host, std::string error) {
  v1::LogChunk chunk;
  chunk.set_rank(rank);
  chunk.set_host(host);
  chunk.set_end(true);
  chunk.set_error(std::move(error));
  return chunk;
}

}  // namespace

LogsPump::~LogsPump() {
  for (auto& [id, stream] : streams_) {
    stream.sink->Finish(absl::UnavailableError("the job has ended"));
  }
}

absl::StatusOr<uint64_t> LogsPump::Open(const v1::LogsRequest& request,
                                        std::shared_ptr<LogsSink> sink) {
  if (static_cast<int>(streams_.size()) >= kMaxLogStreams) {
    return absl::UnavailableError(
        absl::StrFormat("%d gangrun logs streams are open already; try again", kMaxLogStreams));
  }
  std::map<int, RankLog> ranks;
  for (const auto& [rank, place] : nodes_.RankPlaces()) {
    RankLog log;
    log.node_id = place.node_id;
    log.host = place.host;
    ranks[rank] = std::move(log);
  }
  if (ranks.empty()) {
    return absl::FailedPreconditionError(
        "no generation has started yet: no rank has a log (the job is " +
        std::string(JobStateName(nodes_.state())) + ")");
  }
  if (!request.ranks().empty()) {
    std::map<int, RankLog> wanted;
    for (int rank : request.ranks()) {
      auto it = ranks.find(rank);
      if (it == ranks.end()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("there is no rank %d in generation %d (ranks 0-%d)", rank,
                            nodes_.generation(), ranks.rbegin()->first));
      }
      wanted.insert(*it);
    }
    ranks = std::move(wanted);
  }
  const uint64_t id = ++opened_;
  Stream& stream = streams_[id];
  stream.id = id;
  stream.sink = std::move(sink);
  stream.follow = request.follow();
  stream.tail_lines = std::max<int64_t>(-1, request.tail_lines());  // -1: from the end
  stream.ranks = std::move(ranks);
  common::Logger("scheduler")
      ->debug("gangrun logs: stream {} of {} rank(s){}", id, stream.ranks.size(),
              stream.follow ? ", following" : "");
  ArmTimer(stream);
  Pump(id);
  return id;
}

void LogsPump::Written(uint64_t id) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  it->second.writing = false;
  Pump(id);
}

void LogsPump::Close(uint64_t id) {
  streams_.erase(id);  // answers still on their way are dropped (OnLogRead)
}

void LogsPump::ArmTimer(Stream& stream) {
  const uint64_t id = stream.id;
  stream.timer = clock_.After(kLogsTick, [this, id] {
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    ArmTimer(it->second);
    Pump(id);
  });
}

void LogsPump::Ask(Stream& stream, int rank, RankLog& log) {
  if (!nodes_.Reachable(log.node_id)) {
    log.done = true;
    stream.ready.push_back(EndOf(rank, log.host, "its node is gone"));
    return;
  }
  v1::NodeCommand command;
  auto* read = command.mutable_read_log();
  read->set_request(stream.id);
  read->set_rank(rank);
  read->set_offset(log.offset);
  read->set_tail_lines(stream.tail_lines);
  read->set_max_bytes(kLogPieceBytes);
  log.asked = true;
  log.asked_at = clock_.Now();
  ++stream.in_flight;
  nodes_.Send(log.node_id, std::move(command));
}

void LogsPump::Pump(uint64_t id) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  Stream& stream = it->second;
  const common::TimePoint now = clock_.Now();
  // Late reads end their rank; due reads go out while the window has room.
  for (auto& [rank, log] : stream.ranks) {
    if (!log.asked) continue;
    const bool gone = !nodes_.Reachable(log.node_id);
    if (!gone && now - log.asked_at <= kReadTimeout) continue;
    log.asked = false;
    --stream.in_flight;
    if (gone || ++log.retries > kReadRetries) {
      log.done = true;
      stream.ready.push_back(
          EndOf(rank, log.host, gone ? "its node is gone" : "its node did not answer"));
    }
  }
  for (size_t tried = 0; tried < stream.ranks.size(); ++tried) {
    if (stream.in_flight + static_cast<int>(stream.ready.size()) >= kLogsInFlight) break;
    auto next = stream.ranks.lower_bound(stream.next_rank);
    if (next == stream.ranks.end()) next = stream.ranks.begin();
    stream.next_rank = next->first + 1;
    RankLog& log = next->second;
    if (log.asked || log.done || log.again_at > now) continue;
    Ask(stream, next->first, log);
  }
  if (!stream.writing && !stream.ready.empty()) {
    stream.writing = true;
    v1::LogChunk chunk = std::move(stream.ready.front());
    stream.ready.pop_front();
    stream.sink->Write(std::move(chunk));
    return;
  }
  const bool all_done = std::all_of(stream.ranks.begin(), stream.ranks.end(),
                                    [](const auto& entry) { return entry.second.done; });
  if (all_done && !stream.writing && stream.ready.empty()) {
    auto sink = std::move(stream.sink);
    common::Logger("scheduler")->debug("gangrun logs: stream {} has ended", id);
    streams_.erase(it);
    sink->Finish(absl::OkStatus());
  }
}

void LogsPump::ReadRestOf(int rank) {
  std::vector<uint64_t> ids;
  for (auto& [id, stream] : streams_) {
    auto log = stream.ranks.find(rank);
    if (log == stream.ranks.end() || log->second.done) continue;
    log->second.again_at = common::TimePoint::min();
    ids.push_back(id);
  }
  for (uint64_t id : ids) Pump(id);
}

void LogsPump::EndFollowing() {
  std::vector<uint64_t> ids;
  for (auto& [id, stream] : streams_) {
    stream.follow = false;
    ids.push_back(id);
  }
  for (uint64_t id : ids) Pump(id);
}

void LogsPump::OnLogRead(int node_id, const v1::LogRead& read) {
  if (read.data().size() > 2 * kLogPieceBytes) return;  // not what was asked for
  auto it = streams_.find(read.request());
  if (it == streams_.end()) return;  // closed, or not ours
  Stream& stream = it->second;
  auto rank = stream.ranks.find(read.rank());
  if (rank == stream.ranks.end() || rank->second.node_id != node_id || !rank->second.asked ||
      read.offset() != rank->second.offset) {
    return;  // not the answer to the read that is out
  }
  RankLog& log = rank->second;
  log.asked = false;
  log.retries = 0;
  --stream.in_flight;
  if (!read.data().empty()) {
    v1::LogChunk chunk;
    chunk.set_rank(read.rank());
    chunk.set_host(log.host);
    chunk.set_data(read.data());
    stream.ready.push_back(std::move(chunk));
  }
  log.offset = std::max<int64_t>(0, read.next_offset());
  if (!read.error().empty()) {
    log.done = true;
    stream.ready.push_back(EndOf(read.rank(), log.host, Sanitize(read.error(), kMaxReasonBytes)));
  } else if (read.at_end() && (!stream.follow || !read.running())) {
    log.done = true;
    stream.ready.push_back(EndOf(read.rank(), log.host, ""));
  } else if (read.at_end()) {
    log.again_at = clock_.Now() + kFollowInterval;
  }
  Pump(stream.id);
}

}  // namespace gangrun::scheduler
