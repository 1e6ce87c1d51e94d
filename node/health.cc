// The node's health check (--health_check): run before the node joins and whenever the
// scheduler asks (CheckHealth, between generations), bounded by --health_check_timeout, with
// this node's facts in its environment; its verdict names the check, how it ended and its last
// line of output. Part of the Node actor (node.h): the same strand, the same state.

#include "absl/strings/str_cat.h"
#include "common/env_names.h"
#include "common/logging.h"
#include "node/log_files.h"
#include "node/node.h"

namespace gangrun::node {

void Node::RunHealthCheck(std::function<void(bool healthy, std::string message)> done) {
  if (health_ && health_->live() > 0) {
    // One at a time: a request while one runs (a later round) gets its verdict.
    health_done_ = std::move(done);
    return;
  }
  health_done_ = std::move(done);
  health_timed_out_ = false;
  ProcessSpec spec = options_.health_check;
  spec.rank = -2;  // not a rank
  spec.local_rank = -1;
  spec.env.push_back(std::string(env::kNodeRank) + "=" +
                     std::to_string(generation_ > 0 && !spare_ ? last_node_rank_ : -1));
  spec.env.push_back(std::string(env::kGeneration) + "=" + std::to_string(generation_ + 1));
  spec.env.push_back(std::string(env::kSpare) + "=" + (spare_ ? "1" : "0"));
  ProcessManager::Callbacks callbacks;
  callbacks.on_spawn_failed = [this](const ProcessSpec&, const absl::Status& status) {
    health_timer_.reset();
    auto done = std::move(health_done_);
    if (done)
      done(false, "health check '" + options_.health_check.argv.back() +
                      "' could not start: " + std::string(status.message()));
  };
  callbacks.on_exited = [this](const ProcessSpec&, pid_t, common::ExitStatus status, bool) {
    OnHealthCheckEnded(status);
  };
  // The last generation's processes (all ended) and the last check let go of the backend
  // first: each one's destructor clears the backend's exit handler.
  processes_.reset();
  health_.reset();
  health_ = std::make_unique<ProcessManager>(backend_, clock_, std::move(callbacks));
  common::Logger("node")->info("running the health check: {}", options_.health_check.argv.back());
  health_->Spawn(std::move(spec));
  health_timer_ = clock_.After(options_.health_check_timeout, [this] {
    health_timed_out_ = true;
    if (health_) health_->StopAll(common::Duration::zero());  // SIGKILL to its group
  });
}

void Node::OnHealthCheckEnded(common::ExitStatus status) {
  health_timer_.reset();
  const std::string& command = options_.health_check.argv.back();
  std::string message;
  const bool healthy = status.success() && !health_timed_out_;
  if (!healthy) {
    message = "health check '" + command + "' " +
              (health_timed_out_
                   ? absl::StrCat(
                         "took longer than --health_check_timeout ",
                         std::chrono::duration<double>(options_.health_check_timeout).count(), " s")
                   : status.ToString());
    std::vector<std::string> last = ReadLastLines(options_.health_check.log_path, 1);
    if (!last.empty() && !last.back().empty()) message += ": " + last.back();
    common::Logger("node")->error("{}", message);
  } else {
    common::Logger("node")->info("health check passed");
  }
  auto done = std::move(health_done_);
  if (done) done(healthy, std::move(message));
}

}  // namespace gangrun::node
