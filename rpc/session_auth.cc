#include "rpc/session_auth.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <cstring>

#include "absl/strings/escaping.h"
#include "common/check.h"
#include "common/secret.h"

namespace gangrun::rpc {
namespace {

// Labels keep each use of the token apart: a MAC made for one purpose is no proof for another.
constexpr std::string_view kTokenLabel = "gangrun/v2 token";
constexpr std::string_view kJobTokenLabel = "gangrun/v1 job token";
constexpr std::string_view kPageLabel = "gangrun/v1 page secret";
constexpr std::string_view kSchedulerLabel = "gangrun/v2 scheduler proof";
constexpr std::string_view kNodeLabel = "gangrun/v2 node proof";
constexpr std::string_view kResumeLabel = "gangrun/v2 resume key";
constexpr std::string_view kFramesUpLabel = "gangrun/v2 frames node->scheduler";
constexpr std::string_view kFramesDownLabel = "gangrun/v2 frames scheduler->node";

EVP_MAC* HmacAlgorithm() {
  static EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  GANGRUN_CHECK(mac != nullptr, "OpenSSL provides HMAC");
  return mac;
}

// HMAC with SHA-256 chosen, no key yet: every one-off MAC starts from a copy of it. OpenSSL 3
// fetches the algorithm and the digest by name at each EVP_Q_mac; five MACs per session
// opening made those fetches a visible part of a 12,500-node rendezvous. Never changed after
// it is made, so threads may copy it at once.
const EVP_MAC_CTX* HmacSha256() {
  static EVP_MAC_CTX* const made = [] {
    EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(HmacAlgorithm());
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_construct_end()};
    GANGRUN_CHECK(ctx != nullptr && EVP_MAC_CTX_set_params(ctx, params) == 1,
                  "HMAC-SHA256 is set up");
    return ctx;
  }();
  return made;
}

void AppendLengthPrefixed(std::string& out, std::string_view part) {
  const auto size = static_cast<uint32_t>(part.size());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(size >> shift));
  out.append(part);
}

// Eight bytes, big-endian.
std::string Number(uint64_t value) {
  std::string out;
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>(value >> shift));
  return out;
}

}  // namespace

struct Hmac::State {
  EVP_MAC_CTX* keyed = nullptr;  // initialised with the key; initialised again for every MAC
  ~State() { EVP_MAC_CTX_free(keyed); }
};

Hmac::Hmac(std::string_view key) : state_(std::make_unique<State>()) {
  state_->keyed = EVP_MAC_CTX_new(HmacAlgorithm());
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  // Keys are never empty here (TokenKey and the derived keys are 32 bytes): OpenSSL reads a
  // null or empty key as "keep the previous one".
  GANGRUN_CHECK(!key.empty(), "an HMAC key is not empty");
  const int initialised = EVP_MAC_init(
      state_->keyed, reinterpret_cast<const unsigned char*>(key.data()), key.size(), params);
  GANGRUN_CHECK(initialised == 1, "HMAC-SHA256 initialises");
}

Hmac::~Hmac() = default;

std::string Hmac::Tag(std::string_view header, std::string_view body) {
  // A null key starts a new MAC with the key already set: no copy of the context (and its
  // allocations) per frame — at 12,500 nodes' heartbeats that copy was ~5% of the
  // scheduler's time.
  EVP_MAC_CTX* ctx = state_->keyed;
  GANGRUN_CHECK(EVP_MAC_init(ctx, nullptr, 0, nullptr) == 1, "an HMAC starts again");
  EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(header.data()), header.size());
  EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(body.data()), body.size());
  unsigned char out[EVP_MAX_MD_SIZE];
  size_t length = 0;
  EVP_MAC_final(ctx, out, &length, sizeof(out));
  return std::string(reinterpret_cast<char*>(out), std::min(length, kTagBytes));
}

