#include "rpc/frame_connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "rpc/connection_activity.h"

namespace gangrun::rpc {

using boost::asio::ip::tcp;

std::string PeerOf(const tcp::socket& socket) {
  boost::system::error_code error;
  const tcp::endpoint remote = socket.remote_endpoint(error);
  if (error) return "";
  const std::string port = std::to_string(remote.port());
  const boost::asio::ip::address address = remote.address();
  return PeerEndpoint(address.is_v4() ? "ipv4:" + address.to_string() + ":" + port
                                      : "ipv6:[" + address.to_string() + "]:" + port);
}

FrameConnection::FrameConnection(tcp::socket socket)
    : socket_(std::move(socket)), peer_(PeerOf(socket_)) {}

void FrameConnection::Start(FrameHandler on_frame, EndHandler on_end, uint32_t max_payload) {
  on_frame_ = std::move(on_frame);
  on_end_ = std::move(on_end);
  decoder_.set_max_payload(max_payload);
  in_.resize(kSmallReadBuffer);
  Read();
}

void FrameConnection::Send(FrameType type, std::string_view payload) {
  if (closed_ || close_after_writes_) return;
  AppendFrame(queued_, type, payload);
  Flush();
}

void FrameConnection::SendBytes(std::string_view bytes) {
  if (closed_ || close_after_writes_) return;
  queued_.append(bytes);
  Flush();
}

void FrameConnection::CloseAfterWrites() {
  if (closed_) return;
  close_after_writes_ = true;
  Flush();
}

// The frames of one turn of the loop leave in one write (a handshake's answer and what
// follows it, a node's events and their padding): one send and one segment instead of one
// per frame, for both ends' kernels.
void FrameConnection::Flush() {
  if (queued_bytes() > max_queued_) return Write();  // ends the connection now
  if (!writing_.empty() || flush_posted_) return;    // goes after the write in flight
  flush_posted_ = true;
  boost::asio::post(socket_.get_executor(), [self = shared_from_this()] {
    self->flush_posted_ = false;
    self->Write();
  });
}

void FrameConnection::Close() {
  if (closed_) return;
  closed_ = true;
  // What was sent in this turn and not written yet leaves now if the kernel takes it at once
  // (as when every Send wrote at once); never waits.
  if (writing_.empty() && !queued_.empty()) {
    (void)::send(socket_.native_handle(), queued_.data(), queued_.size(),
                 MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  boost::system::error_code ignored;
  socket_.close(ignored);
}

void FrameConnection::Read() {
  socket_.async_read_some(
      boost::asio::buffer(in_),
      [self = shared_from_this()](const boost::system::error_code& error, size_t n) {
        if (self->closed_) return;
        if (error) {
          self->End(error == boost::asio::error::eof ? std::string(kPeerClosed) : error.message());
          return;
        }
        self->OnRead(n);
      });
}

void FrameConnection::OnRead(size_t n) {
  auto self = shared_from_this();  // a handler may drop its owner's reference
  absl::Status fed = decoder_.Feed(std::string_view(in_.data(), n),
                                   [this](FrameType type, std::string_view payload) {
                                     on_frame_(type, payload);
                                     return !closed_;
                                   });
  if (closed_) return;
  if (!fed.ok()) return End(std::string(fed.message()), true);
  // A large frame on its way (only an authenticated peer may send one) is read in larger
  // pieces; the buffer shrinks back once it is in.
  const size_t wanted = decoder_.missing() > kSmallReadBuffer ? kLargeReadBuffer : kSmallReadBuffer;
  if (in_.size() != wanted) std::vector<char>(wanted).swap(in_);
  Read();
}

void FrameConnection::Write() {
  if (closed_) return;
  if (queued_bytes() > max_queued_) {
    // Reached from Send: the owner hears of it from the loop, not from inside its own call.
    const std::string why = "the peer reads nothing: " + std::to_string(queued_bytes()) +
                            " bytes wait to be sent (the limit is " + std::to_string(max_queued_) +
                            ")";
    EndHandler on_end = std::move(on_end_);
    on_end_ = nullptr;
    on_frame_ = nullptr;
    std::string().swap(queued_);
    Close();
    if (on_end) {
      boost::asio::post(socket_.get_executor(),
                        [on_end = std::move(on_end), why] { on_end(why, false); });
    }
    return;
  }
  if (!writing_.empty()) return;
  if (queued_.empty()) {
    if (close_after_writes_) {
      boost::system::error_code ignored;
      socket_.shutdown(tcp::socket::shutdown_send, ignored);
    }
    return;
  }
  writing_.swap(queued_);
  boost::asio::async_write(
      socket_, boost::asio::buffer(writing_),
      [self = shared_from_this()](const boost::system::error_code& error, size_t) {
        if (self->closed_) return;
        // Keep a small buffer for the next write; give a large one back.
        if (self->writing_.capacity() > kSmallReadBuffer * 32) {
          std::string().swap(self->writing_);
        } else {
          self->writing_.clear();
        }
        if (error) return self->End("cannot send: " + error.message());
        self->Write();
      });
}

void FrameConnection::End(const std::string& why, bool malformed) {
  if (closed_) return;
  Close();
  EndHandler on_end = std::move(on_end_);
  on_end_ = nullptr;
  on_frame_ = nullptr;
  if (on_end) on_end(why, malformed);
}

namespace {

// A field of the socket's tcp_info, if the kernel fills it.
template <typename Field>
std::optional<std::chrono::milliseconds> TcpInfoAge(const tcp::socket& socket,
                                                    Field tcp_info::*field, size_t end) {
  tcp_info info{};
  socklen_t length = sizeof(info);
  if (getsockopt(const_cast<tcp::socket&>(socket).native_handle(), IPPROTO_TCP, TCP_INFO, &info,
                 &length) != 0 ||
      length < end) {
    return std::nullopt;
  }
  return std::chrono::milliseconds(info.*field);
}

}  // namespace

std::optional<std::chrono::milliseconds> FrameConnection::SinceLastAck() const {
  if (closed_) return std::nullopt;
  return TcpInfoAge(socket_, &tcp_info::tcpi_last_ack_recv,
                    offsetof(tcp_info, tcpi_last_ack_recv) + sizeof(uint32_t));
}

std::optional<std::chrono::milliseconds> FrameConnection::SinceLastData() const {
  if (closed_) return std::nullopt;
  return TcpInfoAge(socket_, &tcp_info::tcpi_last_data_recv,
                    offsetof(tcp_info, tcpi_last_data_recv) + sizeof(uint32_t));
}

bool FrameConnection::SetReadWatermark(int bytes) {
  if (closed_) return false;
  return setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof(bytes)) == 0;
}

}  // namespace gangrun::rpc
