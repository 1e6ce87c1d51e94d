#pragma once
// A pure decoder of a session's frames (rpc/frame_format.h) over buffers: bytes in, whole
// frames out. It knows no socket, so tests and the fuzzer feed it plain bytes.
//
// Memory: a frame that arrives whole within one Feed is handed out in place; only the part of
// a frame that straddles two Feeds is kept, and that copy grows with the bytes actually
// received, never to the length the header announces — a peer that announces 8 MiB and sends
// nine bytes costs nine bytes. The announced length is checked against max_payload() the
// moment the header is complete, so a peer still in its handshake cannot announce more than
// kMaxHandshakePayload.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "rpc/frame_format.h"

namespace gangrun::rpc {

class FrameDecoder {
 public:
  // `payload` is valid during the call only. Returning false stops decoding (the handler
  // ended the connection); the rest of the bytes are not looked at.
  using FrameHandler = std::function<bool(FrameType type, std::string_view payload)>;

  explicit FrameDecoder(uint32_t max_payload = kMaxHandshakePayload) : max_(max_payload) {}

  // Frames up to `max_payload` bytes from now on (a session raises it once authenticated).
  void set_max_payload(uint32_t max_payload) { max_ = max_payload; }
  uint32_t max_payload() const { return max_; }

  // Decodes `bytes`, calling `on_frame` for every frame completed. InvalidArgument, naming
  // the problem, for bytes that break the framing (an unknown type, a length over the bound);
  // the decoder is then spent.
  absl::Status Feed(std::string_view bytes, const FrameHandler& on_frame);

  // Bytes held for a frame that has not fully arrived.
  size_t buffered() const { return partial_.size(); }
  // How many more bytes the frame in progress needs (0 between frames).
  size_t missing() const;

 private:
  // The header in `bytes` (kFrameHeaderBytes long) checked; its payload length.
  absl::Status Check(std::string_view header, uint32_t* length) const;

  uint32_t max_;
  std::string partial_;          // a frame's first bytes, header included, while it arrives
  uint32_t partial_length_ = 0;  // its payload length, once its header is in partial_
  bool failed_ = false;
};

}  // namespace gangrun::rpc
