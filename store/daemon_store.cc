#include "store/daemon_store.h"

#include <algorithm>

namespace gangrun::store {

absl::StatusOr<std::vector<nlohmann::json>> DaemonStore::Jobs(std::vector<std::string>* skipped) {
  auto kvs = client_->GetPrefix(jobs_prefix());
  if (!kvs.ok()) return kvs.status();
  std::vector<nlohmann::json> jobs;
  for (const auto& kv : *kvs) {
    nlohmann::json job = nlohmann::json::parse(kv.value(), nullptr, /*allow_exceptions=*/false);
    if (job.is_object() && job.contains("id")) {
      jobs.push_back(std::move(job));
    } else if (skipped != nullptr) {
      skipped->push_back(kv.key());
    }
  }
  return jobs;
}

absl::StatusOr<bool> DaemonStore::FencedPut(int64_t term, const std::string& key,
                                            const std::string& value, int64_t lease) {
  etcdserverpb::TxnRequest txn;
  *txn.add_compare() = EtcdClient::CreateRevisionIs(active_key(), term);
  etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  auto response = client_->Txn(txn);
  if (!response.ok()) return response.status();
  return response->succeeded();
}

absl::StatusOr<bool> DaemonStore::PutJob(int64_t term, const std::string& job_id,
                                         const nlohmann::json& job) {
  return FencedPut(term, jobs_prefix() + job_id, job.dump(), 0);
}

absl::StatusOr<std::vector<nlohmann::json>> DaemonStore::Agents() {
  auto kvs = client_->GetPrefix(agents_prefix());
  if (!kvs.ok()) return kvs.status();
  std::vector<nlohmann::json> agents;
  for (const auto& kv : *kvs) {
    nlohmann::json agent = nlohmann::json::parse(kv.value(), nullptr, /*allow_exceptions=*/false);
    if (agent.is_object() && agent.contains("name") && agent["name"].is_string()) {
      agents.push_back(std::move(agent));
    }
  }
  return agents;
}

absl::StatusOr<bool> DaemonStore::PutAgent(int64_t term, const std::string& name,
                                           const nlohmann::json& agent) {
  return FencedPut(term, agents_prefix() + name, agent.dump(), 0);
}

absl::StatusOr<bool> DaemonStore::DeleteJobs(int64_t term,
                                             const std::vector<std::string>& job_ids) {
  for (size_t from = 0; from < job_ids.size(); from += kDeletesPerTxn) {
    etcdserverpb::TxnRequest txn;
    *txn.add_compare() = EtcdClient::CreateRevisionIs(active_key(), term);
    for (size_t i = from; i < std::min(job_ids.size(), from + kDeletesPerTxn); ++i) {
      txn.add_success()->mutable_request_delete_range()->set_key(jobs_prefix() + job_ids[i]);
    }
    auto response = client_->Txn(txn);
    if (!response.ok()) return response.status();
    if (!response->succeeded()) return false;
  }
  return true;
}

absl::StatusOr<bool> DaemonStore::PublishScheduler(int64_t term, const std::string& job_id,
                                                   const SchedulerInfo& at, int64_t lease) {
  return FencedPut(term, run_key(job_id), at.ToJson().dump(), lease);
}

}  // namespace gangrun::store
