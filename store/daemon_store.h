#pragma once
// The daemon's keys in the store (README "The daemon on a store"):
//
//   <prefix>/daemon/active             the active daemon (JSON: host, address, pid), bound to
//                                      its lease; the standbys campaign for it
//   <prefix>/daemon/jobs/<job id>      a job's record (JSON: its submission, state, placement,
//                                      generation, restarts used, outcome), written only by
//                                      the active daemon, fenced by its term (the active key's
//                                      create revision)
//   <prefix>/daemon/agents/<name>      an agent's standing (JSON: state, reason, since, the
//                                      failures attributed to it; daemon/agent_standing.h),
//                                      written by the active daemon, fenced by its term
//   <prefix>/runs/<job id>/scheduler   where the job's scheduler listens, bound to the same
//                                      lease: the job's launchers follow it (--store_follow)
//
// Every call blocks (the daemon's store thread) and is bounded by the request timeout.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "store/etcd_client.h"
#include "store/run_store.h"

namespace gangrun::store {

// The daemon's lease: a paused or cut-off daemon is replaced this long after its last
// keep-alive; the launchers of its jobs look for the next one for this long and more.
inline constexpr int64_t kDaemonLeaseSeconds = 5;

class DaemonStore {
 public:
  explicit DaemonStore(std::unique_ptr<EtcdClient> client) : client_(std::move(client)) {}

  EtcdClient& client() { return *client_; }
  std::string active_key() const { return Prefix() + "/daemon/active"; }
  std::string jobs_prefix() const { return Prefix() + "/daemon/jobs/"; }
  std::string agents_prefix() const { return AgentsPrefix(*client_); }
  // The same for any client of the store (a one-shot launcher reads its host's standing).
  static std::string AgentsPrefix(const EtcdClient& client) {
    return "/" + client.config().prefix + "/daemon/agents/";
  }
  std::string run_key(const std::string& job_id) const {
    return Prefix() + "/runs/" + job_id + "/scheduler";
  }

  absl::StatusOr<std::optional<SchedulerInfo>> Active() { return HolderOf(*client_, active_key()); }
  // Every job record (those that do not parse are skipped, and said in `skipped`).
  absl::StatusOr<std::vector<nlohmann::json>> Jobs(std::vector<std::string>* skipped = nullptr);
  // Writes a job's record, or names where its scheduler listens, if `term` is still the active
  // daemon's; false (no error) when it is not.
  absl::StatusOr<bool> PutJob(int64_t term, const std::string& job_id, const nlohmann::json& job);
  // Every agent's standing record (objects with a "name"; the others are skipped), and one
  // written if `term` is still the active daemon's.
  absl::StatusOr<std::vector<nlohmann::json>> Agents();
  absl::StatusOr<bool> PutAgent(int64_t term, const std::string& name, const nlohmann::json& agent);
  // Deletes job records (finished jobs past the history's bounds) if `term` is still the
  // active daemon's; false (no error) when it is not. At most kDeletesPerTxn keys a
  // transaction (etcd's --max-txn-ops is 128 by default).
  static constexpr size_t kDeletesPerTxn = 100;
  absl::StatusOr<bool> DeleteJobs(int64_t term, const std::vector<std::string>& job_ids);
  absl::StatusOr<bool> PublishScheduler(int64_t term, const std::string& job_id,
                                        const SchedulerInfo& at, int64_t lease);

 private:
  std::string Prefix() const { return "/" + client_->config().prefix; }
  absl::StatusOr<bool> FencedPut(int64_t term, const std::string& key, const std::string& value,
                                 int64_t lease);
  std::unique_ptr<EtcdClient> client_;
};

}  // namespace gangrun::store
