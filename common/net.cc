#include "common/net.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
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

std::string HostPort::ToString() const { return JoinHostPort(host, port); }

bool IsIpv4Literal(const std::string& text) {
  in_addr address;
  return inet_pton(AF_INET, text.c_str(), &address) == 1;
}

bool IsIpv6Literal(const std::string& text) {
  in6_addr address;
  return inet_pton(AF_INET6, text.c_str(), &address) == 1;
}

std::string JoinHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

absl::StatusOr<HostPort> ParseHostPort(const std::string& text, const std::string& what,
                                       bool allow_zero_port) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(what + " '" + text + "' is not HOST:PORT: " + why);
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return bad("no port");
  HostPort result;
  result.host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (result.host.size() >= 2 && result.host.front() == '[' && result.host.back() == ']') {
    result.host = result.host.substr(1, result.host.size() - 2);
    sockaddr_storage storage;
    if (ToSockaddr(result.host, 0, &storage) == 0 || storage.ss_family != AF_INET6) {
      return bad("'" + result.host + "' in brackets is not an IPv6 address");
    }
  } else if (result.host.find(':') != std::string::npos) {
    return bad("an IPv6 address needs brackets, as in [::1]:8118");
  } else if (result.host.empty() || result.host.size() > 253 ||
             result.host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789-._") != std::string::npos) {
    return bad("'" + result.host + "' is not a host name or address");
  }
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos) {
    return bad("the port must be a number");
  }
  result.port = std::stoi(port);
  if (result.port > 65535 || (result.port == 0 && !allow_zero_port)) {
    return bad(std::string("the port must be in ") + (allow_zero_port ? "0" : "1") + "..65535");
  }
  return result;
}

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

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost") return true;
  sockaddr_storage storage;
  if (ToSockaddr(host, 0, &storage) == 0) return false;
  if (storage.ss_family == AF_INET) {
    return (ntohl(reinterpret_cast<sockaddr_in*>(&storage)->sin_addr.s_addr) >> 24) == 127;
  }
  return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<sockaddr_in6*>(&storage)->sin6_addr);
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

std::vector<std::string> InterfaceAddresses() {
  std::vector<std::string> v4, v6;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || (i->ifa_flags & IFF_UP) == 0) continue;
    if (i->ifa_addr->sa_family == AF_INET) {
      const uint32_t a = ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
      if ((a >> 24) == 127 || (a >> 16) == 0xa9fe) continue;  // loopback, link-local
      v4.push_back(SockaddrToString(i->ifa_addr));
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      const in6_addr& a = reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr;
      if (IN6_IS_ADDR_LOOPBACK(&a) || IN6_IS_ADDR_LINKLOCAL(&a)) continue;
      v6.push_back(SockaddrToString(i->ifa_addr));
    }
  }
  freeifaddrs(list);
  for (auto& address : v6) {
    if (std::find(v4.begin(), v4.end(), address) == v4.end()) v4.push_back(std::move(address));
  }
  return v4;
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

namespace {

// Waits until `fd` has `events`, or `deadline` passes.
bool WaitFor(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  pollfd p{fd, events, 0};
  return left.count() > 0 && poll(&p, 1, static_cast<int>(left.count())) == 1;
}

// What the peer of a connected `fd` answers to the HTTP/2 client preface: its result, and
// whether its first bytes were another protocol's (neither HTTP/2 nor a TLS record).
struct Probed {
  Http2Probe result = Http2Probe::kNoAnswer;
  bool another_protocol = false;
};

Probed ProbeConnected(int fd, std::chrono::steady_clock::time_point deadline) {
  // The client preface and an empty SETTINGS frame (RFC 9113 3.4).
  static const char kPreface[] =
      "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
  if (send(fd, kPreface, sizeof(kPreface) - 1, MSG_NOSIGNAL) < 0) {
    return {Http2Probe::kNotPlaintextHttp2, false};
  }
  unsigned char header[9];
  size_t have = 0;
  bool closed = false;
  while (have < sizeof(header)) {
    if (!WaitFor(fd, POLLIN, deadline)) break;
    ssize_t n = recv(fd, header + have, sizeof(header) - have, 0);
    if (n <= 0) {  // closed or reset: it wanted TLS, or it said its piece
      closed = true;
      break;
    }
    have += static_cast<size_t>(n);
  }
  if (have == 0) {
    // Nothing said: a close or reset means it wanted TLS; silence is no answer.
    return {closed ? Http2Probe::kNotPlaintextHttp2 : Http2Probe::kNoAnswer, false};
  }
  // A SETTINGS frame (type 4) on stream 0.
  const bool settings = have == sizeof(header) && header[3] == 0x04 && (header[5] & 0x7f) == 0 &&
                        header[6] == 0 && header[7] == 0 && header[8] == 0;
  if (settings) return {Http2Probe::kPlaintextHttp2, false};
  // A TLS record: content type 20..23 (an alert, most likely), then major version 3.
  const bool tls = header[0] >= 0x14 && header[0] <= 0x17 && (have < 2 || header[1] == 0x03);
  return {Http2Probe::kNotPlaintextHttp2, !tls};
}

Probed Probe(const std::string& target, std::chrono::milliseconds timeout) {
  auto address = ParseHostPort(target, "target");
  if (!address.ok()) return {};
  sockaddr_storage storage;
  socklen_t len = ToSockaddr(address->host, address->port, &storage);
  if (len == 0) return {};
  int fd = socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return {};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Probed result;
  int error = 0;
  socklen_t error_len = sizeof(error);
  if (connect(fd, reinterpret_cast<sockaddr*>(&storage), len) == 0 ||
      (errno == EINPROGRESS && WaitFor(fd, POLLOUT, deadline) &&
       getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &error_len) == 0 && error == 0)) {
    result = ProbeConnected(fd, deadline);
  }
  close(fd);
  return result;
}

}  // namespace

