// `gangrun stacks`, the scheduler's half (scheduler/stacks_request.h).

#include "scheduler/stacks_request.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "scheduler/hang_report.h"
#include "scheduler/peer_checks.h"

namespace gangrun::scheduler {
namespace {

// Margin over the nodes' own capture timeout for their answers to arrive.
constexpr common::Duration kAnswerMargin = std::chrono::seconds(2);

}  // namespace

StacksRequests::~StacksRequests() {
  if (!pending_) return;
  auto done = std::move(pending_->done);
  pending_.reset();
  done(absl::UnavailableError("the job's scheduler has ended"));
}

void StacksRequests::Request(const v1::StacksRequest& request, Done done) {
  if (nodes_.state() != JobState::kRunning) {
    return done(absl::FailedPreconditionError("no generation is running (the job is " +
                                              std::string(JobStateName(nodes_.state())) + ")"));
  }
  if (pending_) {
    return done(absl::UnavailableError("another gangrun stacks is being answered; try again"));
  }
  std::set<int> wanted;
  const int world_size = nodes_.world_size();
  for (int rank : request.ranks()) {
    if (rank < 0 || rank >= world_size) {
      return done(absl::InvalidArgumentError(
          absl::StrFormat("there is no rank %d (the job's ranks are 0-%d)", rank, world_size - 1)));
    }
    wanted.insert(rank);
  }
  double timeout =
      request.timeout_seconds() > 0 ? request.timeout_seconds() : default_timeout_seconds_;
  timeout = std::clamp(timeout, 0.1, 600.0);
  pending_.emplace();
  pending_->id = ++requests_;
  pending_->done = std::move(done);
  int ranks = 0;
  for (const auto& [rank, place] : nodes_.RankPlaces()) {
    if (!place.running || (!wanted.empty() && wanted.count(rank) == 0)) continue;
    ++ranks;
    pending_->waiting.insert(place.node_id);
  }
  const bool with_text = ranks <= kMaxStackTexts;
  pending_->texts_left_out = !with_text;
  for (int id : pending_->waiting) {
    v1::NodeCommand command;
    auto* capture = command.mutable_capture_stacks();
    capture->set_reason("gangrun stacks");
    capture->set_timeout_seconds(timeout);
    capture->set_request(pending_->id);
    for (int rank : wanted) capture->add_ranks(rank);
    capture->set_with_text(with_text);
    nodes_.Send(id, std::move(command));
  }
  common::Logger("scheduler")
      ->info("gangrun stacks: capturing {} rank(s) on {} node(s)", ranks, pending_->waiting.size());
  if (pending_->waiting.empty()) return Finish();
  pending_->timer = clock_.After(common::DurationOf(timeout) + kAnswerMargin, [this] { Finish(); });
}

void StacksRequests::OnCaptured(int node_id, const v1::StacksCaptured& captured) {
  if (!pending_ || captured.request() != pending_->id || pending_->waiting.erase(node_id) == 0) {
    return;  // a request that was answered already (its time ran out)
  }
  const std::string host = nodes_.HostOf(node_id);
  if (host.empty()) return;
  for (const auto& stack : captured.stacks()) {
    v1::RankStack kept = KeptStack(host, stack);
    // Printed as it is by `gangrun stacks`: bounded, and the text is only newlines and tabs
    // apart from printable characters.
    std::string text = stack.text().substr(0, 32 * 1024);
    for (char& c : text) {
      const auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7f) c = '?';
    }
    kept.set_text(std::move(text));
    pending_->stacks.push_back(std::move(kept));
  }
  if (pending_->waiting.empty()) Finish();
}

// Whatever arrived in time; a node that did not answer has its ranks missing, named.
void StacksRequests::Finish() {
  if (!pending_) return;
  Pending request = std::move(*pending_);
  pending_.reset();
  std::sort(request.stacks.begin(), request.stacks.end(),
            [](const auto& a, const auto& b) { return a.rank() < b.rank(); });
  v1::StacksResponse response;
  response.set_generation(nodes_.generation());
  response.set_texts_left_out(request.texts_left_out);
  const std::vector<v1::StackGroup> groups = GroupStacks(request.stacks);
  response.set_summary(DescribeGroups(groups));
  for (const auto& group : groups) *response.add_groups() = group;
  std::vector<std::string> missing;
  for (int id : request.waiting) {
    const std::string host = nodes_.HostOf(id);
    missing.push_back(host.empty() ? "a node that left" : host);
  }
  if (!missing.empty()) {
    response.set_summary(response.summary() + "; no answer in time from " +
                         std::to_string(missing.size()) + " node(s), e.g. " + missing.front());
  }
  nodes_.Record(Event::kStacksRequested, {{"generation", nodes_.generation()},
                                          {"ranks", request.stacks.size()},
                                          {"summary", response.summary()}});
  for (auto& stack : request.stacks) *response.add_stacks() = std::move(stack);
  auto done = std::move(request.done);
  done(std::move(response));
}

}  // namespace gangrun::scheduler
