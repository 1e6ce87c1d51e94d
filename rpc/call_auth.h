#pragma once
// How a gRPC call (gangrun status, stop, scale and kv, an agent's or a submitter's stream, a
// TLS job's node session) proves that its caller knows the job's token without the token
// crossing the wire: its "authorization" metadata is
//   Gangrun-HMAC t=<unix ms>,n=<nonce, hex>,m=<HMAC-SHA256, hex>
// the MAC keyed by the token over the call's method, the time and the nonce (docs/WIRE.md).
// A recorded call is useless: the server refuses a nonce it has seen within the time window
// and a time outside it. The window is kMaxClockSkew either way, so the hosts' clocks must
// agree to within it (NTP does much better).
//
// Channels add it to every call (rpc::MakeChannel installs CallAuthInterceptor); servers check
// it with a CallAuthenticator. Against an attacker who can alter traffic, use TLS.

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "common/mutex.h"

namespace gangrun::rpc {

inline constexpr std::string_view kCallAuthScheme = "Gangrun-HMAC";
inline constexpr std::chrono::seconds kMaxClockSkew{120};

// The metadata value for one call of `method` ("/gangrun.v1.Scheduler/GetStatus"), made at
// `unix_ms`, with a fresh nonce.
std::string CallCredential(std::string_view token, std::string_view method, int64_t unix_ms);

// Adds CallCredential to every call on a channel; nothing when `token` is empty.
std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> CallAuthInterceptor(
    std::string token);

// The full name of a method of a generated service, as gRPC names calls.
template <typename Service>
std::string MethodPath(std::string_view method) {
  return "/" + std::string(Service::service_full_name()) + "/" + std::string(method);
}

// A server's check of its calls. Thread-safe: gRPC calls it on its own threads.
class CallAuthenticator {
 public:
  // At most this many nonces are remembered; past it (more calls than that within twice the
  // clock window) calls are refused until older ones expire.
  static constexpr size_t kMaxNonces = 1 << 20;

  explicit CallAuthenticator(std::string token);
  // OK, or UNAUTHENTICATED (or, past kMaxNonces, UNAVAILABLE) saying why. A server without a
  // token refuses a call that carries one (a token mismatch), and accepts the others.
  absl::Status Check(const grpc::ServerContextBase& context, std::string_view method);
  // The same, on a credential as it arrived (tests), at `now_unix_ms`.
  absl::Status CheckCredential(std::string_view credential, std::string_view method,
                               int64_t now_unix_ms);
  bool has_token() const { return !token_.empty(); }

 private:
  // TokenKey(token_), made on the first check: a server nobody calls never loads OpenSSL.
  const std::string& Key();

  std::string token_;
  std::once_flag key_once_;
  std::string key_;
  common::Mutex mu_;
  std::set<std::string> nonces_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<int64_t, std::string>> expiry_ ABSL_GUARDED_BY(mu_);  // oldest first
};

// Wall-clock milliseconds since the epoch.
int64_t UnixMillis();

}  // namespace gangrun::rpc