Http2Probe ProbeHttp2(const std::string& target, std::chrono::milliseconds timeout) {
  return Probe(target, timeout).result;
}

bool AnswersAnotherProtocol(const std::string& target, std::chrono::milliseconds timeout) {
  return Probe(target, timeout).another_protocol;
}

std::string FirstThatAnswers(const std::vector<std::string>& candidates,
                             std::chrono::milliseconds timeout) {
  const size_t count = std::min(candidates.size(), kMaxCandidates);
  std::vector<int> sockets(count, -1);
  // poll() skips an entry whose fd is negative: a candidate is polled while it is pending.
  std::vector<pollfd> pending(count, pollfd{-1, POLLOUT, 0});
  std::vector<int> verdict(count, -1);  // 0 = pending, 1 = answered, -1 = failed
  for (size_t i = 0; i < count; ++i) {
    auto target = ParseHostPort(candidates[i], "a candidate");
    sockaddr_storage storage;
    const socklen_t len = target.ok() ? ToSockaddr(target->host, target->port, &storage) : 0;
    if (len == 0) continue;
    sockets[i] = socket(storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (sockets[i] < 0) continue;
    if (connect(sockets[i], reinterpret_cast<sockaddr*>(&storage), len) == 0) {
      verdict[i] = 1;
    } else if (errno == EINPROGRESS) {
      verdict[i] = 0;
      pending[i].fd = sockets[i];
    }
  }
  // The first in order that answered, once every earlier one has failed; -1 while one waits.
  auto decided = [&]() -> int {
    for (size_t i = 0; i < count; ++i) {
      if (verdict[i] != -1) return verdict[i] == 1 ? static_cast<int>(i) : -1;
    }
    return static_cast<int>(count);  // every one failed
  };
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int kept = decided();
  while (kept < 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    if (poll(pending.data(), pending.size(), static_cast<int>(left.count())) < 0 &&
        errno != EINTR) {
      break;
    }
    for (size_t i = 0; i < count; ++i) {
      if (pending[i].fd < 0 || pending[i].revents == 0) continue;
      int error = 0;
      socklen_t error_len = sizeof(error);
      getsockopt(pending[i].fd, SOL_SOCKET, SO_ERROR, &error, &error_len);
      verdict[i] = error == 0 && (pending[i].revents & POLLOUT) ? 1 : -1;
      pending[i].fd = -1;
    }
    kept = decided();
  }
  if (kept < 0) {  // time is up: the first that answered, if any did
    for (size_t i = 0; i < count && kept < 0; ++i) {
      if (verdict[i] == 1) kept = static_cast<int>(i);
    }
  }
  for (int fd : sockets) {
    if (fd >= 0) close(fd);
  }
  return kept >= 0 && kept < static_cast<int>(count) ? candidates[kept] : "";
}

std::string FirstRoutable(const std::vector<std::string>& addresses) {
  for (const auto& address : addresses) {
    if (LocalAddressToward(address).ok()) return address;
  }
  return "";
}

bool PortIsFree(const std::string& address, int port) {
  sockaddr_storage storage;
  socklen_t len = ToSockaddr(address, port, &storage);
  if (len == 0) return false;
  int fd = socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int one = 1;  // as a listener would: connections in TIME_WAIT do not make the port taken
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const bool free = bind(fd, reinterpret_cast<sockaddr*>(&storage), len) == 0;
  close(fd);
  return free;
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
