#include "common/net.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/status.h"

namespace gangrun::common {
namespace {

std::string SockaddrToString(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof(buf));
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

// Fills `storage` from a numeric address; returns its length, 0 when not numeric.
socklen_t ToSockaddr(const std::string& address, int port, sockaddr_storage* storage) {
  std::memset(storage, 0, sizeof(*storage));
  auto* v4 = reinterpret_cast<sockaddr_in*>(storage);
  if (inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    return sizeof(sockaddr_in);
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(storage);
  if (inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    return sizeof(sockaddr_in6);
  }
  return 0;
}

}  // namespace

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

absl::StatusOr<std::vector<std::string>> ResolveHost(const std::string& host) {
  sockaddr_storage storage;
  if (ToSockaddr(host, 0, &storage) != 0) return std::vector<std::string>{host};
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc != 0) {
    return absl::NotFoundError("cannot resolve host '" + host + "': " + gai_strerror(rc));
  }
  std::vector<std::string> addresses;
  for (addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    std::string a = SockaddrToString(ai->ai_addr);
    if (!a.empty() && std::find(addresses.begin(), addresses.end(), a) == addresses.end()) {
      addresses.push_back(a);
    }
  }
  freeaddrinfo(result);
  if (addresses.empty()) return absl::NotFoundError("host '" + host + "' has no address");
  return addresses;
}

bool IsLocalAddress(const std::string& address) {
  sockaddr_storage storage;
  if (ToSockaddr(address, 0, &storage) == 0) return false;
  if (storage.ss_family == AF_INET) {
    uint32_t a = ntohl(reinterpret_cast<sockaddr_in*>(&storage)->sin_addr.s_addr);
    if ((a >> 24) == 127) return true;
  } else if (address == "::1") {
    return true;
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6) continue;
    found = SockaddrToString(i->ifa_addr) == address;
  }
  freeifaddrs(list);
  return found;
}

absl::StatusOr<std::string> LocalAddressToward(const std::string& address) {
  sockaddr_storage storage;
  socklen_t len = ToSockaddr(address, 9, &storage);
  if (len == 0) return absl::InvalidArgumentError("not a numeric address: " + address);
  int fd = socket(storage.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoToStatus(errno, "socket");
  // A UDP connect only picks a route and a source address; nothing is sent.
  if (connect(fd, reinterpret_cast<sockaddr*>(&storage), len) != 0) {
    int err = errno;
    close(fd);
    return ErrnoToStatus(err, "no route to " + address);
  }
  sockaddr_storage local;
  socklen_t local_len = sizeof(local);
  getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len);
  close(fd);
  return SockaddrToString(reinterpret_cast<sockaddr*>(&local));
}

absl::StatusOr<int> PickFreePort(const std::string& address, const std::vector<int>& avoid) {
  sockaddr_storage storage;
  socklen_t len = ToSockaddr(address, 0, &storage);
  if (len == 0) return absl::InvalidArgumentError("not a numeric address: " + address);
  for (int attempt = 0; attempt < 16; ++attempt) {
    int fd = socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return ErrnoToStatus(errno, "socket");
    if (bind(fd, reinterpret_cast<sockaddr*>(&storage), len) != 0) {
      int err = errno;
      close(fd);
      return ErrnoToStatus(err, "bind " + address + ":0");
    }
    sockaddr_storage bound;
    socklen_t bound_len = sizeof(bound);
    getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
    close(fd);
    int port = bound.ss_family == AF_INET
                   ? ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port)
                   : ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
    if (std::find(avoid.begin(), avoid.end(), port) == avoid.end()) return port;
  }
  return absl::ResourceExhaustedError("no free port on " + address);
}

}  // namespace gangrun::common
