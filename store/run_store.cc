#include "store/run_store.h"

#include <algorithm>
#include <cmath>

#include "common/net.h"

namespace gangrun::store {
namespace {

using std::chrono::duration_cast;
using std::chrono::nanoseconds;
using std::chrono::steady_clock;

// How soon a failed keep-alive is tried again (at most; a TTL / 3 if that is sooner). etcd's
// own client waits 500 ms before it opens a new keep-alive stream.
constexpr common::Duration kKeepAliveRetry = std::chrono::milliseconds(500);

int64_t NowNs() {
  return duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

SchedulerInfo InfoOf(const mvccpb::KeyValue& kv) {
  SchedulerInfo info;
  info.term = kv.create_revision();
  info.lease = kv.lease();
  nlohmann::json value = nlohmann::json::parse(kv.value(), nullptr, /*allow_exceptions=*/false);
  if (!value.is_object()) return info;
  try {
    info.host = value.value("host", "");
    info.address = value.value("address", "");
    info.pid = value.value("pid", 0);
    if (value.contains("addresses") && value["addresses"].is_array()) {
      for (const auto& address : value["addresses"]) {
        if (!address.is_string()) continue;
        if (info.addresses.size() == common::kMaxCandidates) break;
        info.addresses.push_back(address.get<std::string>());
      }
    }
  } catch (const nlohmann::json::exception&) {
    // Fields of other types: a key gangrun did not write; it names nobody reachable.
  }
  return info;
}

std::string AddressToReach(const SchedulerInfo& scheduler) {
  if (scheduler.addresses.size() < 2) return scheduler.address;
  const std::string answered = common::FirstThatAnswers(scheduler.addresses, kAnswerTime);
  return answered.empty() ? scheduler.address : answered;
}

nlohmann::json SchedulerInfo::ToJson() const {
  nlohmann::json json = {{"host", host}, {"address", address}, {"pid", pid}};
  if (!addresses.empty()) json["addresses"] = addresses;
  return json;
}

std::string UnreachableNote(const LeaseKeeper* keeper, const std::string& url) {
  const std::string unreachable = keeper != nullptr ? keeper->Unreachable() : "";
  if (unreachable.empty()) return "";
  return "the store " + url + " does not answer (" + unreachable +
         "): a failover is not possible now";
}

int64_t LeaseSecondsFor(common::Duration node_timeout) {
  const double seconds = std::chrono::duration<double>(node_timeout).count();
  return std::max<int64_t>(2, static_cast<int64_t>(std::ceil(seconds)));
}

RunStore::RunStore(std::unique_ptr<EtcdClient> client, std::string run_id)
    : client_(std::move(client)), run_id_(std::move(run_id)) {}

std::string RunStore::scheduler_key() const {
  return "/" + client_->config().prefix + "/runs/" + run_id_ + "/scheduler";
}

std::string RunStore::record_key() const {
  return "/" + client_->config().prefix + "/runs/" + run_id_ + "/record";
}

absl::StatusOr<std::string> RunStore::Check() { return client_->Version(); }

absl::StatusOr<Campaign> CampaignFor(EtcdClient& client, const std::string& key,
                                     const SchedulerInfo& me, int64_t lease) {
  etcdserverpb::TxnRequest txn;
  *txn.add_compare() = EtcdClient::CreateRevisionIs(key, 0);  // nobody holds it
  etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(me.ToJson().dump());
  put->set_lease(lease);
  txn.add_success()->mutable_request_range()->set_key(key);
  txn.add_failure()->mutable_request_range()->set_key(key);
  auto response = client.Txn(txn);
  if (!response.ok()) return response.status();
  Campaign campaign;
  campaign.won = response->succeeded();
  const etcdserverpb::RangeResponse& range =
      response->responses(response->responses_size() - 1).response_range();
  if (range.kvs_size() == 0) {
    // The holder's lease ended between the compare and the read: nobody holds it now.
    return absl::UnavailableError("the key " + key + " changed; try again");
  }
  campaign.scheduler = InfoOf(range.kvs(0));
  return campaign;
}

absl::StatusOr<std::optional<SchedulerInfo>> HolderOf(EtcdClient& client, const std::string& key) {
  auto kv = client.Get(key);
  if (!kv.ok()) return kv.status();
  if (!kv->has_value()) return std::optional<SchedulerInfo>();
  return std::optional<SchedulerInfo>(InfoOf(**kv));
}

absl::StatusOr<LeasedCampaign> CampaignWithLease(EtcdClient& client, const std::string& key,
                                                 const SchedulerInfo& me, int64_t ttl_seconds) {
  auto lease = client.GrantLease(ttl_seconds);
  if (!lease.ok()) return lease.status();
  auto campaign = CampaignFor(client, key, me, *lease);
  if (!campaign.ok() || !campaign->won) {
    (void)client.Revoke(*lease);
    if (!campaign.ok()) return campaign.status();
  }
  return LeasedCampaign{*campaign, *lease};
}

absl::StatusOr<Campaign> RunStore::Run(const SchedulerInfo& me, int64_t lease) {
  return CampaignFor(*client_, scheduler_key(), me, lease);
}

absl::StatusOr<std::optional<SchedulerInfo>> RunStore::Scheduler() {
  return HolderOf(*client_, scheduler_key());
}

absl::StatusOr<Record> RunStore::ReadRecord() {
  auto kv = client_->Get(record_key());
  if (!kv.ok()) return kv.status();
  Record record;
  if (!kv->has_value()) return record;
  record.mod_revision = (*kv)->mod_revision();
  record.value = nlohmann::json::parse((*kv)->value(), nullptr, /*allow_exceptions=*/false);
  if (record.value.is_discarded() || !record.value.is_object()) {
    return absl::DataLossError("the store's record of run " + run_id_ + " (" + record_key() +
                               ") is not a JSON object");
  }
  return record;
}

absl::StatusOr<bool> RunStore::WriteRecord(int64_t term, Record& record) {
  etcdserverpb::TxnRequest txn;
  *txn.add_compare() = EtcdClient::CreateRevisionIs(scheduler_key(), term);
  *txn.add_compare() = EtcdClient::ModRevisionIs(record_key(), record.mod_revision);
  etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(record_key());
  put->set_value(record.value.dump());
  auto response = client_->Txn(txn);
  if (!response.ok()) return response.status();
  if (!response->succeeded()) return false;
  record.mod_revision = response->header().revision();
  return true;
}

absl::Status RunStore::Resign(int64_t term) {
  etcdserverpb::TxnRequest txn;
  *txn.add_compare() = EtcdClient::CreateRevisionIs(scheduler_key(), term);
  txn.add_success()->mutable_request_delete_range()->set_key(scheduler_key());
  auto response = client_->Txn(txn);
  return response.ok() ? absl::OkStatus() : response.status();
}

void RunStore::GiveUp(int64_t term, int64_t lease) {
  (void)Resign(term);
  (void)client_->Revoke(lease);
}

LeaseKeeper::LeaseKeeper(EtcdClient& client, int64_t lease, common::Duration ttl,
                         std::function<void(const std::string&)> on_lost)
    : client_(client),
      lease_(lease),
      ttl_(ttl),
      on_lost_(std::move(on_lost)),
      // Granted just now: valid for a TTL from here (a little less: the grant took time).
      valid_until_ns_(NowNs() + duration_cast<nanoseconds>(ttl).count()),
      thread_([this] { Loop(); }) {}

LeaseKeeper::~LeaseKeeper() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    wake_.notify_all();
  }
  thread_.join();
}

bool LeaseKeeper::Valid() const { return NowNs() < valid_until_ns_.load(); }

bool LeaseKeeper::SurelyExpired() const {
  return NowNs() > valid_until_ns_.load() +
                       std::chrono::duration_cast<std::chrono::nanoseconds>(ttl_).count();
}

std::string LeaseKeeper::Unreachable() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unreachable_;
}

