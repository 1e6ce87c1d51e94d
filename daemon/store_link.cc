#include "daemon/store_link.h"

#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cstdlib>
#include <thread>

#include "common/logging.h"

namespace gangrun::daemon {

using std::chrono::milliseconds;
using std::chrono::seconds;

absl::StatusOr<std::unique_ptr<StoreLink>> StoreLink::Open(boost::asio::io_context& io,
                                                           common::Clock& clock,
                                                           const store::StoreConfig& config) {
  auto client = store::EtcdClient::Connect(config);
  if (!client.ok()) return client.status();
  auto store = std::make_unique<store::DaemonStore>(std::move(*client));
  if (auto version = store->client().Version(); !version.ok()) {
    return absl::UnavailableError(std::string(version.status().message()));
  }
  return std::unique_ptr<StoreLink>(new StoreLink(io, clock, std::move(store), config.url));
}

StoreLink::StoreLink(boost::asio::io_context& io, common::Clock& clock,
                     std::unique_ptr<store::DaemonStore> store, std::string url)
    : io_(io),
      clock_(clock),
      store_(std::move(store)),
      url_(std::move(url)),
      worker_(std::make_unique<store::Worker>()) {}

StoreLink::~StoreLink() {
  closing_ = true;
  tick_.reset();
  if (keeper_) {
    const int64_t lease = keeper_->lease();
    keeper_.reset();  // its thread posts nothing more
    // A clean end: the standbys need not wait out the lease.
    worker_->Post([this, lease] { (void)store_->client().Revoke(lease); });
  }
  worker_.reset();
}

std::string StoreLink::active_address() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_address_;
}

std::string StoreLink::Note() const { return store::UnreachableNote(keeper_.get(), url_); }

void StoreLink::Start(store::SchedulerInfo me, Callbacks callbacks) {
  me_ = std::move(me);
  callbacks_ = std::move(callbacks);
  common::Logger("daemon")->info("standing by: campaigning for the store {} ({} s lease)", url_,
                                 store::kDaemonLeaseSeconds);
  worker_->Post([this] { Campaign(); });
}

void StoreLink::Campaign() {
  std::string said;
  while (!closing_) {
    auto holder = store_->Active();
    if (holder.ok() && !holder->has_value()) {
      auto elected = store::CampaignWithLease(store_->client(), store_->active_key(), me_,
                                              store::kDaemonLeaseSeconds);
      if (elected.ok() && elected->campaign.won) {
        auto jobs = store_->Jobs();
        auto agents = jobs.ok() ? store_->Agents() : jobs.status();
        if (agents.ok()) {
          const int64_t term = elected->campaign.scheduler.term;
          boost::asio::post(io_, [this, term, lease = elected->lease, jobs = std::move(*jobs),
                                  agents = std::move(*agents)]() mutable {
            OnWon(term, lease, std::move(jobs), std::move(agents));
          });
          return;
        }
        (void)store_->client().Revoke(elected->lease);  // and the key, which was ours
      }
      if (elected.ok()) holder = std::optional<store::SchedulerInfo>(elected->campaign.scheduler);
    }
    if (holder.ok() && holder->has_value()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (active_address_ != (*holder)->address) {
        active_address_ = (*holder)->address;
        common::Logger("daemon")->info("the active daemon is at {} (pid {})", active_address_,
                                       (*holder)->pid);
      }
    } else if (!holder.ok() && said != holder.status().message()) {
      said = std::string(holder.status().message());
      common::Logger("daemon")->warn("standing by: {}", said);
    }
    // A poll on the store's thread: a standby takes over within this of the lease's end.
    std::this_thread::sleep_for(milliseconds(250));
  }
}

void StoreLink::OnWon(int64_t term, int64_t lease, std::vector<nlohmann::json> jobs,
                      std::vector<nlohmann::json> agents) {
  if (closing_) return;
  term_ = term;
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_address_ = me_.address;
  }
  keeper_ = std::make_unique<store::LeaseKeeper>(
      store_->client(), lease, seconds(store::kDaemonLeaseSeconds),
      [this](const std::string& why) { boost::asio::post(io_, [this, why] { StepDown(why); }); });
  common::Logger("daemon")->warn(
      "this daemon is now the active one (term {}): {} job record(s), {} agent record(s)", term,
      jobs.size(), agents.size());
  last_tick_ = clock_.Now();
  Tick();
  callbacks_.on_active(std::move(jobs), std::move(agents));
}

void StoreLink::Tick() {
  const auto now = clock_.Now();
  if (now - last_tick_ > milliseconds(store::kDaemonLeaseSeconds * 1000 / 2)) {
    StepDown("this daemon did not run for " +
             std::to_string(std::chrono::duration_cast<milliseconds>(now - last_tick_).count()) +
             " ms (paused?); another daemon may be active by now");
  }
  last_tick_ = now;
  tick_ = clock_.After(milliseconds(100), [this] { Tick(); });
}

void StoreLink::SaveJob(const std::string& job_id, nlohmann::json job) {
  if (!active()) return;
  worker_->Post([this, job_id, job = std::move(job)] {
    auto written = store_->PutJob(term_, job_id, job);
    if (written.ok() && !*written) {
      boost::asio::post(io_, [this] { StepDown("the store refused a job record: not our term"); });
    } else if (!written.ok()) {
      common::Logger("daemon")->warn("job {}: its record was not written: {}", job_id,
                                     std::string(written.status().message()));
    }
  });
}

void StoreLink::SaveAgent(const std::string& name, nlohmann::json agent) {
  if (!active()) return;
  worker_->Post([this, name, agent = std::move(agent)] {
    auto written = store_->PutAgent(term_, name, agent);
    if (written.ok() && !*written) {
      boost::asio::post(io_,
                        [this] { StepDown("the store refused an agent record: not our term"); });
    } else if (!written.ok()) {
      common::Logger("daemon")->warn("agent {}: its standing was not written: {}", name,
                                     std::string(written.status().message()));
    }
  });
}

void StoreLink::DeleteJobs(std::vector<std::string> job_ids) {
  if (!active() || job_ids.empty()) return;
  worker_->Post([this, job_ids = std::move(job_ids)] {
    auto deleted = store_->DeleteJobs(term_, job_ids);
    if (deleted.ok() && !*deleted) {
      boost::asio::post(io_, [this] { StepDown("the store refused a job record: not our term"); });
    } else if (!deleted.ok()) {
      common::Logger("daemon")->warn("{} finished job record(s) were not deleted: {}",
                                     job_ids.size(), std::string(deleted.status().message()));
    }
  });
}

void StoreLink::Publish(const std::string& job_id, const std::string& address) {
  if (!active() || !keeper_) return;
  store::SchedulerInfo at = me_;
  at.address = address;
  worker_->Post([this, job_id, at, lease = keeper_->lease()] {
    auto written = store_->PublishScheduler(term_, job_id, at, lease);
    if (!written.ok()) {
      common::Logger("daemon")->warn("job {}: where its scheduler listens was not written: {}",
                                     job_id, std::string(written.status().message()));
    }
  });
}

void StoreLink::StepDown(const std::string& why) {
  common::Logger("daemon")->error(
      "{}: this daemon steps down, touching no job (its launchers follow the next active daemon); "
      "exiting",
      why);
  spdlog::default_logger()->flush();
  if (keeper_) (void)store_->client().Revoke(keeper_->lease());
  std::_Exit(3);
}

}  // namespace gangrun::daemon
