#include "scheduler/torch_store_protocol.h"

#include <cstring>
#include <optional>

namespace gangrun::scheduler::torch_store {
namespace {

// The query types' bytes, by dialect (the header lists them).
std::optional<Op> OpOf(uint8_t byte, Dialect dialect) {
  static constexpr Op kTorch1[] = {Op::kSet,     Op::kCompareSet, Op::kGet,
                                   Op::kAdd,     Op::kCheck,      Op::kWait,
                                   Op::kNumKeys, Op::kWatchKey,   Op::kDeleteKey};
  static constexpr Op kTorch2[] = {
      Op::kValidate,   Op::kSet,     Op::kCompareSet, Op::kGet,      Op::kAdd,      Op::kCheck,
      Op::kWait,       Op::kNumKeys, Op::kDeleteKey,  Op::kAppend,   Op::kMultiGet, Op::kMultiSet,
      Op::kCancelWait, Op::kPing,    Op::kQueuePush,  Op::kQueuePop, Op::kQueueLen};
  if (dialect == Dialect::kTorch1) {
    if (byte < std::size(kTorch1)) return kTorch1[byte];
  } else if (byte < std::size(kTorch2)) {
    return kTorch2[byte];
  }
  return std::nullopt;
}

// Reads from a query's bytes; a read past the end means "need more", a length past a bound
// sets `refusal`.
class Reader {
 public:
  explicit Reader(std::string_view input) : input_(input) {}

  bool U8(uint8_t& value) { return Raw(&value, 1); }
  bool U32(uint32_t& value) { return Raw(&value, 4); }
  bool I64(int64_t& value) { return Raw(&value, 8); }
  bool Count(size_t& count, const char* what) {
    uint64_t value = 0;
    if (!Raw(&value, 8)) return false;
    if (value > kMaxKeysPerQuery) {
      refusal = std::string(what) + " of " + std::to_string(value) + " keys (at most " +
                std::to_string(kMaxKeysPerQuery) + ")";
      return false;
    }
    count = static_cast<size_t>(value);
    return true;
  }
  bool Bytes(std::string& out, size_t bound, const char* what) {
    uint64_t size = 0;
    if (!Raw(&size, 8)) return false;
    if (size > bound) {
      refusal = std::string(what) + " of " + std::to_string(size) + " bytes (at most " +
                std::to_string(bound) + ")";
      return false;
    }
    if (input_.size() - pos_ < size) return NeedMore(size);
    out.assign(input_.data() + pos_, static_cast<size_t>(size));
    pos_ += static_cast<size_t>(size);
    return true;
  }
  bool Key(std::string& out) { return Bytes(out, kMaxKeyBytes, "a key"); }
  bool Value(std::string& out) { return Bytes(out, kMaxValueBytes, "a value"); }

  size_t pos() const { return pos_; }
  std::string refusal;

 private:
  bool Raw(void* out, size_t n) {
    if (input_.size() - pos_ < n) return NeedMore(n);
    std::memcpy(out, input_.data() + pos_, n);  // little-endian hosts only (the header)
    pos_ += n;
    return true;
  }
  bool NeedMore(uint64_t n) {
    // A query that needs more than the bound is refused now, not buffered.
    if (pos_ + n > kMaxQueryBytes) {
      refusal = "a query of more than " + std::to_string(kMaxQueryBytes) + " bytes";
    } else {
      wanted_ = pos_ + static_cast<size_t>(n);
    }
    return false;
  }

 public:
  size_t wanted() const { return wanted_; }

