// `gangrun stacks`, the scheduler's half: every rank's stack of the running generation,
// captured by the nodes as at a hang (scheduler/progress.cc) but without stopping anything
// or writing to the logs. Part of the Scheduler actor (scheduler.h): the same strand, the
// same state.

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "scheduler/hang_report.h"
#include "scheduler/scheduler.h"

namespace gangrun::scheduler {
namespace {

using Seconds = std::chrono::duration<double>;

// Margin over the nodes' own capture timeout for their answers to arrive.
constexpr common::Duration kAnswerMargin = std::chrono::seconds(2);

}  // namespace

void Scheduler::RequestStacks(const v1::StacksRequest& request, StacksDone done) {
  GANGRUN_ON_STRAND(strand_);
  if (state_ != State::kRunning) {
    return done(absl::FailedPreconditionError("no generation is running (the job is " +
                                              std::string(JobStateName(state_)) + ")"));
  }
  if (stacks_request_) {
    return done(absl::UnavailableError("another gangrun stacks is being answered; try again"));
  }
  std::set<int> wanted;
  for (int rank : request.ranks()) {
    if (rank < 0 || rank >= options_.world_size) {
      return done(absl::InvalidArgumentError(absl::StrFormat(
          "there is no rank %d (the job's ranks are 0-%d)", rank, options_.world_size - 1)));
    }
    wanted.insert(rank);
  }
  double timeout = request.timeout_seconds() > 0 ? request.timeout_seconds()
                                                 : options_.progress_rules.stack_timeout_seconds();
  timeout = std::clamp(timeout, 0.1, 600.0);
  stacks_request_.emplace();
  stacks_request_->id = ++stacks_requests_;
  stacks_request_->done = std::move(done);
  int ranks = 0;
  for (auto& [id, node] : nodes_) {
    if (!node.joined || node.link == nullptr || node.ended) continue;
    int asked = 0;
    for (const auto& [rank, worker] : node.workers) asked += wanted.empty() || wanted.count(rank);
    if (asked == 0) continue;
    ranks += asked;
    stacks_request_->waiting.insert(id);
  }
  const bool with_text = ranks <= kMaxStackTexts;
  stacks_request_->texts_left_out = !with_text;
  for (int id : stacks_request_->waiting) {
    v1::NodeCommand command;
    auto* capture = command.mutable_capture_stacks();
    capture->set_reason("gangrun stacks");
    capture->set_timeout_seconds(timeout);
    capture->set_request(stacks_request_->id);
    for (int rank : wanted) capture->add_ranks(rank);
    capture->set_with_text(with_text);
    SendTo(nodes_.at(id), std::move(command));
  }
  common::Logger("scheduler")
      ->info("gangrun stacks: capturing {} rank(s) on {} node(s)", ranks,
             stacks_request_->waiting.size());
  if (stacks_request_->waiting.empty()) return FinishStacksRequest();
  stacks_request_->timer =
      clock_.After(std::chrono::duration_cast<common::Duration>(Seconds(timeout)) + kAnswerMargin,
                   [this] { FinishStacksRequest(); });
}

void Scheduler::OnRequestedStacks(int node_id, const v1::StacksCaptured& captured) {
  if (!stacks_request_ || captured.request() != stacks_request_->id ||
      stacks_request_->waiting.erase(node_id) == 0) {
    return;  // a request that was answered already (its time ran out)
  }
  auto node_it = nodes_.find(node_id);
  if (node_it == nodes_.end()) return;
  const NodeState& node = node_it->second;
  for (const auto& stack : captured.stacks()) {
    v1::RankStack kept = KeptStack(node, stack);
    // Printed as it is by `gangrun stacks`: bounded, and the text is only newlines and tabs
    // apart from printable characters.
    std::string text = stack.text().substr(0, 32 * 1024);
    for (char& c : text) {
      const auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7f) c = '?';
    }
    kept.set_text(std::move(text));
    stacks_request_->stacks.push_back(std::move(kept));
  }
  if (stacks_request_->waiting.empty()) FinishStacksRequest();
}

// Whatever arrived in time; a node that did not answer has its ranks missing, named.
void Scheduler::FinishStacksRequest() {
  if (!stacks_request_) return;
  StacksRequest request = std::move(*stacks_request_);
  stacks_request_.reset();
  std::sort(request.stacks.begin(), request.stacks.end(),
            [](const auto& a, const auto& b) { return a.rank() < b.rank(); });
  v1::StacksResponse response;
  response.set_generation(generation_);
  response.set_texts_left_out(request.texts_left_out);
  const std::vector<v1::StackGroup> groups = GroupStacks(request.stacks);
  response.set_summary(DescribeGroups(groups));
  for (const auto& group : groups) *response.add_groups() = group;
  std::vector<std::string> missing;
  for (int id : request.waiting) {
    auto node = nodes_.find(id);
    missing.push_back(node == nodes_.end() ? "a node that left" : node->second.join.node_name);
  }
  if (!missing.empty()) {
    response.set_summary(response.summary() + "; no answer in time from " +
                         std::to_string(missing.size()) + " node(s), e.g. " + missing.front());
  }
  Record(Event::kStacksRequested, {{"generation", generation_},
                                   {"ranks", request.stacks.size()},
                                   {"summary", response.summary()}});
  for (auto& stack : request.stacks) *response.add_stacks() = std::move(stack);
  auto done = std::move(request.done);
  done(std::move(response));
}

}  // namespace gangrun::scheduler
