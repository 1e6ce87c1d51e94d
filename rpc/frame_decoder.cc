#include "rpc/frame_decoder.h"

#include <algorithm>

namespace gangrun::rpc {
namespace {

uint32_t LengthOf(std::string_view header) {
  const auto* h = reinterpret_cast<const unsigned char*>(header.data());
  return (uint32_t{h[0]} << 24) | (uint32_t{h[1]} << 16) | (uint32_t{h[2]} << 8) | uint32_t{h[3]};
}

}  // namespace

void AppendFrame(std::string& out, FrameType type, std::string_view payload) {
  const auto size = static_cast<uint32_t>(payload.size());
  const char header[kFrameHeaderBytes] = {static_cast<char>((size >> 24) & 0xff),
                                          static_cast<char>((size >> 16) & 0xff),
                                          static_cast<char>((size >> 8) & 0xff),
                                          static_cast<char>(size & 0xff), static_cast<char>(type)};
  out.append(header, kFrameHeaderBytes);
  out.append(payload);
}

absl::Status FrameDecoder::Check(std::string_view header, uint32_t* length) const {
  const auto type = static_cast<unsigned char>(header[4]);
  if (!KnownFrameType(type)) {
    return absl::InvalidArgumentError("a malformed frame (type " + std::to_string(type) + ")");
  }
  *length = LengthOf(header);
  if (*length > max_) {
    return absl::InvalidArgumentError("a frame of " + std::to_string(*length) +
                                      " bytes (the limit is " + std::to_string(max_) + ")");
  }
  return absl::OkStatus();
}

size_t FrameDecoder::missing() const {
  if (partial_.empty()) return 0;
  if (partial_.size() < kFrameHeaderBytes) return kFrameHeaderBytes - partial_.size();
  return kFrameHeaderBytes + partial_length_ - partial_.size();
}

absl::Status FrameDecoder::Feed(std::string_view bytes, const FrameHandler& on_frame) {
  if (failed_) return absl::FailedPreconditionError("the decoder failed before");
  // First the frame in progress, byte-exactly: never more than it needs.
  while (!partial_.empty() && !bytes.empty()) {
    const size_t take = std::min(missing(), bytes.size());
    partial_.append(bytes.data(), take);
    bytes.remove_prefix(take);
    if (partial_.size() == kFrameHeaderBytes) {
      absl::Status checked = Check(partial_, &partial_length_);
      if (!checked.ok()) {
        failed_ = true;
        return checked;
      }
    }
    if (partial_.size() >= kFrameHeaderBytes && missing() == 0) {
      const auto type = static_cast<FrameType>(partial_[4]);
      std::string frame;
      frame.swap(partial_);  // the handler may feed more, or destroy the connection
      if (!on_frame(type, std::string_view(frame).substr(kFrameHeaderBytes))) {
        return absl::OkStatus();
      }
    }
  }
  // Then whole frames in place.
  while (bytes.size() >= kFrameHeaderBytes) {
    uint32_t length = 0;
    absl::Status checked = Check(bytes.substr(0, kFrameHeaderBytes), &length);
    if (!checked.ok()) {
      failed_ = true;
      return checked;
    }
    if (bytes.size() < kFrameHeaderBytes + length) break;
    const auto type = static_cast<FrameType>(bytes[4]);
    const std::string_view payload = bytes.substr(kFrameHeaderBytes, length);
    bytes.remove_prefix(kFrameHeaderBytes + length);
    if (!on_frame(type, payload)) return absl::OkStatus();
  }
  // What is left starts a frame: keep only the bytes that came.
  if (!bytes.empty()) {
    partial_.assign(bytes.data(), bytes.size());
    if (partial_.size() >= kFrameHeaderBytes) {
      absl::Status checked = Check(partial_, &partial_length_);  // checked above already
      if (!checked.ok()) {
        failed_ = true;
        return checked;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace gangrun::rpc
