#pragma once
// torch's TCPStore wire protocol, both dialects, as a pure decoder and reply encoder (no I/O):
// what the job's torch store (scheduler/torch_store.h) reads from a rank's connection.
//
// A query is one byte of query type and its arguments; integers are little-endian (torch
// writes its host's order: every platform torch ships for is little-endian), strings and values
// a uint64 length and the bytes. Two dialects, told apart by a connection's first query:
//   - torch 1.x (checked: Debian's 1.13.1, by its client's bytes): SET 0, COMPARE_SET 1, GET 2,
//     ADD 3, CHECK 4, WAIT 5, GETNUMKEYS 6, WATCH_KEY 7, DELETE_KEY 8; no opening.
//   - torch 2.x (read from torch's TCPStoreBackend.hpp and TCPStoreLibUvBackend.cpp, not
//     checked against a 2.x client here): every connection opens with VALIDATE (0) and the magic
//     0x3C85F7CE; then SET 1, COMPARE_SET 2, GET 3, ADD 4, CHECK 5, WAIT 6, GETNUMKEYS 7,
//     DELETE_KEY 8, APPEND 9, MULTI_GET 10, MULTI_SET 11, CANCEL_WAIT 12, PING 13, QUEUE_PUSH 14,
//     QUEUE_POP 15, QUEUE_LEN 16.
// A 1.x SET would need a key of 0x3C85F7CE... bytes to look like the 2.x opening: past the key
// bound, so the two never meet.
//
// Bounded (a rank, or anything that reaches the port, sends these): a key is at most
// kMaxKeyBytes, a value kMaxValueBytes, a query's keys kMaxKeysPerQuery and the whole query
// kMaxQueryBytes; past any bound the decoder refuses with one line and the connection is closed.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gangrun::scheduler::torch_store {

inline constexpr uint32_t kValidationMagic = 0x3C85F7CE;
inline constexpr size_t kMaxKeyBytes = 4096;               // the key-value store's key bound
inline constexpr size_t kMaxValueBytes = size_t{4} << 20;  // and its value bound
inline constexpr size_t kMaxKeysPerQuery = 128 * 1024;     // torch's own MAX_KEY_COUNT
inline constexpr size_t kMaxQueryBytes = size_t{16} << 20;

enum class Dialect { kUnknown, kTorch1, kTorch2 };

enum class Op {
  kValidate,  // 2.x's opening (consumed by the decoder, never returned)
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kNumKeys,
  kWatchKey,  // 1.x only; not served (refused by the store, saying so)
  kDeleteKey,
  kAppend,
  kMultiGet,
  kMultiSet,
  kCancelWait,
  kPing,
  kQueuePush,
  kQueuePop,
  kQueueLen,
};
const char* OpName(Op op);

struct Query {
  Op op = Op::kSet;
  std::vector<std::string> keys;    // SET, GET, ADD, ... one; CHECK, WAIT, MULTI_* several
  std::vector<std::string> values;  // SET, APPEND, QUEUE_PUSH one; COMPARE_SET two
                                    // (expected, desired); MULTI_SET one per key
  int64_t delta = 0;                // ADD
  uint32_t nonce = 0;               // PING
};

struct Decoded {
  enum class Kind { kNeedMore, kQuery, kRefused };
  Kind kind = Kind::kNeedMore;
  Query query;
  size_t consumed = 0;  // bytes of `input` the query (and a 2.x opening before it) took
  // kNeedMore: the bytes (after `consumed`) the query needs at least before decoding it again
  // can get further; a large value arriving in pieces is then decoded once, not once a piece.
  size_t wanted = 0;
  std::string refusal;  // kRefused: why, one line
};

// Decodes the first query of `input`. `dialect` is the connection's: kUnknown until its first
// query, set by this call.
Decoded Decode(std::string_view input, Dialect& dialect);

// Replies, appended to `out`.
void AppendU8(std::string& out, uint8_t value);
void AppendI64(std::string& out, int64_t value);
void AppendU32(std::string& out, uint32_t value);
void AppendBytes(std::string& out, std::string_view bytes);  // length-prefixed

// CHECK's answer, and WAIT's (STOP_WAITING, and 2.x's WAIT_CANCELED for CANCEL_WAIT).
inline constexpr uint8_t kReady = 0;
inline constexpr uint8_t kNotReady = 1;
inline constexpr uint8_t kStopWaiting = 0;
inline constexpr uint8_t kWaitCanceled = 1;

}  // namespace gangrun::scheduler::torch_store
