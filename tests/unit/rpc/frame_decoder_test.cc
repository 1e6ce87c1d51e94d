// The session's frame decoder (rpc/frame_decoder.h) and seals (rpc/session_auth.h), fed plain
// bytes: no socket.

#include "rpc/frame_decoder.h"

#include <gtest/gtest.h>

#include <vector>

#include "absl/strings/escaping.h"
#include "rpc/session_auth.h"

namespace gangrun::rpc {
namespace {

struct Decoded {
  FrameType type;
  std::string payload;
};

std::vector<Decoded> FeedAll(FrameDecoder& decoder, std::string_view bytes, size_t piece,
                             absl::Status* status = nullptr) {
  std::vector<Decoded> frames;
  for (size_t at = 0; at < bytes.size(); at += piece) {
    absl::Status fed =
        decoder.Feed(bytes.substr(at, piece), [&](FrameType type, std::string_view payload) {
          frames.push_back({type, std::string(payload)});
          return true;
        });
    if (!fed.ok()) {
      if (status != nullptr) *status = fed;
      break;
    }
  }
  return frames;
}

TEST(FrameDecoderTest, FramesComeOutWholeHoweverTheBytesArrive) {
  std::string bytes;
  AppendFrame(bytes, FrameType::kHello, "hello");
  AppendFrame(bytes, FrameType::kPing, "");
  AppendFrame(bytes, FrameType::kEvent, std::string(3000, 'e'));
  for (size_t piece : {size_t{1}, size_t{2}, size_t{5}, size_t{7}, size_t{4096}, bytes.size()}) {
    FrameDecoder decoder(kMaxFramePayload);
    const auto frames = FeedAll(decoder, bytes, piece);
    ASSERT_EQ(frames.size(), 3u) << piece;
    EXPECT_EQ(frames[0].type, FrameType::kHello);
    EXPECT_EQ(frames[0].payload, "hello");
    EXPECT_EQ(frames[1].type, FrameType::kPing);
    EXPECT_EQ(frames[1].payload, "");
    EXPECT_EQ(frames[2].payload, std::string(3000, 'e'));
    EXPECT_EQ(decoder.buffered(), 0u);
    EXPECT_EQ(decoder.missing(), 0u);
  }
}

TEST(FrameDecoderTest, AnAnnouncedLengthCostsOnlyTheBytesThatCame) {
  FrameDecoder decoder(kMaxFramePayload);
  // A header announcing 8 MiB, and 4 bytes of payload: 9 bytes held, not 8 MiB.
  const std::string bytes = std::string("\x00\x80\x00\x00\x06", 5) + "abcd";
  ASSERT_TRUE(decoder.Feed(bytes, [](FrameType, std::string_view) { return true; }).ok());
  EXPECT_EQ(decoder.buffered(), 9u);
  EXPECT_EQ(decoder.missing(), (8u << 20) - 4u);
}

TEST(FrameDecoderTest, TheBoundIsCheckedAtTheHeader) {
  // Before authentication a frame may carry 1 KiB; a header announcing more ends it there.
  FrameDecoder decoder;
  absl::Status status;
  const auto frames = FeedAll(decoder, std::string("\x00\x00\x04\x01\x01", 5), 1, &status);
  EXPECT_TRUE(frames.empty());
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("the limit is 1024"), std::string::npos) << status;
  // An unknown type, too; and a spent decoder stays spent.
  FrameDecoder other;
  EXPECT_FALSE(FeedAll(other, std::string("\x00\x00\x00\x00\x00", 5), 5, &status).size());
  EXPECT_NE(status.message().find("type 0"), std::string::npos);
  EXPECT_FALSE(other.Feed("x", [](FrameType, std::string_view) { return true; }).ok());
}

TEST(FrameDecoderTest, AHandlerThatStopsStopsTheDecoding) {
  std::string bytes;
  AppendFrame(bytes, FrameType::kPing, "");
  AppendFrame(bytes, FrameType::kPing, "");
  FrameDecoder decoder;
  int seen = 0;
  ASSERT_TRUE(decoder
                  .Feed(bytes,
                        [&](FrameType, std::string_view) {
                          ++seen;
                          return false;
                        })
                  .ok());
  EXPECT_EQ(seen, 1);
}

TEST(SessionAuthTest, ProofsBindNoncesRunIdSessionAndDirection) {
  const std::string key = TokenKey("s3cret");
  Handshake h{RandomBytes(kNonceBytes), RandomBytes(kNonceBytes), "job-a", 0};
  const std::string node = NodeProof(key, h);
  EXPECT_EQ(node, NodeProof(key, h));
  EXPECT_NE(node, SchedulerProof(key, h));  // a proof for one direction is none for the other
  EXPECT_NE(node, NodeProof(TokenKey("s3creT"), h));
  for (auto change : std::vector<std::function<void(Handshake&)>>{
           [](Handshake& x) { x.scheduler_nonce = RandomBytes(kNonceBytes); },
           [](Handshake& x) { x.node_nonce = RandomBytes(kNonceBytes); },
           [](Handshake& x) { x.run_id = "job-b"; }, [](Handshake& x) { x.resume = 1; }}) {
    Handshake other = h;
    change(other);
    EXPECT_NE(node, NodeProof(key, other));
  }
  EXPECT_EQ(TokenKey("").size(), 32u);
  EXPECT_NE(TokenKey(""), TokenKey("x"));
}

// Mac is HMAC-SHA256 of the length-prefixed parts: checked against Python's hmac module
// (hmac.new(b"key", b"\0\0\0\x13The quick brown fox\0\0\0\0", sha256)), every time the same.
TEST(SessionAuthTest, AMacIsHmacSha256OfTheLengthPrefixedParts) {
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(absl::BytesToHexString(Mac("key", {"The quick brown fox", ""})),
              "d1826eb355f3792a46dd82dab11f91e29a42e299fb832970510b3acd09dabba1");
  }
  EXPECT_NE(Mac("key", {"The quick brown fox"}), Mac("key", {"The quick brown fo", "x"}));
}