std::string RandomBytes(size_t count) {
  // OpenSSL's private DRBG: seeded from the kernel (getrandom), reseeded on its own schedule
  // and after a fork; one system call per nonce was three per node at a rendezvous.
  GANGRUN_CHECK(count <= (1u << 20), "at most 1 MiB of random bytes at once");
  std::string out(count, '\0');
  GANGRUN_CHECK(
      RAND_priv_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(count)) == 1,
      "OpenSSL gives random bytes");
  return out;
}

uint64_t RandomId() {
  uint64_t id = 0;
  while (id == 0) std::memcpy(&id, RandomBytes(sizeof(id)).data(), sizeof(id));
  return id;
}

std::string Mac(std::string_view key, std::initializer_list<std::string_view> parts) {
  std::string message;
  for (std::string_view part : parts) AppendLengthPrefixed(message, part);
  unsigned char out[EVP_MAX_MD_SIZE];
  size_t length = 0;
  // A null or empty key would keep the template's (none): keys here are never empty.
  GANGRUN_CHECK(!key.empty(), "an HMAC key is not empty");
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_dup(HmacSha256());
  const bool made = ctx != nullptr &&
                    EVP_MAC_init(ctx, reinterpret_cast<const unsigned char*>(key.data()),
                                 key.size(), nullptr) == 1 &&
                    EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(message.data()),
                                   message.size()) == 1 &&
                    EVP_MAC_final(ctx, out, &length, sizeof(out)) == 1;
  EVP_MAC_CTX_free(ctx);
  GANGRUN_CHECK(made, "HMAC-SHA256 computes");
  return std::string(reinterpret_cast<char*>(out), length);
}

bool MacsEqual(std::string_view a, std::string_view b) { return common::SecretsEqual(a, b); }

std::string TokenKey(std::string_view token) {
  std::string message;
  AppendLengthPrefixed(message, kTokenLabel);
  AppendLengthPrefixed(message, token);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  unsigned int length = 0;
  EVP_Digest(message.data(), message.size(), digest, &length, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<char*>(digest), length);
}

std::string JobToken(std::string_view daemon_token, std::string_view job_id) {
  if (daemon_token.empty()) return "";
  return absl::BytesToHexString(Mac(TokenKey(daemon_token), {kJobTokenLabel, job_id}));
}

std::string PageSecret(std::string_view token) {
  if (token.empty()) return "";
  return absl::BytesToHexString(Mac(TokenKey(token), {kPageLabel}));
}

std::string SchedulerProof(std::string_view token_key, const Handshake& h) {
  return Mac(token_key,
             {kSchedulerLabel, h.node_nonce, h.scheduler_nonce, h.run_id, Number(h.resume)});
}

std::string NodeProof(std::string_view key, const Handshake& h) {
  return Mac(key, {kNodeLabel, h.scheduler_nonce, h.node_nonce, h.run_id, Number(h.resume)});
}

std::string ResumeKey(std::string_view token_key, const Handshake& h) {
  return Mac(token_key, {kResumeLabel, h.node_nonce, h.scheduler_nonce, h.run_id});
}

FrameKeys DeriveFrameKeys(std::string_view key, const Handshake& h) {
  return {Mac(key, {kFramesUpLabel, h.node_nonce, h.scheduler_nonce, Number(h.resume)}),
          Mac(key, {kFramesDownLabel, h.node_nonce, h.scheduler_nonce, Number(h.resume)})};
}

std::string FrameSealer::Seal(FrameType type, std::string_view body) {
  std::string header = Number(index_++);
  header.push_back(static_cast<char>(type));
  std::string out(body);
  out += mac_.Tag(header, body);
  return out;
}

bool FrameOpener::Open(FrameType type, std::string_view payload, std::string_view* body) {
  if (payload.size() < kTagBytes) return false;
  const std::string_view content = payload.substr(0, payload.size() - kTagBytes);
  std::string header = Number(index_);
  header.push_back(static_cast<char>(type));
  if (!MacsEqual(mac_.Tag(header, content), payload.substr(content.size()))) return false;
  ++index_;
  *body = content;
  return true;
}

}  // namespace gangrun::rpc
