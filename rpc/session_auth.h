#pragma once
// How a node session proves itself without its token ever crossing the wire, and how every
// later frame is bound to it (docs/WIRE.md).
//
// The opening is a challenge-response: the node sends a fresh nonce (kHello), the scheduler
// answers with its own nonce and the job's run id (kChallenge), the node answers with its
// proof that it knows the token (kOpen), and only then does the scheduler prove it knows it
// too (in kAccepted), so that a stranger's hello gets nothing to test token guesses against
// offline. Each proof is an HMAC-SHA256 keyed
// by the token over both nonces, the run id, the session being resumed and the direction, so
// no recording is valid twice (the other side's nonce is new every time) and a recording
// made for one job, one session or one direction proves nothing in another. From the
// scheduler's kAccepted on, every frame ends with a tag: an HMAC keyed per connection and per
// direction over the frame's index on the connection, its type and its body, so a frame
// cannot be injected, dropped, replayed or reordered unnoticed.
//
// A session that a node later resumes on a new connection (a partition, a reset) proves
// itself with the session's resume key, derived from its first handshake and never sent.
//
// A job without a token has no secret: its proofs and tags use the empty token and
// authenticate nothing (anyone may join such a job), but they still keep recordings of one
// connection from being taken for another.

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

#include "rpc/frame_format.h"

namespace gangrun::rpc {

inline constexpr size_t kNonceBytes = 16;
inline constexpr size_t kTagBytes = 16;

// `count` bytes (at most 1 MiB) from OpenSSL's private generator, which the kernel seeds.
std::string RandomBytes(size_t count);
// A random non-zero 64-bit number.
uint64_t RandomId();

// HMAC-SHA256 of `parts`, each prefixed by its length (no two lists of parts alike).
std::string Mac(std::string_view key, std::initializer_list<std::string_view> parts);
// Compares two MACs in a time that does not depend on where they differ.
bool MacsEqual(std::string_view a, std::string_view b);

// What both ends of one handshake agree on.
struct Handshake {
  std::string node_nonce;
  std::string scheduler_nonce;
  std::string run_id;
  uint64_t resume = 0;  // the session being resumed; 0 = a new session
};

// The job's token as a key (32 bytes, also for "").
std::string TokenKey(std::string_view token);
// A daemon job's own token ("" when the daemon has none): what the daemon's job scheduler
// checks and what the job's launchers and workers are given instead of the daemon's token, so
// that they reach their own job's scheduler and nothing else (64 hex characters).
std::string JobToken(std::string_view daemon_token, std::string_view job_id);
// The secret the HTTP pages of a job or daemon with `token` ask for ("" when it has none): not
// the token, which never crosses the wire, but derived from it (64 hex characters), so that
// a scraper can hold it without holding the token (gangrun generate page-secret).
std::string PageSecret(std::string_view token);
// The proofs of each side: `key` is TokenKey(token) for a new session, the session's resume
// key for a resumed one (the scheduler proves itself with the token key either way).
std::string SchedulerProof(std::string_view token_key, const Handshake& handshake);
std::string NodeProof(std::string_view key, const Handshake& handshake);
// A new session's resume key.
std::string ResumeKey(std::string_view token_key, const Handshake& handshake);

// The two keys of one connection's frames.
struct FrameKeys {
  std::string node_to_scheduler;
  std::string scheduler_to_node;
};
FrameKeys DeriveFrameKeys(std::string_view key, const Handshake& handshake);

// Keyed HMAC-SHA256 with its key set up once; not thread-safe.
class Hmac {
 public:
  explicit Hmac(std::string_view key);
  ~Hmac();
  Hmac(const Hmac&) = delete;
  Hmac& operator=(const Hmac&) = delete;
  // The first kTagBytes of the MAC of `header` followed by `body`. One thread at a time.
  std::string Tag(std::string_view header, std::string_view body);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Tags the frames of one direction of one connection, in the order they are sent.
class FrameSealer {
 public:
  explicit FrameSealer(std::string_view key) : mac_(key) {}
  // `body` followed by the tag of (this frame's index, `type`, `body`).
  std::string Seal(FrameType type, std::string_view body);
  // An unsealed frame (a tick) sent in the sealed frames' order: it takes an index.
  void Skip() { ++index_; }

 private:
  Hmac mac_;
  uint64_t index_ = 0;
};

// Checks the frames of the other direction, in the order they arrive.
class FrameOpener {
 public:
  explicit FrameOpener(std::string_view key) : mac_(key) {}
  // The body of `payload` when its tag is the one the peer's FrameSealer gave its next frame;
  // false otherwise (the connection must end: nothing after a bad tag can be trusted).
  bool Open(FrameType type, std::string_view payload, std::string_view* body);
  // An unsealed frame (a tick) received: it took the peer's next index.
  void Skip() { ++index_; }

 private:
  Hmac mac_;
  uint64_t index_ = 0;
};

}  // namespace gangrun::rpc
