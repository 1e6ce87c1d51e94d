#pragma once
// Network helpers: names, addresses, ports.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gangrun::common {

std::string Hostname();

// Resolves an IPv4/IPv6 literal or a host name to its numeric addresses (literals first as
// given). Fails with a message naming the host when it does not resolve.
absl::StatusOr<std::vector<std::string>> ResolveHost(const std::string& host);

// True when `address` (numeric) is one of this host's interface addresses or loopback.
bool IsLocalAddress(const std::string& address);

// The local source address this host would use to reach `address` (no packet is sent).
absl::StatusOr<std::string> LocalAddressToward(const std::string& address);

// A TCP port that is free right now on `address`, different from every port in `avoid`.
absl::StatusOr<int> PickFreePort(const std::string& address, const std::vector<int>& avoid);

}  // namespace gangrun::common
