#pragma once
// One TCP connection carrying a session's frames (rpc/frame_format.h), read through a
// FrameDecoder and written from a bounded queue. It knows nothing of what the frames mean or
// of their tags (rpc/session_auth.h does).
//
// Bounded on both sides: the decoder holds at most what arrived of the frame in progress (and
// never more than its max_payload announced), the read buffer is small unless an
// authenticated peer sends a large frame, and at most max_queued_bytes wait to be written — a
// peer that does not read its socket is dropped ("the peer reads nothing") instead of
// growing our memory.
//
// Runs on an io_context run by one thread; every call and every handler is on that thread.
// Owners hold it by shared_ptr (reads and writes in flight keep it alive).

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rpc/frame_decoder.h"

namespace gangrun::rpc {

// The `why` of a connection whose peer closed it (EOF).
inline constexpr std::string_view kPeerClosed = "the peer closed the connection";

class FrameConnection : public std::enable_shared_from_this<FrameConnection> {
 public:
  // `payload` is valid during the call only; return false after ending the connection.
  using FrameHandler = FrameDecoder::FrameHandler;
  // The connection ended (EOF, an error, a malformed frame, a peer that does not read);
  // `why` says which, `malformed` is true for bytes that break the framing. Runs once, never
  // after Close().
  using EndHandler = std::function<void(const std::string& why, bool malformed)>;
  // Enough for every command a node gets in a generation, many times over.
  static constexpr size_t kDefaultMaxQueuedBytes = 16 << 20;

  explicit FrameConnection(boost::asio::ip::tcp::socket socket);
  FrameConnection(const FrameConnection&) = delete;
  FrameConnection& operator=(const FrameConnection&) = delete;

  // Starts reading, with frames up to `max_payload` bytes.
  void Start(FrameHandler on_frame, EndHandler on_end, uint32_t max_payload = kMaxHandshakePayload);
  // Replaces the handlers (a handshake hands the connection to its session); takes effect
  // from the next frame, also within one read.
  void SetHandlers(FrameHandler on_frame, EndHandler on_end) {
    on_frame_ = std::move(on_frame);
    on_end_ = std::move(on_end);
  }
  void set_max_payload(uint32_t max_payload) { decoder_.set_max_payload(max_payload); }
  void set_max_queued_bytes(size_t bytes) { max_queued_ = bytes; }

  // Queues a frame; the frames queued in one turn of the loop are written together after it.
  void Send(FrameType type, std::string_view payload);
  // Sends bytes as they are (the session magic).
  void SendBytes(std::string_view bytes);
  // Bytes waiting to be written (queued and in flight).
  size_t queued_bytes() const { return queued_.size() + writing_.size(); }
  // Shuts the sending side down once everything queued is written; reading goes on.
  void CloseAfterWrites();
  // Closes the socket now; no handler runs after this.
  void Close();
  bool closed() const { return closed_; }
  // The remote endpoint as rpc::ConnectionActivityReader names it ("" when unknown).
  const std::string& peer() const { return peer_; }
  // How long ago the kernel last received an acknowledgement from the peer's kernel (TCP_INFO),
  // or nullopt when it cannot tell.
  std::optional<std::chrono::milliseconds> SinceLastAck() const;
  // How long ago it last received data (read or not yet), or nullopt.
  std::optional<std::chrono::milliseconds> SinceLastData() const;
  // Reads only once `bytes` wait in the kernel (SO_RCVLOWAT; a peer's close or reset wakes it
  // at once): what arrives below it stays unread, its arrival still seen by the kernel
  // (rpc/connection_activity.h). False when the kernel refuses.
  bool SetReadWatermark(int bytes);

 private:
  static constexpr size_t kSmallReadBuffer = 2048;
  static constexpr size_t kLargeReadBuffer = 64 << 10;

  void Read();
  void OnRead(size_t n);
  void Flush();
  void Write();
  void End(const std::string& why, bool malformed = false);

  boost::asio::ip::tcp::socket socket_;
  std::string peer_;
  FrameHandler on_frame_;
  EndHandler on_end_;
  FrameDecoder decoder_;
  std::vector<char> in_;
  std::string queued_;   // frames waiting for the write in flight
  std::string writing_;  // the write in flight
  size_t max_queued_ = kDefaultMaxQueuedBytes;
  bool close_after_writes_ = false;
  bool flush_posted_ = false;  // a Write waits on the loop
  bool closed_ = false;
};

// The remote endpoint of `socket` as rpc::ConnectionActivityReader names it ("" when unknown).
std::string PeerOf(const boost::asio::ip::tcp::socket& socket);

}  // namespace gangrun::rpc