TEST(SessionAuthTest, SealedFramesOpenOnceInOrderAndOnlyUnchanged) {
  const FrameKeys keys = DeriveFrameKeys(TokenKey("t"), {"a", "b", "job", 0});
  EXPECT_NE(keys.node_to_scheduler, keys.scheduler_to_node);
  FrameSealer sealer(keys.node_to_scheduler);
  const std::string first = sealer.Seal(FrameType::kEvent, "one");
  const std::string second = sealer.Seal(FrameType::kEvent, "two");
  std::string_view body;
  {
    FrameOpener opener(keys.node_to_scheduler);
    EXPECT_FALSE(opener.Open(FrameType::kEvent, second, &body));  // out of order
  }
  {
    FrameOpener opener(keys.node_to_scheduler);
    EXPECT_FALSE(opener.Open(FrameType::kPing, first, &body));  // another type
  }
  {
    FrameOpener opener(keys.scheduler_to_node);
    EXPECT_FALSE(opener.Open(FrameType::kEvent, first, &body));  // the other direction's key
  }
  FrameOpener opener(keys.node_to_scheduler);
  std::string tampered = first;
  tampered[0] ^= 1;
  EXPECT_FALSE(opener.Open(FrameType::kEvent, tampered, &body));
  ASSERT_TRUE(opener.Open(FrameType::kEvent, first, &body));
  EXPECT_EQ(body, "one");
  EXPECT_FALSE(opener.Open(FrameType::kEvent, first, &body));  // replayed
  ASSERT_TRUE(opener.Open(FrameType::kEvent, second, &body));
  EXPECT_EQ(body, "two");
}

}  // namespace
}  // namespace gangrun::rpc
