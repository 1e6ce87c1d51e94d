#pragma once
// A client of etcd's v3 API (the members of a --store URL), through the gRPC gangrun links:
// the calls a job's store needs, each bounded by the config's request timeout. Thread-safe;
// every call blocks its caller (the store's own thread: store/run_store.h), never the
// launcher's event loop.
//
// Messages come from proto/etcd/ (etcd's own names and field numbers, written out). Errors
// say which store and what failed: "the store etcd://127.0.0.1:2379: ... (UNAVAILABLE)".

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "store/store_config.h"

namespace gangrun::store {

class EtcdClient {
 public:
  // Builds the channel (nothing is sent yet); fails for unreadable TLS files or a host name
  // that does not resolve.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(const StoreConfig& config);

  const StoreConfig& config() const { return config_; }

  // The serving member's version (Maintenance.Status): whether the store answers at all.
  absl::StatusOr<std::string> Version();
  // The key as of `revision` (0: now); nullopt when it does not exist.
  absl::StatusOr<std::optional<mvccpb::KeyValue>> Get(const std::string& key, int64_t revision = 0);
  // Every key under `prefix`.
  absl::StatusOr<std::vector<mvccpb::KeyValue>> GetPrefix(const std::string& prefix);
  absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value,
                              int64_t lease = 0);  // the revision it made
  absl::Status Delete(const std::string& key);
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& request);
  // A lease of `ttl_seconds`; its id.
  absl::StatusOr<int64_t> GrantLease(int64_t ttl_seconds);
  // One keep-alive; the TTL etcd now gives the lease (<= 0: the lease is gone).
  absl::StatusOr<int64_t> KeepAlive(int64_t lease);
  absl::Status Revoke(int64_t lease);
  // The seconds the lease has left (-1: expired or unknown).
  absl::StatusOr<int64_t> TimeToLive(int64_t lease);

  // Compare helpers for Txn.
  static etcdserverpb::Compare CreateRevisionIs(const std::string& key, int64_t revision);
  static etcdserverpb::Compare ModRevisionIs(const std::string& key, int64_t revision);

 private:
  explicit EtcdClient(StoreConfig config, std::shared_ptr<grpc::Channel> channel);
  void Bound(grpc::ClientContext& context) const;
  absl::Status Failed(const std::string& what, const grpc::Status& status) const;

  StoreConfig config_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease_;
  std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance_;
};

// The end of the range of every key that starts with `prefix` (etcd's "prefix + 1").
std::string PrefixEnd(const std::string& prefix);

}  // namespace gangrun::store