void LeaseKeeper::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  // Since when the store has not answered (the epoch: it answered last time; steady_clock
  // counts from boot, so no failure is ever at the epoch).
  steady_clock::time_point unreachable_since{};
  while (!stop_) {
    const bool unreachable = unreachable_since != steady_clock::time_point{};
    // A TTL / 3 after an answer; after a failure (a member gone, the channel moving to the
    // next one) again soon, so that a slow failover still renews the lease within its TTL.
    const common::Duration wait =
        unreachable ? std::min<common::Duration>(ttl_ / 3, kKeepAliveRetry) : ttl_ / 3;
    wake_.wait_for(lock, wait, [this] { return stop_; });
    if (stop_) break;
    lock.unlock();
    const int64_t sent_ns = NowNs();
    auto ttl = client_.KeepAlive(lease_);
    lock.lock();
    if (ttl.ok() && *ttl > 0) {
      // etcd renewed it for *ttl seconds from when it got the request, after we sent it.
      valid_until_ns_ = sent_ns + static_cast<int64_t>(*ttl) * 1000000000LL;
      unreachable_.clear();
      unreachable_since = {};
      continue;
    }
    if (ttl.ok()) {
      valid_until_ns_ = 0;
      lock.unlock();
      on_lost_("the store says the lease " + std::to_string(lease_) + " has expired");
      return;
    }
    if (unreachable_since == steady_clock::time_point{}) unreachable_since = steady_clock::now();
    const auto seconds =
        std::chrono::duration_cast<std::chrono::seconds>(steady_clock::now() - unreachable_since);
    unreachable_ =
        std::string(ttl.status().message()) + " (for " + std::to_string(seconds.count()) + " s)";
  }
}

}  // namespace gangrun::store
