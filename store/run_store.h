#pragma once
// One run id's keys in the store, and the lease that makes one launcher its scheduler.
//
//   <prefix>/runs/<run id>/scheduler   who coordinates the run now (JSON: host, address, pid),
//                                      bound to that launcher's lease: it vanishes when the
//                                      lease ends (the launcher died, paused or was cut off)
//   <prefix>/runs/<run id>/record      the job's record (JSON: generation, restarts used,
//                                      members, outcome, ...), written only by the scheduler
//                                      with compare-and-swap: the scheduler key must still be
//                                      the one it created (its term: the key's create
//                                      revision) and the record the revision it last wrote
//
// Every call blocks (it runs on the store's thread, store/worker.h, or before the event loop
// starts) and is bounded by the config's request timeout.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "store/etcd_client.h"

namespace gangrun::store {

// The scheduler of a run, as its key says.
struct SchedulerInfo {
  std::string host;     // the launcher's host name
  std::string address;  // where its scheduler listens (HOST:PORT)
  int pid = 0;
  int64_t term = 0;  // the key's create revision: a new one for every election
  int64_t lease = 0;
  // Every address it may be reached at, `address` first (a host on several networks); a
  // launcher keeps the first that answers. At most common::kMaxCandidates are read.
  std::vector<std::string> addresses;
  nlohmann::json ToJson() const;
};

// How long a client waits for one of a scheduler's addresses to answer: each is dialled at
// once, and a host that is up answers or refuses within a round trip.
inline constexpr std::chrono::milliseconds kAnswerTime{2000};
// The scheduler's address this host reaches: with several advertised, the first that accepts
// a connection within kAnswerTime (README "Addresses"); its main address when none does (the
// caller then tries it, and says what failed, as with one address).
std::string AddressToReach(const SchedulerInfo& scheduler);

// Whoever holds a key bound to a lease (an election key), from the key as it is stored.
SchedulerInfo InfoOf(const mvccpb::KeyValue& kv);

struct Campaign {
  bool won = false;
  SchedulerInfo scheduler;  // whoever holds the key afterwards (`term` set)
};
// Creates `key` with `me`, bound to `lease`, if nobody holds it; either way, who holds it then.
absl::StatusOr<Campaign> CampaignFor(EtcdClient& client, const std::string& key,
                                     const SchedulerInfo& me, int64_t lease);
absl::StatusOr<std::optional<SchedulerInfo>> HolderOf(EtcdClient& client, const std::string& key);
// A campaign with a fresh lease of `ttl_seconds`: granted, then CampaignFor. The lease is
// revoked unless the campaign won; then it is the winner's.
struct LeasedCampaign {
  Campaign campaign;
  int64_t lease = 0;
};
absl::StatusOr<LeasedCampaign> CampaignWithLease(EtcdClient& client, const std::string& key,
                                                 const SchedulerInfo& me, int64_t ttl_seconds);

struct Record {
  nlohmann::json value;      // null when there is none
  int64_t mod_revision = 0;  // 0 when there is none
};

class RunStore {
 public:
  RunStore(std::unique_ptr<EtcdClient> client, std::string run_id);

  EtcdClient& client() { return *client_; }
  const std::string& run_id() const { return run_id_; }
  std::string scheduler_key() const;
  std::string record_key() const;

  // The store answers (its version), or why not.
  absl::StatusOr<std::string> Check();
  // Becomes the run's scheduler if nobody is (the scheduler key is created with `me`, bound
  // to `lease`); either way, the scheduler the key names afterwards (`term` set).
  using Campaign = store::Campaign;
  absl::StatusOr<Campaign> Run(const SchedulerInfo& me, int64_t lease);
  absl::StatusOr<std::optional<SchedulerInfo>> Scheduler();
  absl::StatusOr<Record> ReadRecord();
  // Writes the record if `term` still holds the scheduler key and the record is still at
  // `record.mod_revision`; then `record.mod_revision` is the new one. False (no error) when
  // the fence held: another scheduler's term, or another writer.
  absl::StatusOr<bool> WriteRecord(int64_t term, Record& record);
  // Gives up the scheduler key if `term` still holds it (a clean end: the next run of this id
  // need not wait out the lease).
  absl::Status Resign(int64_t term);
  // Resigns `term` and revokes its lease, best effort (a campaign that cannot go on, or a run
  // that is over): what is left expires with the lease anyway.
  void GiveUp(int64_t term, int64_t lease);

 private:
  std::unique_ptr<EtcdClient> client_;
  std::string run_id_;
};

// Keeps a lease alive from its own thread, a keep-alive every TTL / 3 (after one that failed,
// another within 500 ms). Valid() says whether the lease is known to live now: a keep-alive
// etcd answered was sent less than a TTL ago.
// When etcd says the lease is gone, `on_lost` runs once (on the keeper's thread).
class LeaseKeeper {
 public:
  LeaseKeeper(EtcdClient& client, int64_t lease, common::Duration ttl,
              std::function<void(const std::string& why)> on_lost);
  ~LeaseKeeper();  // stops the thread (the lease is left to expire or be revoked)

  bool Valid() const;
  // True once the lease has gone unconfirmed for a whole TTL past its validity: etcd has let
  // it expire whether or not this process can still reach the store.
  bool SurelyExpired() const;
  // "" while etcd answers; otherwise why the last keep-alive failed and since when.
  std::string Unreachable() const;
  int64_t lease() const { return lease_; }

 private:
  void Loop();

  EtcdClient& client_;
  const int64_t lease_;
  const common::Duration ttl_;
  std::function<void(const std::string&)> on_lost_;
  std::atomic<int64_t> valid_until_ns_;  // steady clock
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::string unreachable_;  // guarded by mu_
  std::thread thread_;
};

// What `status` says while `keeper`'s store (at `url`) does not answer ("" while it does, or
// with no keeper): a failover is not possible now.
std::string UnreachableNote(const LeaseKeeper* keeper, const std::string& url);

// The lease TTL for a run: the node timeout, rounded up to whole seconds, at least 2 s (etcd's
// least TTL with its default election timeout is about 1.5 s).
int64_t LeaseSecondsFor(common::Duration node_timeout);

}  // namespace gangrun::store
