#pragma once
// How a gRPC call (gangrun status, stop, scale and kv, an agent's or a submitter's stream, a
// TLS job's node session) proves that its caller knows the job's token without the token
// crossing the wire, and that it was made for this server and this request (docs/WIRE.md).
//
// Each server makes challenges (CallAuth.Challenge, answered to anyone): a serial number, the
// time, and a MAC keyed by a secret of this server's life. A channel asks once and then
// numbers its calls; each call's "authorization" metadata is
//   Gangrun-HMAC c=<challenge>,k=<call number>,m=<HMAC-SHA256, hex>
// the MAC keyed by the token over the challenge, the number, the method and, for a call with
// one request (unary, server streaming), the request's bytes. So a credential is useless
//   - on another server, also one with the same token (its challenges are not this one's);
//   - on this server after a restart or a failover (a new secret);
//   - for another method or another request (the MAC covers both);
//   - twice (the server keeps, per challenge in use, the highest number and which of the
//     kReplayWindow below it were seen).
// No clock is involved. Against an attacker who can alter traffic, use TLS.
//
// Memory is bounded without locking anyone out: challenges cost nothing until an
// authenticated call uses one, and at most kMaxChallengesInUse are remembered, the oldest
// forgotten first. A call on a forgotten challenge is refused as UNAVAILABLE ("ask again"),
// and the channel asks for a new one; a channel asks anew once its challenge is
// kChallengeReuse old, so one client spending challenges as fast as it can (measured: about
// 15,000 calls/s on 2 cores) turns the table over in seconds, never before another's fresh
// challenge is used.
//
// Channels add the credential to every call (rpc::MakeChannel installs CallAuthInterceptor);
// servers check it with a CallAuthenticator and serve its ChallengeService.

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>

#include <bitset>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "common/mutex.h"

namespace google::protobuf {
class Message;
}

namespace gangrun::rpc {

inline constexpr std::string_view kCallAuthScheme = "Gangrun-HMAC";
// A challenge is accepted for this long after it was made (a client asks before each burst of
// calls; this only bounds how late a slow one may use it).
inline constexpr std::chrono::seconds kChallengeLife{60};
// A channel asks for a new challenge once its own is this old.
inline constexpr std::chrono::seconds kChallengeReuse{2};
// Calls of one challenge may arrive this far out of order (concurrent calls of a channel).
inline constexpr size_t kReplayWindow = 1024;
// Challenges in use a server remembers: at most this many × about 250 bytes (16 MiB).
inline constexpr size_t kMaxChallengesInUse = 1 << 16;

// The full name of a method of a generated service, as gRPC names calls.
template <typename Service>
std::string MethodPath(std::string_view method) {
  return "/" + std::string(Service::service_full_name()) + "/" + std::string(method);
}

// The credential of call number `number` of `method` ("/gangrun.v1.Scheduler/GetStatus") on
// `challenge`, with `request` (the request's bytes; null for a stream).
std::string CallCredential(std::string_view token, std::string_view challenge, uint64_t number,
                           std::string_view method, const std::string* request);
// A request's bytes as the credential covers them (deterministic serialization).
std::string RequestBytes(const google::protobuf::Message& request);

// Adds the credential to every call on a channel; nothing when `token` is empty.
std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> CallAuthInterceptor(
    std::string token);

// A server's check of its calls. Thread-safe: gRPC calls it on its own threads.
class CallAuthenticator {
 public:
  explicit CallAuthenticator(std::string token);
  ~CallAuthenticator();
  CallAuthenticator(const CallAuthenticator&) = delete;
  CallAuthenticator& operator=(const CallAuthenticator&) = delete;

  // OK, or UNAUTHENTICATED saying why (UNAVAILABLE for a challenge this server no longer
  // remembers: ask again). `request` is the call's request, null for a stream. A server
  // without a token refuses a call that carries one (a token mismatch) and accepts the others.
  absl::Status Check(const grpc::ServerContextBase& context, std::string_view method,
                     const google::protobuf::Message* request);
  // The same, on a credential as it arrived and a request's bytes (tests), at `now`.
  absl::Status CheckCredential(std::string_view credential, std::string_view method,
                               const std::string* request,
                               std::chrono::steady_clock::time_point now);
  // A new challenge of this server, made at `now`.
  std::string NewChallenge(std::chrono::steady_clock::time_point now);
  bool has_token() const { return !token_.empty(); }
  // CallAuth.Challenge, for the server's owner to serve next to its own services.
  grpc::Service* service();
  // Challenges remembered now (tests).
  size_t ChallengesInUse();

 private:
  struct InUse {
    uint64_t highest = 0;             // the highest call number seen
    std::bitset<kReplayWindow> seen;  // bit i: number highest - i was seen
  };
  // TokenKey(token_), made on the first check: a server nobody calls never loads OpenSSL.
  const std::string& Key();
  absl::Status Remember(uint64_t serial, uint64_t number) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string token_;
  const std::string secret_;  // this server's life's: its challenges are valid here only
  const std::chrono::steady_clock::time_point epoch_;
  std::once_flag key_once_;
  std::string key_;
  common::Mutex mu_;
  uint64_t next_serial_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, InUse> in_use_ ABSL_GUARDED_BY(mu_);  // by serial, oldest first
  uint64_t forgotten_up_to_ ABSL_GUARDED_BY(mu_) = 0;      // serials up to it: refused
  class Service;
  std::unique_ptr<Service> service_;
};

}  // namespace gangrun::rpc
