#pragma once
// The format of a node session's frames (docs/WIRE.md), shared by both ends, the decoder and
// the tests: the constants and the encoder. Nothing here knows a socket.
//
// A connection opens with kSessionMagic; then frames both ways. A frame is a 4-byte
// big-endian payload length, one type byte, and the payload. The handshake frames carry a
// protobuf message (v1::SessionHello, ...); from the scheduler's kAccepted on, every frame's
// payload is a protobuf message followed by a 16-byte tag (rpc/session_auth.h).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gangrun::rpc {

// "GRS" and the protocol's version. A connection opening with another version's magic is
// told so (kRefused) instead of being left to guess.
inline constexpr std::string_view kSessionMagic = "GRS2";
inline constexpr std::string_view kSessionMagicPrefix = "GRS";
inline constexpr size_t kFrameHeaderBytes = 5;
// What a frame may carry once the connection is authenticated: as gRPC's message limit.
inline constexpr uint32_t kMaxFramePayload = 8 << 20;
// What a frame may carry before it is: the handshake's messages are a few dozen bytes, so a
// peer that has proven nothing never makes the scheduler hold more than this per frame.
inline constexpr uint32_t kMaxHandshakePayload = 1024;
// What a frame may carry on an opened session that the scheduler has not answered yet (its
// join): a join is a few hundred bytes (a few KiB for a node being adopted), and nothing larger
// (logs, stacks) is sent before the scheduler's first command. So sessions that open and join
// nothing hold at most this per frame in progress: 500 of them at most 32 MiB.
inline constexpr uint32_t kMaxJoinPayload = 64 << 10;

enum class FrameType : uint8_t {
  kHello = 1,      // node: v1::SessionHello
  kChallenge = 2,  // scheduler: v1::SessionChallenge
  kOpen = 3,       // node: v1::SessionOpen
  kAccepted = 4,   // scheduler: v1::SessionAccepted (sealed)
  kRefused = 5,    // scheduler: v1::SessionRefused; the connection closes after it
  kEvent = 6,      // node: v1::NodeEvent with its seq (sealed)
  kCommand = 7,    // scheduler: v1::NodeCommand with its seq (sealed)
  kPing = 8,       // node: v1::SessionAck (sealed)
  kPong = 9,       // scheduler: v1::SessionAck (sealed)
  // node, in a quiet session only: nothing (an empty payload, no tag), where it would ping.
  // It counts as a frame in both ends' tag index, so a tick added or removed on the way makes
  // the next sealed frame fail.
  kTick = 10,
};
inline constexpr uint8_t kFirstFrameType = 1;
inline constexpr uint8_t kLastFrameType = 10;

// A quiet session's watermark (v1::SessionAccepted.quiet_watermark): about 200 ticks, so that
// the scheduler reads a quiet node's connection once per Heartbeat message or less often.
inline constexpr uint32_t kQuietWatermark = 1024;

inline bool KnownFrameType(uint8_t type) {
  return type >= kFirstFrameType && type <= kLastFrameType;
}

// Appends one frame with `payload` to `out`.
void AppendFrame(std::string& out, FrameType type, std::string_view payload);

}  // namespace gangrun::rpc