 private:
  std::string_view input_;
  size_t pos_ = 0;
  size_t wanted_ = 0;  // after a read past the end: the bytes it needed in all
};

// The arguments of `query.op`; false: need more or refused (reader.refusal).
bool ReadArguments(Reader& reader, Query& query) {
  switch (query.op) {
    case Op::kSet:
    case Op::kAppend:
    case Op::kQueuePush:
      query.keys.resize(1);
      query.values.resize(1);
      return reader.Key(query.keys[0]) && reader.Value(query.values[0]);
    case Op::kCompareSet:
      query.keys.resize(1);
      query.values.resize(2);
      return reader.Key(query.keys[0]) && reader.Value(query.values[0]) &&
             reader.Value(query.values[1]);
    case Op::kGet:
    case Op::kWatchKey:
    case Op::kDeleteKey:
    case Op::kQueuePop:
    case Op::kQueueLen:
      query.keys.resize(1);
      return reader.Key(query.keys[0]);
    case Op::kAdd:
      query.keys.resize(1);
      return reader.Key(query.keys[0]) && reader.I64(query.delta);
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet: {
      size_t count = 0;
      if (!reader.Count(count, OpName(query.op))) return false;
      // Grown as keys arrive: a partial query of a large count is decoded again as its bytes
      // come, and should not allocate the count each time.
      for (size_t i = 0; i < count; ++i) {
        if (!reader.Key(query.keys.emplace_back())) return false;
      }
      return true;
    }
    case Op::kMultiSet: {
      size_t count = 0;
      if (!reader.Count(count, OpName(query.op))) return false;
      for (size_t i = 0; i < count; ++i) {
        if (!reader.Key(query.keys.emplace_back()) || !reader.Value(query.values.emplace_back())) {
          return false;
        }
      }
      return true;
    }
    case Op::kPing:
      return reader.U32(query.nonce);
    case Op::kNumKeys:
    case Op::kCancelWait:
      return true;
    case Op::kValidate:
      break;
  }
  reader.refusal = "an opening in the middle of the conversation";
  return false;
}

}  // namespace

const char* OpName(Op op) {
  switch (op) {
    case Op::kValidate:
      return "validate";
    case Op::kSet:
      return "set";
    case Op::kCompareSet:
      return "compare_set";
    case Op::kGet:
      return "get";
    case Op::kAdd:
      return "add";
    case Op::kCheck:
      return "check";
    case Op::kWait:
      return "wait";
    case Op::kNumKeys:
      return "num_keys";
    case Op::kWatchKey:
      return "watch_key";
    case Op::kDeleteKey:
      return "delete_key";
    case Op::kAppend:
      return "append";
    case Op::kMultiGet:
      return "multi_get";
    case Op::kMultiSet:
      return "multi_set";
    case Op::kCancelWait:
      return "cancel_wait";
    case Op::kPing:
      return "ping";
    case Op::kQueuePush:
      return "queue_push";
    case Op::kQueuePop:
      return "queue_pop";
    case Op::kQueueLen:
      return "queue_len";
  }
  return "?";
}

Decoded Decode(std::string_view input, Dialect& dialect) {
  Decoded decoded;
  size_t start = 0;
  if (dialect == Dialect::kUnknown) {
    if (input.empty()) return decoded;
    if (input[0] == 0) {  // 2.x's opening, or a 1.x SET
      if (input.size() < 5) return decoded;
      uint32_t magic = 0;
      std::memcpy(&magic, input.data() + 1, 4);
      if (magic == kValidationMagic) {
        dialect = Dialect::kTorch2;
        start = 5;
      } else {
        dialect = Dialect::kTorch1;
      }
    } else {
      dialect = Dialect::kTorch1;
    }
  }
  Reader reader(input.substr(start));
  uint8_t byte = 0;
  if (!reader.U8(byte)) {
    decoded.consumed = start;  // the opening alone
    return decoded;
  }
  std::optional<Op> op = OpOf(byte, dialect);
  if (!op || *op == Op::kValidate) {
    decoded.kind = Decoded::Kind::kRefused;
    decoded.refusal = "unknown query type " + std::to_string(byte) + " (torch " +
                      (dialect == Dialect::kTorch2 ? "2.x" : "1.x") + " protocol)";
    return decoded;
  }
  decoded.query.op = *op;
  if (!ReadArguments(reader, decoded.query)) {
    if (!reader.refusal.empty()) {
      decoded.kind = Decoded::Kind::kRefused;
      decoded.refusal = std::string(OpName(*op)) + ": " + reader.refusal;
    } else {
      decoded.query = Query{};
      decoded.consumed = start;
      decoded.wanted = reader.wanted();
    }
    return decoded;
  }
  decoded.kind = Decoded::Kind::kQuery;
  decoded.consumed = start + reader.pos();
  return decoded;
}

void AppendU8(std::string& out, uint8_t value) { out.push_back(static_cast<char>(value)); }

void AppendU32(std::string& out, uint32_t value) {
  char bytes[4];
  std::memcpy(bytes, &value, 4);
  out.append(bytes, 4);
}

void AppendI64(std::string& out, int64_t value) {
  char bytes[8];
  std::memcpy(bytes, &value, 8);
  out.append(bytes, 8);
}

void AppendBytes(std::string& out, std::string_view bytes) {
  AppendI64(out, static_cast<int64_t>(bytes.size()));
  out.append(bytes);
}

}  // namespace gangrun::scheduler::torch_store
