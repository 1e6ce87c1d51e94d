#pragma once
// A launcher's part in a job with a store of record (--store; README "A store of record").
//
// Every launcher of the run id may coordinate: at start each one campaigns for the run's
// scheduler key (store/run_store.h) with a lease of --node_timeout (at least 2 s); the winner
// hosts the scheduler, and every launcher, the winner's included, joins it as a node over the
// network. The scheduler writes the job's record at each generation and at the end, fenced by
// its term; it starts no generation unless the store confirmed its lease within the TTL, and
// steps down (its server stops, touching nothing more) when the store says the lease is gone
// or the fence refuses a write.
//
// A node that loses its scheduler stops its workers (its generation is over: the lost
// host's workers are gone) and seeks the next one for up to the lease TTL + --node_timeout:
// once the old scheduler's key is gone it campaigns; the winner takes the job over from the
// record (generation and restarts carry over; the lost host counts as any lost node), the
// others join it. Nobody in time: the node ends as today (exit 4).
//
// Store calls run on the store's thread (store/worker.h); results come back on the loop.

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "gangrun/v1/session.pb.h"
#include "launcher/options.h"
#include "launcher/scheduler_role.h"
#include "launcher/worker_plan.h"
#include "store/run_store.h"
#include "store/worker.h"

namespace gangrun::launcher {

// Where this launcher's node goes next.
struct StoreTarget {
  std::string address;                  // the scheduler to join (HOST:PORT)
  store::SchedulerInfo scheduler;       // who it is
  bool hosted_here = false;             // this launcher won: `role` holds its scheduler
  SchedulerRole role;                   // not started yet
  std::optional<v1::JobOutcome> ended;  // the job is over already: end with this
};

class StoreRole {
 public:
  // Connects and checks that the store answers (blocking: before the loop runs). Unavailable
  // (exit 3) naming the store when it does not.
  static absl::StatusOr<std::unique_ptr<StoreRole>> Open(boost::asio::io_context& io,
                                                         common::Clock& clock,
                                                         const Options& options,
                                                         const HostFacts& facts);
  ~StoreRole();

  // At start (blocking): campaigns.
  absl::StatusOr<StoreTarget> Begin();
  // After this node lost its scheduler (at `lost_address`): seeks the next one in the
  // background; `done` runs on the loop. A daemon's job (--store_follow) never campaigns: it
  // waits for the daemon that adopts the job to name its scheduler.
  void Seek(std::function<void(absl::StatusOr<StoreTarget>)> done,
            const std::string& lost_address = "");
  // A node that follows a scheduler it has not heard from yet: the key it found may be a dead
  // launcher's whose lease has not run out. Looks at the key every 200 ms until `joined` is
  // set; when it names another scheduler or none, `changed` runs on the loop.
  void WatchUntilJoined(std::shared_ptr<std::atomic<bool>> joined, std::function<void()> changed);
  // The store took the lease away, or the fence refused a write: runs on the loop.
  void SetOnStepDown(std::function<void(const std::string& why)> on_step_down) {
    on_step_down_ = std::move(on_step_down);
  }
  // This launcher stepped down: its scheduler may start nothing more.
  void Fence() { fenced_ = true; }
  const store::StoreConfig& config() const { return config_; }
  // How long a node seeks a new scheduler: the lease TTL + --node_timeout.
  common::Duration seek_time() const;

 private:
  StoreRole(boost::asio::io_context& io, common::Clock& clock, const Options& options,
            const HostFacts& facts, store::StoreConfig config);
  // This host's standing as a daemon of the same store keeps it (README "Agents' standing"):
  // drained or quarantined, the outcome this launcher ends with (excluded, exit 6) instead of
  // joining. Blocking, at start.
  std::optional<v1::JobOutcome> HostHeld();
  struct Campaigned;  // what a campaign found (store thread)
  // Store thread: one campaign with a fresh lease.
  absl::StatusOr<Campaigned> CampaignOnce();
  // Loop: turns a campaign's result into a target (and, on a win, a scheduler in `role`).
  absl::StatusOr<StoreTarget> Settle(const Campaigned& campaigned, bool at_start);
  absl::StatusOr<StoreTarget> Host(const Campaigned& campaigned, uint64_t generation,
                                   int restarts_used, int forgiven);
  void OnRecord(nlohmann::json record);  // the scheduler's, on the loop
  // Store thread: writes `me`'s term into the record (compare-and-swap), as the first thing a
  // new scheduler does; `record` then holds the new revision (its value as it was).
  absl::Status Claim(const store::SchedulerInfo& me, store::Record& record);
  void StartKeeper(int64_t lease);                                // loop
  void Recover(store::SchedulerInfo me, const std::string& why);  // store thread
  std::string Note() const;
  void Advertise(store::SchedulerInfo& me) const;  // sets me.address and me.addresses

  boost::asio::io_context& io_;
  common::Clock& clock_;
  const Options& options_;
  const HostFacts& facts_;
  store::StoreConfig config_;
  const int64_t ttl_seconds_;
  std::unique_ptr<store::RunStore> store_;
  std::unique_ptr<store::LeaseKeeper> keeper_;  // while this launcher is the scheduler
  store::SchedulerInfo me_;                     // the scheduler key this launcher holds
  store::SchedulerInfo followed_;               // the scheduler this launcher's node follows
  store::Record record_;                        // the last written (store thread only)
  std::atomic<int64_t> term_{0};                // the term records are written with
  std::atomic<bool> fenced_{false};
  std::atomic<bool> closing_{false};  // the store thread's loops (Seek, the watch) end
  std::function<void(const std::string&)> on_step_down_;
  // Set once may_start has asked Recover about a surely expired lease (per keeper).
  std::atomic<bool> recovering_{false};
  // Last: its destructor runs what was posted (the last record, the resignation) first.
  std::unique_ptr<store::Worker> worker_;
};

}  // namespace gangrun::launcher
