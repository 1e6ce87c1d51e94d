#pragma once
// A daemon's part in a store (`gangrun scheduler --store URL`; README "The daemon on a
// store"): several daemons, one active. Each campaigns for the store's active key with a
// lease of store::kDaemonLeaseSeconds; a standby answers `status` naming the active one and
// places nothing. The winner reads every job record and adopts the jobs (daemon/adopt.cc);
// from then on it writes each job's record at every job event, fenced by its term, and names
// where each job's scheduler listens (bound to its lease). It steps down, touching nothing,
// when the store says its lease is gone, when a write is refused by the fence, or when its own
// loop did not run for half a lease (a pause: another daemon may be active by now): the
// process exits (3) and its service manager starts it again as a standby.
//
// Store calls run on the store's thread (store/worker.h); results come back on the loop.

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "nlohmann/json.hpp"
#include "store/daemon_store.h"
#include "store/worker.h"

namespace gangrun::daemon {

class StoreLink {
 public:
  struct Callbacks {
    // This daemon won: every job record and every agent's standing the store holds (on the
    // loop).
    std::function<void(std::vector<nlohmann::json> jobs, std::vector<nlohmann::json> agents)>
        on_active;
  };
  // Connects and checks that the store answers (blocking, before the loop runs).
  static absl::StatusOr<std::unique_ptr<StoreLink>> Open(boost::asio::io_context& io,
                                                         common::Clock& clock,
                                                         const store::StoreConfig& config);
  ~StoreLink();

  // Campaigns, as `me` (where this daemon serves), until this daemon is the active one.
  void Start(store::SchedulerInfo me, Callbacks callbacks);
  bool active() const { return term_ > 0; }
  // The active daemon's address as last seen ("" = none); thread-safe.
  std::string active_address() const;
  // A job's record and where its scheduler listens, written in order on the store's thread.
  void SaveJob(const std::string& job_id, nlohmann::json job);
  void Publish(const std::string& job_id, const std::string& address);
  // An agent's standing (daemon/agent_standing.h), written in order on the store's thread.
  void SaveAgent(const std::string& name, nlohmann::json agent);
  // Forgets finished jobs' records (the history's bounds), after what was written before.
  void DeleteJobs(std::vector<std::string> job_ids);
  // Whether the store confirmed this daemon's lease within its TTL: its jobs start no
  // generation otherwise (another daemon may be taking them over). Thread-safe.
  bool LeaseValid() const { return keeper_ && keeper_->Valid(); }
  // What `status` says about the store ("" while it answers).
  std::string Note() const;
  const std::string& url() const { return url_; }

 private:
  StoreLink(boost::asio::io_context& io, common::Clock& clock, std::unique_ptr<store::DaemonStore>,
            std::string url);
  void Campaign();  // store thread
  void OnWon(int64_t term, int64_t lease, std::vector<nlohmann::json> jobs,
             std::vector<nlohmann::json> agents);
  void Tick();  // loop: the pause detector
  [[noreturn]] void StepDown(const std::string& why);

  boost::asio::io_context& io_;
  common::Clock& clock_;
  std::unique_ptr<store::DaemonStore> store_;
  store::SchedulerInfo me_;
  const std::string url_;
  Callbacks callbacks_;
  std::atomic<int64_t> term_{0};
  std::atomic<bool> closing_{false};
  mutable std::mutex mu_;
  std::string active_address_;  // guarded by mu_
  std::unique_ptr<store::LeaseKeeper> keeper_;
  std::unique_ptr<common::Timer> tick_;
  common::TimePoint last_tick_;
  std::unique_ptr<store::Worker> worker_;  // last: it runs what was posted first
};

}  // namespace gangrun::daemon
