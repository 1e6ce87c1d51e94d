#pragma once
// Where a job's store of record is (--store, GANGRUN_STORE): etcd's v3 API on one or more
// members, with TLS when any of --store_cacert/--store_cert/--store_key is given.
//
//   etcd://HOST:PORT[,HOST:PORT...][/PREFIX]
//
// PREFIX (default "gangrun") is where gangrun's keys live; each run id has its own keys under
// it (store/run_store.h). HOST is an IPv4 or IPv6 literal ([::1]) or a host name.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"

namespace gangrun::store {

struct StoreConfig {
  std::string url;                     // as given, for messages
  std::vector<std::string> endpoints;  // HOST:PORT, in the order given
  std::string prefix = "gangrun";      // the key prefix, without slashes around it
  std::string cacert, cert, key;       // TLS files ("" = none)
  // How long one request may take before the member counts as unreachable.
  common::Duration request_timeout = std::chrono::seconds(2);
  bool uses_tls() const { return !cacert.empty() || !cert.empty() || !key.empty(); }
};

// Parses a --store URL; InvalidArgument naming the expected form otherwise.
absl::StatusOr<StoreConfig> ParseStoreUrl(absl::string_view url);
// The same, with the TLS files of --store_cacert, --store_cert, --store_key ("" = none).
absl::StatusOr<StoreConfig> ParseStoreUrl(absl::string_view url, std::string cacert,
                                          std::string cert, std::string key);

}  // namespace gangrun::store
