#pragma once
// Network helpers: names, addresses, ports.

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gangrun::common {

std::string Hostname();

// A parsed "HOST:PORT" ("[v6]:PORT" for an IPv6 literal).
struct HostPort {
  std::string host;  // without brackets
  int port = 0;
  std::string ToString() const;
};

// The one HOST:PORT codec. HOST is an IPv4 or IPv6 literal or a DNS name (letters, digits,
// '-', '.', '_'); PORT is 1..65535, or also 0 with `allow_zero_port` (a listener's "any").
// Nothing is looked up: a malformed address fails here, naming `what` ("--master").
absl::StatusOr<HostPort> ParseHostPort(const std::string& text, const std::string& what,
                                       bool allow_zero_port = false);

// "host:port", with brackets around an IPv6 host.
std::string JoinHostPort(const std::string& host, int port);

// Whether `text` is an IPv4 / IPv6 address literal (no brackets).
bool IsIpv4Literal(const std::string& text);
bool IsIpv6Literal(const std::string& text);

// Resolves an IPv4/IPv6 literal or a host name to its numeric addresses (literals first as
// given). Fails with a message naming the host when it does not resolve.
absl::StatusOr<std::vector<std::string>> ResolveHost(const std::string& host);

// True when `host` (a numeric address or "localhost") is a loopback address: 127.0.0.0/8,
// ::1. The unspecified addresses (0.0.0.0, ::) and every other name are not.
bool IsLoopbackHost(const std::string& host);

// True when `address` (numeric) is one of this host's interface addresses or loopback.
bool IsLocalAddress(const std::string& address);

// This host's addresses that other hosts may reach, from its interfaces that are up: IPv4
// first, then IPv6, in the kernel's order, without loopback and link-local ones.
std::vector<std::string> InterfaceAddresses();

// The local source address this host would use to reach `address` (no packet is sent).
absl::StatusOr<std::string> LocalAddressToward(const std::string& address);

// What listens at a port, as seen by a plaintext HTTP/2 client (gRPC without TLS).
enum class Http2Probe {
  kNoAnswer,           // nothing accepted or said anything within the timeout
  kPlaintextHttp2,     // it answered the HTTP/2 preface with SETTINGS: gRPC without TLS
  kNotPlaintextHttp2,  // it closed, reset, or answered something else (TLS, another protocol)
};
// Connects to `target` (HOST:PORT, numeric host), sends the HTTP/2 client preface and an
// empty SETTINGS frame, and looks at the first bytes that come back within `timeout`.
Http2Probe ProbeHttp2(const std::string& target, std::chrono::milliseconds timeout);
// True when `target` answers that probe with bytes of another protocol: neither HTTP/2 nor a
// TLS record (a web server's "HTTP/1.1 400", an SSH banner). What a gangrun scheduler's port
// never does, with TLS or without.
bool AnswersAnotherProtocol(const std::string& target, std::chrono::milliseconds timeout);

// The first of `candidates` (HOST:PORT, numeric hosts), in their order, that accepts a TCP
// connection within `timeout`. Every candidate is dialled at once; a later one is kept only
// when each earlier one has failed (refused, no route) or the time is up. "" when none
// answered. At most kMaxCandidates are tried (the rest are ignored): one descriptor each.
inline constexpr size_t kMaxCandidates = 16;
std::string FirstThatAnswers(const std::vector<std::string>& candidates,
                             std::chrono::milliseconds timeout);

// The first of `addresses` (numeric) that this host has a route to, "" when none has (no
// packet is sent: what can be known of a host that is not listening yet).
std::string FirstRoutable(const std::vector<std::string>& addresses);

// True when a TCP listener could bind `address`:`port` right now (nobody listens there).
bool PortIsFree(const std::string& address, int port);

// A TCP port that is free right now on `address`, different from every port in `avoid`.
absl::StatusOr<int> PickFreePort(const std::string& address, const std::vector<int>& avoid);

}  // namespace gangrun::common
