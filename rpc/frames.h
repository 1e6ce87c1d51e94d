#pragma once
// A node's session with its scheduler without gRPC: gangrun's own framing over one TCP
// connection, on the scheduler's gRPC port (scheduler/session_port.h tells the two apart by
// the first bytes). Plaintext jobs use it; jobs with TLS keep the gRPC stream.
//
// Why: a gRPC connection and call cost the scheduler ~0.2-0.3 ms of CPU per node on the
// 2-core test machine (HTTP/2 set-up, several threads handing each event on, debug checks in
// Debian's gRPC); this session costs a few tens of microseconds (bench/README.md, #13).
//
// On the wire: the node sends kSessionMagic, then frames both ways. A frame is a 4-byte
// big-endian payload length, one type byte, and the payload (a serialized protobuf message,
// or nothing). The node opens with kOpen (v1::SessionOpen); the scheduler answers kAccepted,
// or kRefused (v1::SessionRefused) and then closes the connection. Then the node sends kEvent (v1::NodeEvent) and
// a kPing every heartbeat interval, which the scheduler answers with a kPong; the scheduler
// sends kCommand (v1::NodeCommand).
//
// FrameConnection reads and writes frames on an io_context run by one thread; every call and
// every handler is on that thread.

#include <google/protobuf/message_lite.h>

#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gangrun::rpc {

inline constexpr std::string_view kSessionMagic = "GRS1";
inline constexpr size_t kFrameHeaderBytes = 5;
inline constexpr uint32_t kMaxFramePayload = 8 << 20;  // as gRPC's message limit

// The `why` of a connection whose peer closed it (EOF).
inline constexpr std::string_view kPeerClosed = "the peer closed the connection";

enum class FrameType : uint8_t {
  kOpen = 1,
  kAccepted = 2,
  kRefused = 3,
  kEvent = 4,
  kCommand = 5,
  kPing = 6,
  kPong = 7,
};

// Appends one frame (`message` null: no payload).
void AppendFrame(std::string& out, FrameType type,
                 const google::protobuf::MessageLite* message = nullptr);

class FrameConnection : public std::enable_shared_from_this<FrameConnection> {
 public:
  // `payload` is valid during the call only.
  using FrameHandler = std::function<void(FrameType type, std::string_view payload)>;
  // The connection ended (EOF, an error, a malformed frame); `why` says which, `malformed`
  // is true for a frame that breaks the framing. Runs once, never after Close().
  using EndHandler = std::function<void(const std::string& why, bool malformed)>;

  explicit FrameConnection(boost::asio::ip::tcp::socket socket);
  FrameConnection(const FrameConnection&) = delete;
  FrameConnection& operator=(const FrameConnection&) = delete;

  // Starts reading.
  void Start(FrameHandler on_frame, EndHandler on_end);
  void Send(FrameType type, const google::protobuf::MessageLite* message = nullptr);
  // Sends bytes as they are (the session magic).
  void SendBytes(std::string_view bytes);
  // Shuts the sending side down once everything queued is written; reading goes on.
  void CloseAfterWrites();
  // Closes the socket now; no handler runs after this.
  void Close();
  bool closed() const { return closed_; }

 private:
  void Read();
  void Parse();
  void Write();
  void End(const std::string& why, bool malformed = false);

  boost::asio::ip::tcp::socket socket_;
  FrameHandler on_frame_;
  EndHandler on_end_;
  std::vector<char> in_;
  size_t in_used_ = 0;
  std::string queued_;   // frames waiting for the write in flight
  std::string writing_;  // the write in flight
  bool close_after_writes_ = false;
  bool closed_ = false;
};

}  // namespace gangrun::rpc
