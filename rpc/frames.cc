#include "rpc/frames.h"

#include <boost/asio/write.hpp>
#include <cstring>

namespace gangrun::rpc {
namespace {

constexpr size_t kInitialReadBuffer = 2048;
constexpr size_t kKeptReadBuffer = 64 << 10;  // larger buffers are given back when empty

bool KnownType(uint8_t type) {
  return type >= static_cast<uint8_t>(FrameType::kOpen) &&
         type <= static_cast<uint8_t>(FrameType::kPong);
}

}  // namespace

void AppendFrame(std::string& out, FrameType type, const google::protobuf::MessageLite* message) {
  const size_t size = message ? message->ByteSizeLong() : 0;
  const char header[kFrameHeaderBytes] = {
      static_cast<char>((size >> 24) & 0xff), static_cast<char>((size >> 16) & 0xff),
      static_cast<char>((size >> 8) & 0xff), static_cast<char>(size & 0xff),
      static_cast<char>(type)};
  out.append(header, kFrameHeaderBytes);
  if (message == nullptr || size == 0) return;
  const size_t at = out.size();
  out.resize(at + size);
  message->SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(&out[at]));
}

FrameConnection::FrameConnection(boost::asio::ip::tcp::socket socket)
    : socket_(std::move(socket)) {}

void FrameConnection::Start(FrameHandler on_frame, EndHandler on_end) {
  on_frame_ = std::move(on_frame);
  on_end_ = std::move(on_end);
  in_.resize(kInitialReadBuffer);
  Read();
}

void FrameConnection::Send(FrameType type, const google::protobuf::MessageLite* message) {
  if (closed_ || close_after_writes_) return;
  AppendFrame(queued_, type, message);
  Write();
}

void FrameConnection::SendBytes(std::string_view bytes) {
  if (closed_ || close_after_writes_) return;
  queued_.append(bytes);
  Write();
}

void FrameConnection::CloseAfterWrites() {
  if (closed_) return;
  close_after_writes_ = true;
  Write();
}

void FrameConnection::Close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  socket_.close(ignored);
}

void FrameConnection::Read() {
  socket_.async_read_some(
      boost::asio::buffer(in_.data() + in_used_, in_.size() - in_used_),
      [self = shared_from_this()](const boost::system::error_code& error, size_t n) {
        if (self->closed_) return;
        if (error) {
          self->End(error == boost::asio::error::eof ? std::string(kPeerClosed)
                                                     : error.message());
          return;
        }
        self->in_used_ += n;
        self->Parse();
        if (!self->closed_) self->Read();
      });
}

void FrameConnection::Parse() {
  size_t at = 0;
  size_t pending = 0;  // the size of a frame that has not fully arrived
  while (!closed_ && in_used_ - at >= kFrameHeaderBytes) {
    const auto* header = reinterpret_cast<const unsigned char*>(in_.data() + at);
    const uint32_t length = (uint32_t{header[0]} << 24) | (uint32_t{header[1]} << 16) |
                            (uint32_t{header[2]} << 8) | uint32_t{header[3]};
    if (!KnownType(header[4])) {
      return End("a malformed frame (type " + std::to_string(header[4]) + ")", true);
    }
    if (length > kMaxFramePayload) {
      return End("a frame of " + std::to_string(length) + " bytes (the limit is " +
                 std::to_string(kMaxFramePayload) + ")",
                 true);
    }
    if (in_used_ - at < kFrameHeaderBytes + length) {
      pending = kFrameHeaderBytes + length;
      break;
    }
    on_frame_(static_cast<FrameType>(header[4]),
              std::string_view(in_.data() + at + kFrameHeaderBytes, length));
    at += kFrameHeaderBytes + length;
  }
  if (closed_) return;
  if (at > 0) {
    std::memmove(in_.data(), in_.data() + at, in_used_ - at);
    in_used_ -= at;
  }
  if (pending > in_.size()) {
    in_.resize(pending);
  } else if (in_used_ == 0 && in_.size() > kKeptReadBuffer) {
    std::vector<char>(kInitialReadBuffer).swap(in_);
  } else if (in_used_ == in_.size()) {
    in_.resize(in_.size() * 2);  // a header that straddles a full buffer
  }
}

void FrameConnection::Write() {
  if (closed_ || !writing_.empty()) return;
  if (queued_.empty()) {
    if (close_after_writes_) {
      boost::system::error_code ignored;
      socket_.shutdown(boost::asio::ip::tcp::socket::shutdown_send, ignored);
    }
    return;
  }
  writing_.swap(queued_);
  boost::asio::async_write(
      socket_, boost::asio::buffer(writing_),
      [self = shared_from_this()](const boost::system::error_code& error, size_t) {
        if (self->closed_) return;
        self->writing_.clear();
        if (error) return self->End("cannot send: " + error.message());
        self->Write();
      });
}

void FrameConnection::End(const std::string& why, bool malformed) {
  if (closed_) return;
  Close();
  EndHandler on_end = std::move(on_end_);
  if (on_end) on_end(why, malformed);
}

}  // namespace gangrun::rpc
