// The hang capture (scheduler/hang_capture.h).

#include "scheduler/hang_capture.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace gangrun::scheduler {
namespace {

// Margin over the nodes' own capture timeout for their answers to arrive.
constexpr common::Duration kCaptureMargin = std::chrono::seconds(5);

}  // namespace

void HangCapture::Begin(std::string noticed, v1::RootCause root_cause) {
  capture_.emplace();
  capture_->noticed = std::move(noticed);
  capture_->root_cause = std::move(root_cause);
  const double timeout = std::max(0.1, stack_timeout_seconds_);
  for (const auto& [rank, place] : nodes_.RankPlaces()) {
    if (!place.running || !capture_->waiting.insert(place.node_id).second) continue;
    v1::NodeCommand command;
    command.mutable_capture_stacks()->set_reason(capture_->noticed);
    command.mutable_capture_stacks()->set_timeout_seconds(timeout);
    nodes_.Send(place.node_id, std::move(command));
  }
  if (capture_->waiting.empty()) return Finish();
  capture_->timer =
      clock_.After(common::DurationOf(timeout) + kCaptureMargin, [this] { Finish(); });
}

void HangCapture::OnCaptured(int node_id, const v1::StacksCaptured& captured) {
  if (!capture_ || capture_->waiting.erase(node_id) == 0) return;
  const std::string host = nodes_.HostOf(node_id);
  if (host.empty()) return;
  for (const auto& stack : captured.stacks()) capture_->stacks.push_back(KeptStack(host, stack));
  if (capture_->waiting.empty()) Finish();
}

void HangCapture::Finish() {
  if (!capture_) return;
  Capture capture = std::move(*capture_);
  capture_.reset();
  HangVerdict verdict = JudgeHang(capture.stacks, capture.noticed, capture.root_cause);
  // The rank to look at first as the directory knows it (its stack may lack its pid).
  const auto places = nodes_.RankPlaces();
  if (auto place = places.find(verdict.root_cause.rank()); place != places.end()) {
    verdict.root_cause.set_host(place->second.host);
    verdict.root_cause.set_pid(place->second.pid);
  }
  SayFlightRecorderDumps(capture.stacks);
  nlohmann::json json_groups = nlohmann::json::array();
  for (const auto& group : verdict.groups) {
    nlohmann::json json_group = {
        {"where", group.where()},
        {"ranks", std::vector<int>(group.ranks().begin(), group.ranks().end())},
        {"odd_one_out", group.odd_one_out()}};
    if (group.has_collectives()) {
      json_group["collectives"] = group.collectives();
      json_group["in_collective"] = group.in_collective();
      json_group["behind"] = group.behind();
    }
    json_groups.push_back(std::move(json_group));
  }
  nodes_.Record(Event::kHang, {{"generation", nodes_.generation()},
                               {"message", verdict.message},
                               {"rank", verdict.root_cause.rank()},
                               {"groups", std::move(json_groups)}});
  // The whole verdict is the job's report (and the event above); this line names the culprit.
  common::Logger("scheduler")
      ->error("hang in generation {}: {}", nodes_.generation(),
              verdict.message.substr(0, verdict.message.find("; ")));
  done_(std::move(verdict));
}

void HangCapture::SayFlightRecorderDumps(const std::vector<v1::RankStack>& stacks) {
  std::vector<std::string> dumps;
  nlohmann::json json_dumps = nlohmann::json::array();
  for (const auto& stack : stacks) {
    if (stack.flight_recorder().empty()) continue;
    dumps.push_back("rank " + std::to_string(stack.rank()) + " on " + stack.host() + ": " +
                    stack.flight_recorder());
    json_dumps.push_back(
        {{"rank", stack.rank()}, {"node", stack.host()}, {"path", stack.flight_recorder()}});
  }
  if (dumps.empty()) return;
  std::string list;
  for (size_t i = 0; i < dumps.size() && i < 8; ++i) list += (i > 0 ? ", " : "") + dumps[i];
  if (dumps.size() > 8) list += absl::StrFormat(" and %d more", dumps.size() - 8);
  common::Logger("scheduler")
      ->error("hang: NCCL flight recorder dumps of {} rank(s), beside their logs: {}", dumps.size(),
              list);
  nodes_.Record(Event::kFlightRecorder,
                {{"generation", nodes_.generation()}, {"dumps", std::move(json_dumps)}});
}

}  // namespace gangrun::scheduler
