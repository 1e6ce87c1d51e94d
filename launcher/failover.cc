// The launcher's part in a failover, for a job with a store (store_role.h): the node lost its
// scheduler, the search for the next one, and this launcher's scheduler stepping down. Part
// of JobRunner (job_runner.h): the same loop, the same state.

#include <boost/asio/post.hpp>

#include "common/logging.h"
#include "launcher/job_runner.h"
#include "node/remote_link.h"

namespace gangrun::launcher {

void JobRunner::OnSchedulerLost(const std::string& reason, bool unauthenticated) {
  if (store_role_ && options_.store_follow && !unauthenticated && !node_->finished()) {
    return Follow(reason);
  }
  // Wrong credentials are not a failover: the job ends as it would without a store.
  if (store_role_ && !unauthenticated) seeking_ = true;
  node_->OnLinkLost(reason, unauthenticated);
}

void JobRunner::Seek() {
  seek_pending_ = true;
  if (joined_) *joined_ = true;  // a watch of the old key ends: the search takes over
  node_.reset();                 // it has ended; a new one joins the next scheduler
  remote_.reset();
  store_role_->Seek([this](absl::StatusOr<StoreTarget> target) { OnSought(std::move(target)); });
}

void JobRunner::OnSought(absl::StatusOr<StoreTarget> target) {
  if (!seek_pending_) return;  // ended meanwhile (a signal)
  seek_pending_ = false;
  auto log = common::Logger("launcher");
  // The node's own outcome (it lost its scheduler), and why nobody took its place.
  auto end_lost = [this](const std::string& why) {
    v1::JobOutcome lost = *lost_outcome_;
    lost.set_message(lost.message() + "; " + why);
    EndWith(lost);
  };
  if (!target.ok()) return end_lost(std::string(target.status().message()));
  if (target->ended) {
    log->warn("the job is over: {}", target->ended->message());
    return EndWith(*target->ended);
  }
  if (target->hosted_here) {
    role_ = std::move(target->role);
  } else {
    log->info("the job's scheduler is now on {} ({}, launcher pid {})", target->scheduler.host,
              target->address, target->scheduler.pid);
  }
  absl::Status made = MakeRemote(target->address);
  if (made.ok()) made = MakeNode();
  if (!made.ok()) return end_lost("cannot join the next scheduler: " + std::string(made.message()));
  if (role_.scheduler) role_.scheduler->Start();
  ConnectRemote();
  node_->Start();
}

// A daemon's job: the workers go on while the daemon that adopts the job is found.
void JobRunner::Follow(const std::string& reason) {
  node_->Detach(reason);
  if (joined_) *joined_ = true;
  const std::string lost = JoinHostPort(facts_.scheduler_host, facts_.scheduler_port);
  store_role_->Seek(
      [this, reason](absl::StatusOr<StoreTarget> target) { OnFollowed(reason, std::move(target)); },
      lost);
}

void JobRunner::OnFollowed(const std::string& reason, absl::StatusOr<StoreTarget> target) {
  if (!node_) return;
  if (!target.ok()) {
    return node_->OnLinkLost(reason + "; " + std::string(target.status().message()), false);
  }
  common::Logger("launcher")
      ->info("the job's scheduler is now at {}; rejoining with the running generation",
             target->address);
  std::unique_ptr<node::RemoteSchedulerLink> lost = std::move(remote_);
  if (absl::Status made = MakeRemote(target->address); !made.ok()) {
    remote_ = std::move(lost);
    return node_->OnLinkLost(
        reason + "; cannot join the next scheduler: " + std::string(made.message()), false);
  }
  ConnectRemote();
  node_->Reattach(*remote_);
}

void JobRunner::StepDown(const std::string& why) {
  common::Logger("launcher")
      ->error(
          "{}: this launcher no longer coordinates run {}; its scheduler stops, touching "
          "nothing more",
          why, facts_.run_id);
  if (!role_.scheduler) return;
  store_role_->Fence();
  retired_ = std::make_unique<SchedulerRole>(std::move(role_));  // role_ is left empty
  retired_->scheduler->SetOnRecord(nullptr);                     // it writes no record any more
  // Its nodes lose their sessions and seek the next scheduler (this launcher's own node too).
  retired_->server->ShutdownAsync(io_, [this] { retired_.reset(); });
}

void JobRunner::EndWith(const v1::JobOutcome& outcome) {
  seeking_ = false;
  seek_pending_ = false;
  OnFinished(outcome);
}

}  // namespace gangrun::launcher
