#include "launcher/store_role.h"

#include <unistd.h>

#include <boost/asio/post.hpp>
#include <thread>

#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/status.h"
#include "launcher/launcher.h"
#include "nlohmann/json.hpp"
#include "proto/conversions.h"
#include "scheduler/job_record.h"
#include "scheduler/peer_checks.h"
#include "store/daemon_store.h"

namespace gangrun::launcher {
namespace {

using std::chrono::steady_clock;

std::string Who(const nlohmann::json& scheduler) {
  if (!scheduler.is_object()) return "the scheduler's host";
  return "the scheduler's host " + scheduler::RecordField(scheduler, "host", std::string("?")) +
         " (" + scheduler::RecordField(scheduler, "address", std::string("?")) + ", launcher pid " +
         std::to_string(scheduler::RecordField(scheduler, "pid", 0)) + ")";
}

// The unspecified address of `address`'s family: a listener on every address of the host.
std::string Wildcard(const std::string& address) {
  return address.find(':') != std::string::npos ? "::" : "0.0.0.0";
}

// The scheduler's address this host reaches (store::AddressToReach), said when it is not the
// main one.
std::string Reachable(const store::SchedulerInfo& scheduler) {
  const std::string reached = store::AddressToReach(scheduler);
  if (reached != scheduler.address) {
    common::Logger("launcher")
        ->info("the scheduler's host {} advertises {}; this host reaches it at {}", scheduler.host,
               absl::StrJoin(scheduler.addresses, ", "), reached);
  }
  return reached;
}

}  // namespace

struct StoreRole::Campaigned {
  bool won = false;
  store::SchedulerInfo scheduler;  // the winner (this launcher when won)
  int64_t lease = 0;               // won: ours
  store::Record record;            // won: the record as found
};

absl::StatusOr<std::unique_ptr<StoreRole>> StoreRole::Open(boost::asio::io_context& io,
                                                           common::Clock& clock,
                                                           const Options& options,
                                                           const HostFacts& facts) {
  ASSIGN_OR_RETURN(store::StoreConfig config,
                   store::ParseStoreUrl(options.store, options.store_cacert, options.store_cert,
                                        options.store_key));
  std::unique_ptr<StoreRole> role(new StoreRole(io, clock, options, facts, config));
  ASSIGN_OR_RETURN(auto client, store::EtcdClient::Connect(config));
  role->store_ = std::make_unique<store::RunStore>(std::move(client), facts.run_id);
  auto version = role->store_->Check();
  if (!version.ok()) {
    return absl::UnavailableError("cannot reach the store " + config.url + ": " +
                                  std::string(version.status().message()));
  }
  common::Logger("launcher")
      ->info("the store of record is {} (etcd {}), run {} under {}", config.url, *version,
             facts.run_id, role->store_->scheduler_key());
  return role;
}

StoreRole::StoreRole(boost::asio::io_context& io, common::Clock& clock, const Options& options,
                     const HostFacts& facts, store::StoreConfig config)
    : io_(io),
      clock_(clock),
      options_(options),
      facts_(facts),
      config_(std::move(config)),
      ttl_seconds_(store::LeaseSecondsFor(common::DurationOf(options.node_timeout))),
      worker_(std::make_unique<store::Worker>()) {}

StoreRole::~StoreRole() {
  closing_ = true;
  if (keeper_) {
    const int64_t lease = keeper_->lease();
    keeper_.reset();  // its thread posts to the store's thread: it goes first
    worker_->Post([this, lease] { (void)store_->client().Revoke(lease); });
  }
  worker_.reset();  // runs what is left (the last record, the resignation, the revocation)
}

common::Duration StoreRole::seek_time() const {
  if (options_.store_follow) {
    // The daemon's lease, then a standby's campaign and its adoption of every job.
    return std::chrono::seconds(store::kDaemonLeaseSeconds + 4) +
           common::DurationOf(options_.node_timeout);
  }
  return std::chrono::seconds(ttl_seconds_ + 1) + common::DurationOf(options_.node_timeout);
}

// Where this launcher's scheduler would be reached: its address (facts_.local_ip) first, then
// its host's other interface addresses of that family, so that a host on another network
// reaches it too (README "Addresses"). --local_addr, or a loopback address, is the only one.
void StoreRole::Advertise(store::SchedulerInfo& me) const {
  std::vector<std::string> hosts = {facts_.local_ip};
  const bool v6 = facts_.local_ip.find(':') != std::string::npos;
  for (auto& address : OtherAddresses(options_, facts_)) {
    // Those of its family: what a wildcard of that family listens on.
    if ((address.find(':') != std::string::npos) == v6) hosts.push_back(std::move(address));
  }
  // Several addresses: the scheduler listens on all of this host's (of that family).
  const std::string bind = hosts.size() > 1 ? Wildcard(facts_.local_ip) : facts_.local_ip;
  int port = options_.master_port;
  if (!common::PortIsFree(bind, port)) {
    auto picked = common::PickFreePort(bind, {options_.master_port});
    port = picked.ok() ? *picked : 0;
  }
  me.address = common::JoinHostPort(facts_.local_ip, port);
  me.addresses.clear();
  if (hosts.size() > 1) {
    for (const auto& host : hosts) me.addresses.push_back(common::JoinHostPort(host, port));
  }
}

absl::StatusOr<StoreRole::Campaigned> StoreRole::CampaignOnce() {
  store::SchedulerInfo me;
  me.host = facts_.hostname;
  Advertise(me);
  me.pid = static_cast<int>(getpid());
  ASSIGN_OR_RETURN(
      store::LeasedCampaign leased,
      store::CampaignWithLease(store_->client(), store_->scheduler_key(), me, ttl_seconds_));
  const int64_t lease = leased.lease;
  Campaigned campaigned;
  campaigned.won = leased.campaign.won;
  campaigned.scheduler = leased.campaign.scheduler;
  campaigned.lease = lease;
  if (campaigned.won) {
    auto record = store_->ReadRecord();
    if (!record.ok()) {
      store_->GiveUp(campaigned.scheduler.term, lease);
      return record.status();
    }
    campaigned.record = std::move(*record);
    if (!campaigned.record.value.is_object() || !campaigned.record.value.contains("outcome")) {
      // The term is claimed in the record before this launcher does anything as the
      // scheduler: a record unchanged since a scheduler's last write proves that nobody else
      // coordinated in between (Recover relies on it).
      absl::Status claimed = Claim(campaigned.scheduler, campaigned.record);
      if (!claimed.ok()) {
        store_->GiveUp(campaigned.scheduler.term, lease);
        return claimed;
      }
    }
  }
  return campaigned;
}

absl::Status StoreRole::Claim(const store::SchedulerInfo& me, store::Record& record) {
  nlohmann::json claimed = record.value.is_object()
                               ? record.value
                               : nlohmann::json{{"generation", 0}, {"restarts_used", 0}};
  claimed["term"] = me.term;
  claimed["run_id"] = facts_.run_id;
  claimed["scheduler"] = me.ToJson();
  store::Record next{claimed, record.mod_revision};
  auto written = store_->WriteRecord(me.term, next);
  if (!written.ok()) return written.status();
  if (!*written) {
    return absl::UnavailableError("the record of run " + facts_.run_id +
                                  " changed while this launcher was elected; try again");
  }
  next.value = record.value;  // what a takeover reads: the record as the lost one left it
  record = next;
  term_ = me.term;
  return absl::OkStatus();
}

void StoreRole::StartKeeper(int64_t lease) {
  recovering_ = false;
  keeper_ = std::make_unique<store::LeaseKeeper>(
      store_->client(), lease, std::chrono::seconds(ttl_seconds_),
      [this, me = me_](const std::string& why) {
        worker_->Post([this, me, why] { Recover(me, why); });
      });
}

// Store thread. The store let the lease expire (this launcher was paused past it, or could
// not reach the store for longer). If nobody holds the run now and the record is still the
// one this scheduler last wrote, nobody else coordinated meanwhile: it is elected again and
// goes on. Otherwise it steps down.
void StoreRole::Recover(store::SchedulerInfo me, const std::string& why) {
  if (closing_) return;  // the launcher is ending: nothing to renew
  auto step_down = [this](std::string reason) {
    boost::asio::post(io_, [this, reason] {
      if (fenced_.exchange(true)) return;
      if (on_step_down_) on_step_down_(reason);
    });
  };
  auto holder = store_->Scheduler();
  // Renewed already (the record's refusal and the keeper may both report one expiry).
  if (holder.ok() && holder->has_value() && (*holder)->term == term_) return;
  if (!holder.ok() || holder->has_value()) return step_down(why);
  auto lease = store_->client().GrantLease(ttl_seconds_);
  if (!lease.ok()) return step_down(why);
  auto campaign = store_->Run(me, *lease);
  if (!campaign.ok() || !campaign->won) {
    (void)store_->client().Revoke(*lease);
    return step_down(why);
  }
  // Untouched: the revision this scheduler knows, or one of its own writes whose answer it
  // never heard (a write sent before a pause lands; its deadline passes in the pause). Only
  // this scheduler's writes pass the fence of its term; any other writes its own term first.
  auto record = store_->ReadRecord();
  const bool untouched =
      record.ok() && (record->mod_revision == record_.mod_revision ||
                      (record->value.is_object() && record->value.contains("term") &&
                       record->value["term"] == term_.load()));
  store::Record claimed = record_;
  if (untouched) claimed.mod_revision = record->mod_revision;
  if (!untouched || !Claim(campaign->scheduler, claimed).ok()) {
    store_->GiveUp(campaign->scheduler.term, *lease);
    return step_down(why + "; another scheduler wrote the job's record meanwhile");
  }
  record_.mod_revision = claimed.mod_revision;
  const store::SchedulerInfo renewed = campaign->scheduler;
  boost::asio::post(io_, [this, renewed, lease = *lease, why] {
    if (fenced_) return;
    me_ = followed_ = renewed;
    StartKeeper(lease);
    common::Logger("launcher")
        ->warn("{}, but no other launcher coordinated run {} meanwhile: elected again (term {})",
               why, facts_.run_id, renewed.term);
  });
}

absl::StatusOr<StoreTarget> StoreRole::Begin() {
  if (std::optional<v1::JobOutcome> held = HostHeld()) {
    StoreTarget target;
    target.ended = std::move(held);
    return target;
  }
  ASSIGN_OR_RETURN(Campaigned campaigned, CampaignOnce());
  return Settle(campaigned, /*at_start=*/true);
}

std::optional<v1::JobOutcome> StoreRole::HostHeld() {
  auto kv =
      store_->client().Get(store::DaemonStore::AgentsPrefix(store_->client()) + facts_.hostname);
  if (!kv.ok() || !kv->has_value()) return std::nullopt;  // none, or the campaign will say
  const nlohmann::json record =
      nlohmann::json::parse((*kv)->value(), nullptr, /*allow_exceptions=*/false);
  if (!record.is_object()) return std::nullopt;
  const std::string state = scheduler::RecordField<std::string>(record, "state", "");
  if (state != "drained" && state != "quarantined") return std::nullopt;
  const std::string message =
      "this host (" + facts_.hostname + ") is " + state + " in the store " + config_.url + ": " +
      scheduler::Sanitize(scheduler::RecordField<std::string>(record, "reason", ""),
                          scheduler::kMaxReasonBytes) +
      "; it runs no job until `gangrun undrain " + facts_.hostname + "` (a daemon of the store)";
  common::Logger("launcher")->error("{}", message);
  return proto::Outcome(v1::JobOutcome::KIND_EXCLUDED, message);
}

void StoreRole::Seek(std::function<void(absl::StatusOr<StoreTarget>)> done,
                     const std::string& lost_address) {
  const int64_t old_term = followed_.term;
  const bool follow = options_.store_follow;
  const auto deadline = steady_clock::now() + seek_time();
  const int64_t seconds = std::chrono::duration_cast<std::chrono::seconds>(seek_time()).count();
  common::Logger("launcher")
      ->warn("looking for the job's next scheduler in the store {} (for up to {} s)", config_.url,
             seconds);
  worker_->Post([this, old_term, follow, lost_address, deadline, seconds, done = std::move(done)] {
    auto answer = [this, &done](absl::StatusOr<Campaigned> found) {
      boost::asio::post(io_, [this, done, found = std::move(found)] {
        if (!found.ok()) return done(found.status());
        done(Settle(*found, /*at_start=*/false));
      });
    };
    absl::Status last = absl::OkStatus();
    while (steady_clock::now() < deadline && !closing_) {
      auto holder = store_->Scheduler();
      if (holder.ok() && holder->has_value() && (*holder)->term != old_term &&
          (*holder)->address != lost_address) {
        Campaigned found;
        found.scheduler = **holder;
        return answer(found);
      }
      if (holder.ok() && !holder->has_value() && !follow) {
        auto campaigned = CampaignOnce();
        if (campaigned.ok()) return answer(std::move(campaigned));
        last = campaigned.status();
      } else if (!holder.ok()) {
        last = holder.status();
      }
      // The old scheduler's lease has not ended yet (or the store does not answer): look
      // again soon. A poll, on the store's thread only.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::string why = std::string(follow ? "no daemon" : "no launcher") +
                      " took the job over within " + std::to_string(seconds) + " s";
    if (!last.ok()) why += " (" + std::string(last.message()) + ")";
    answer(absl::UnavailableError(why));
  });
}

void StoreRole::WatchUntilJoined(std::shared_ptr<std::atomic<bool>> joined,
                                 std::function<void()> changed) {
  const int64_t term = followed_.term;
  worker_->Post([this, term, joined = std::move(joined), changed = std::move(changed)] {
    while (!*joined && !closing_) {
      auto holder = store_->Scheduler();
      if (holder.ok() && (!holder->has_value() || (*holder)->term != term)) {
        boost::asio::post(io_, changed);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a poll, this thread only
    }
  });
}

absl::StatusOr<StoreTarget> StoreRole::Settle(const Campaigned& campaigned, bool at_start) {
  if (!campaigned.won) {
    // A coordinator that advertises loopback to a launcher on another host (one that reaches
    // the store from a non-loopback address) can never be reached from here: say so at once,
    // instead of waiting for the cluster timeout.
    auto advertised = common::ParseHostPort(campaigned.scheduler.address, "the store's address");
    if (advertised.ok() && common::IsLoopbackHost(advertised->host) &&
        !common::IsLoopbackHost(facts_.local_ip)) {
      return absl::UnavailableError(
          "the store " + config_.url + " names " + campaigned.scheduler.address + " (host " +
          campaigned.scheduler.host + ", pid " + std::to_string(campaigned.scheduler.pid) +
          ") as run " + facts_.run_id + "'s scheduler: a loopback address, which this host (" +
          facts_.local_ip +
          ") cannot reach; give that launcher --local_addr with an address the other hosts "
          "reach");
    }
    followed_ = campaigned.scheduler;
    StoreTarget target;
    target.address = Reachable(campaigned.scheduler);
    target.scheduler = campaigned.scheduler;
    return target;
  }
  const nlohmann::json& record = campaigned.record.value;
  const int64_t term = campaigned.scheduler.term;
  const bool has_record = record.is_object();
  if (has_record && record.contains("outcome")) {
    const v1::JobOutcome outcome = scheduler::OutcomeFromRecord(record["outcome"]);
    worker_->Post([this, term, lease = campaigned.lease] { store_->GiveUp(term, lease); });
    if (at_start) {
      return absl::InvalidArgumentError("run " + facts_.run_id + " is over in the store " +
                                        config_.url + " (" + proto::Name(outcome.kind()) +
                                        "): give this job another --run_id (or delete " +
                                        store_->record_key() + ")");
    }
    StoreTarget target;
    target.ended = outcome;
    return target;
  }
  const uint64_t generation = scheduler::RecordField(record, "generation", uint64_t{0});
  const int restarts_used = scheduler::RecordField(record, "restarts_used", 0);
  // Restarts forgiven as a node's hardware's (scheduler/restarts.h) do not count.
  const int forgiven = std::clamp(scheduler::RecordField(record, "restarts_forgiven", 0), 0,
                                  std::max(0, restarts_used));
  const bool elastic = options_.min_workers() < options_.worker_num;
  if (generation > 0 && !elastic && restarts_used - forgiven >= options_.max_restarts) {
    // As when any node of a fixed-size job is lost with no restart left: the job ends.
    v1::JobOutcome lost;
    lost.set_kind(v1::JobOutcome::KIND_NODE_LOST);
    lost.set_message(Who(record.value("scheduler", nlohmann::json())) + " was lost in generation " +
                     std::to_string(generation) + "; no restart is left (" +
                     std::to_string(restarts_used - forgiven) + " of " +
                     std::to_string(options_.max_restarts) + " used)");
    worker_->Post([this, term, lease = campaigned.lease, record = campaigned.record, lost] {
      store::Record ended = record;
      ended.value["outcome"] = scheduler::RecordedOutcome(lost);
      (void)store_->WriteRecord(term, ended);
      store_->GiveUp(term, lease);
    });
    StoreTarget target;
    target.ended = lost;
    return target;
  }
  return Host(campaigned, generation, restarts_used, forgiven);
}

absl::StatusOr<StoreTarget> StoreRole::Host(const Campaigned& campaigned, uint64_t generation,
                                            int restarts_used, int forgiven) {
  ASSIGN_OR_RETURN(scheduler::Scheduler::Options scheduler_options, SchedulerOptionsFor(options_));
  scheduler_options.restarts_forgiven = forgiven;
  if (generation > 0 || campaigned.record.value.is_object()) {
    scheduler_options.takeover = scheduler::Scheduler::Options::Takeover{
        generation, restarts_used,
        Who(campaigned.record.value.value("scheduler", nlohmann::json())) + " was lost"};
  }
  scheduler_options.may_start = [this] {
    if (fenced_ || !keeper_) return false;
    if (keeper_->Valid()) return true;
    // Between generations (no worker runs), a lease unconfirmed a whole TTL past its
    // validity has expired in the store, reachable or not: another launcher may coordinate
    // now. Step down (Recover decides, once per keeper), so that this launcher's node looks
    // for the run's scheduler like any other instead of waiting here for ever (a host cut off
    // from the store and from every node).
    if (keeper_->SurelyExpired() && !recovering_.exchange(true)) {
      worker_->Post([this, me = me_] {
        Recover(me, "the store has not confirmed this scheduler's lease of run " + facts_.run_id +
                        " for longer than its TTL");
      });
    }
    return false;
  };
  scheduler_options.store_note = [this] { return Note(); };
  // Advertised at several addresses: listening on every one of them.
  std::string listen = campaigned.scheduler.address;
  if (campaigned.scheduler.addresses.size() > 1) {
    auto at = common::ParseHostPort(listen, "the scheduler's address");
    if (at.ok()) listen = common::JoinHostPort(Wildcard(at->host), at->port);
  }
  auto role = HostSchedulerAt(io_, clock_, options_, facts_, std::move(scheduler_options), listen);
  if (!role.ok()) {
    worker_->Post([this, term = campaigned.scheduler.term, lease = campaigned.lease] {
      store_->GiveUp(term, lease);
    });
    return role.status();
  }
  me_ = followed_ = campaigned.scheduler;
  fenced_ = false;  // a new term: an earlier step-down of this launcher is over
  // The record is the store thread's: set there, before any write of this scheduler's.
  worker_->Post([this, record = campaigned.record] { record_ = record; });
  role->scheduler->SetOnRecord([this](nlohmann::json record) { OnRecord(std::move(record)); });
  StartKeeper(campaigned.lease);
  common::Logger("launcher")
      ->info("this launcher coordinates run {} (term {}, lease {} s), at {}", facts_.run_id,
             me_.term, ttl_seconds_, me_.address);
  StoreTarget target;
  target.address = me_.address;
  target.scheduler = me_;
  target.hosted_here = true;
  target.role = std::move(*role);
  return target;
}

void StoreRole::OnRecord(nlohmann::json record) {
  record["run_id"] = facts_.run_id;
  record["scheduler"] = me_.ToJson();
  const bool final = record.contains("outcome");
  worker_->Post([this, record = std::move(record), final, me = me_]() mutable {
    const int64_t term = term_;  // the current one (Recover may have renewed it)
    record["term"] = term;
    record_.value = record;
    auto written = store_->WriteRecord(term, record_);
    if (!written.ok()) {
      // No answer is not no write: one that landed is in the store, and the next write's
      // fence needs its revision.
      auto stored = store_->ReadRecord();
      if (stored.ok() && stored->value == record_.value) {
        record_.mod_revision = stored->mod_revision;
        return;
      }
      common::Logger("launcher")
          ->warn("the job's record was not written: {}", std::string(written.status().message()));
      return;
    }
    if (!*written) {
      // The fence held: the lease ran out (nobody else may have acted: Recover tells) or
      // another scheduler holds the run.
      Recover(me, "the store refused this scheduler's record of run " + facts_.run_id);
      return;
    }
    if (final) (void)store_->Resign(term);  // the run is over: nobody need wait for the lease
  });
}

std::string StoreRole::Note() const {
  if (fenced_) return "this scheduler stepped down: the store gave its lease to no one or another";
  return store::UnreachableNote(keeper_.get(), config_.url);
}

}  // namespace gangrun::launcher
