#include "store/store_config.h"

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/net.h"

namespace gangrun::store {
namespace {

constexpr char kScheme[] = "etcd://";

absl::Status Bad(absl::string_view url, const std::string& why) {
  return absl::InvalidArgumentError("--store " + std::string(url) + ": " + why +
                                    " (expected etcd://HOST:PORT[,HOST:PORT...][/PREFIX])");
}

}  // namespace

absl::StatusOr<StoreConfig> ParseStoreUrl(absl::string_view url) {
  StoreConfig config;
  config.url = std::string(url);
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, kScheme)) {
    if (absl::StrContains(url, "://")) {
      return Bad(url, "the scheme is not etcd:// (etcd is the one store gangrun speaks)");
    }
    return Bad(url, "no etcd:// scheme");
  }
  absl::string_view hosts = rest;
  if (size_t slash = rest.find('/'); slash != absl::string_view::npos) {
    hosts = rest.substr(0, slash);
    absl::string_view prefix = absl::StripSuffix(rest.substr(slash + 1), "/");
    if (prefix.empty()) return Bad(url, "an empty key prefix after '/'");
    for (char c : prefix) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.' || c == '/';
      if (!ok) return Bad(url, "the key prefix may hold letters, digits, '-', '_', '.', '/'");
    }
    config.prefix = std::string(prefix);
  }
  if (hosts.empty()) return Bad(url, "no HOST:PORT");
  for (absl::string_view part : absl::StrSplit(hosts, ',')) {
    auto parsed = common::ParseHostPort(std::string(part), "--store");
    if (!parsed.ok()) return Bad(url, "'" + std::string(part) + "' is not HOST:PORT");
    config.endpoints.push_back(parsed->ToString());
  }
  return config;
}

absl::StatusOr<StoreConfig> ParseStoreUrl(absl::string_view url, std::string cacert,
                                          std::string cert, std::string key) {
  auto config = ParseStoreUrl(url);
  if (!config.ok()) return config;
  config->cacert = std::move(cacert);
  config->cert = std::move(cert);
  config->key = std::move(key);
  return config;
}

}  // namespace gangrun::store
