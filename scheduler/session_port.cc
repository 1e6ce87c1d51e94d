#include "scheduler/session_port.h"

#include <fcntl.h>

#include <algorithm>
#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <unordered_map>
#include <unordered_set>

#include "common/logging.h"
#include "common/net.h"
#include "common/secret.h"
#include "gangrun/v1/session.pb.h"
#include "rpc/connection_activity.h"
#include "rpc/frames.h"
#include "rpc/server.h"

namespace gangrun::scheduler {
namespace {

using boost::asio::ip::tcp;
using std::chrono::milliseconds;

constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

bool StartsAs(std::string_view bytes, std::string_view whole) {
  const size_t n = std::min(bytes.size(), whole.size());
  return bytes.substr(0, n) == whole.substr(0, n);
}

// The remote endpoint as rpc::ConnectionActivityReader names it ("" when unknown).
std::string PeerOf(const tcp::socket& socket) {
  boost::system::error_code error;
  const tcp::endpoint remote = socket.remote_endpoint(error);
  if (error) return "";
  const std::string port = std::to_string(remote.port());
  const boost::asio::ip::address address = remote.address();
  return rpc::PeerEndpoint(address.is_v4() ? "ipv4:" + address.to_string() + ":" + port
                                           : "ipv6:[" + address.to_string() + "]:" + port);
}

}  // namespace

Opening ClassifyOpening(std::string_view first_bytes) {
  if (StartsAs(first_bytes, rpc::kSessionMagic)) {
    return first_bytes.size() >= rpc::kSessionMagic.size() ? Opening::kSession
                                                            : Opening::kIncomplete;
  }
  if (StartsAs(first_bytes, kHttp2Preface)) {
    return first_bytes.size() >= kHttp2Preface.size() ? Opening::kHttp2 : Opening::kIncomplete;
  }
  return Opening::kUnknown;
}

// A connection whose first bytes have not yet said what it is.
struct Sniffer {
  Sniffer(tcp::socket s, boost::asio::io_context& io)
      : socket(std::move(s)), deadline(io), again(io) {}
  tcp::socket socket;
  boost::asio::steady_timer deadline;  // the handshake timeout
  boost::asio::steady_timer again;     // the next look at a preface that is still arriving
  std::array<char, kHttp2Preface.size()> bytes{};
  milliseconds wait{5};
  bool done = false;
};

class Session;

struct SessionPort::State : std::enable_shared_from_this<SessionPort::State> {
  explicit State(boost::asio::io_context& context)
      : io(context), acceptor(context), retry(context), drain_deadline(context) {}

  void Accept();
  void OnAccepted(tcp::socket socket);
  void Peek(const std::shared_ptr<Sniffer>& sniffer);
  void Drop(const std::shared_ptr<Sniffer>& sniffer);
  void StopAccepting();
  void Drained();
  void Close();

  boost::asio::io_context& io;
  tcp::acceptor acceptor;
  boost::asio::steady_timer retry;  // the next accept after an error (out of descriptors)
  boost::asio::steady_timer drain_deadline;
  std::function<void()> drained;  // set while draining
  Scheduler* scheduler = nullptr;
  std::string token;
  rpc::Server* grpc = nullptr;
  milliseconds handshake{rpc::HandshakeTimeoutMs()};
  bool closed = false;
  std::unordered_set<std::shared_ptr<Sniffer>> sniffers;
  std::unordered_map<Session*, std::shared_ptr<Session>> sessions;
};

// A node's session: the scheduler's NodeLink for it.
class Session : public NodeLink, public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<SessionPort::State> port, tcp::socket socket,
          boost::asio::steady_timer::time_point open_by)
      : port_(std::move(port)),
        peer_(PeerOf(socket)),
        conn_(std::make_shared<rpc::FrameConnection>(std::move(socket))),
        timer_(port_->io) {
    timer_.expires_at(open_by);
  }
  ~Session() override { conn_->Close(); }

  void Start() {
    timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& error) {
      auto self = weak.lock();
      if (error || !self || self->opened_ || self->conn_->closed()) return;
      self->conn_->Close();
      self->OnEnd();
    });
    conn_->Start([this](rpc::FrameType type, std::string_view payload) { OnFrame(type, payload); },
                 [this](const std::string& why, bool malformed) {
                   if (malformed) Log(why);
                   OnEnd();
                 });
  }

  void Send(const v1::NodeCommand& command) override {
    conn_->Send(rpc::FrameType::kCommand, &command);
  }
  // Ends the session once everything sent is written; a node that does not close its end
  // within the handshake timeout is closed on.
  void Close() override {
    conn_->CloseAfterWrites();
    Linger();
  }
  common::TimePoint LastHeartbeat() const override { return last_heartbeat_; }
  std::string PeerEndpoint() const override { return peer_; }

  // The port is closing: no word to the scheduler.
  void Shut() {
    timer_.cancel();
    conn_->Close();
  }

 private:
  void Linger() {
    timer_.expires_after(port_->handshake);
    timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& error) {
      auto self = weak.lock();
      if (error || !self || self->conn_->closed()) return;
      self->conn_->Close();
      self->OnEnd();
    });
  }

  void OnFrame(rpc::FrameType type, std::string_view payload) {
    auto self = shared_from_this();  // the scheduler may end the session from inside
    if (refused_) return;
    if (!opened_) return Open(type, payload);
    switch (type) {
      case rpc::FrameType::kPing:
        last_heartbeat_ = Now();
        conn_->Send(rpc::FrameType::kPong);
        return;
      case rpc::FrameType::kEvent: {
        v1::NodeEvent event;
        if (!event.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
          return Fail("a malformed event");
        }
        last_heartbeat_ = Now();
        // A heartbeat is counted here, as the gRPC session counts it: no trip further.
        if (event.has_heartbeat() || port_->closed) return;
        port_->scheduler->OnNodeEvent(node_id_, event);
        return;
      }
      default:
        return Fail("an unexpected frame (type " + std::to_string(static_cast<int>(type)) + ")");
    }
  }

  void Open(rpc::FrameType type, std::string_view payload) {
    v1::SessionOpen open;
    if (type != rpc::FrameType::kOpen ||
        !open.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
      return Fail("no session opening");
    }
    if (!port_->token.empty() && !common::SecretsEqual(open.token(), port_->token)) {
      refused_ = true;
      v1::SessionRefused refused;
      refused.set_reason("wrong or missing token");
      refused.set_unauthenticated(true);
      conn_->Send(rpc::FrameType::kRefused, &refused);
      return Close();
    }
    opened_ = true;
    timer_.cancel();
    last_heartbeat_ = Now();
    conn_->Send(rpc::FrameType::kAccepted);
    if (!port_->closed) node_id_ = port_->scheduler->AddNode(this);
  }

  void Log(const std::string& why) {
    common::Logger("scheduler")->warn("closing the session from {}: {}", peer_, why);
  }
  void Fail(const std::string& why) {
    Log(why);
    conn_->Close();
    OnEnd();
  }

  // The connection is gone: the scheduler hears of it, and the port forgets the session.
  void OnEnd() {
    auto self = shared_from_this();
    timer_.cancel();
    if (opened_ && !port_->closed) port_->scheduler->OnNodeDisconnected(node_id_);
    opened_ = false;
    port_->sessions.erase(this);
    if (port_->drained && port_->sessions.empty()) port_->Drained();
  }

  static common::TimePoint Now() {
    return common::TimePoint(std::chrono::steady_clock::now().time_since_epoch());
  }

  std::shared_ptr<SessionPort::State> port_;
  std::string peer_;
  std::shared_ptr<rpc::FrameConnection> conn_;
  boost::asio::steady_timer timer_;  // the opening deadline, then the linger after Close
  int node_id_ = -1;
  bool opened_ = false;
  bool refused_ = false;
  common::TimePoint last_heartbeat_ = common::TimePoint::min();
};

void SessionPort::State::Accept() {
  acceptor.async_accept(
      [self = shared_from_this()](const boost::system::error_code& error, tcp::socket socket) {
        if (self->closed) return;
        if (error) {
          if (error == boost::asio::error::operation_aborted) return;
          // Out of descriptors, most likely: try again shortly instead of spinning.
          self->retry.expires_after(milliseconds(100));
          self->retry.async_wait([self](const boost::system::error_code& e) {
            if (!e && !self->closed) self->Accept();
          });
          return;
        }
        self->OnAccepted(std::move(socket));
        self->Accept();
      });
}

void SessionPort::State::OnAccepted(tcp::socket socket) {
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  fcntl(socket.native_handle(), F_SETFD, FD_CLOEXEC);  // Asio's accept does not set it
  auto sniffer = std::make_shared<Sniffer>(std::move(socket), io);
  sniffers.insert(sniffer);
  sniffer->deadline.expires_after(handshake);
  sniffer->deadline.async_wait([self = shared_from_this(), weak = std::weak_ptr(sniffer)](
                                   const boost::system::error_code& error) {
    auto sniffer = weak.lock();
    if (error || self->closed || !sniffer || sniffer->done) return;
    self->Drop(sniffer);
  });
  Peek(sniffer);
}

// Looks at the first bytes without taking them, so that gRPC reads the whole preface.
void SessionPort::State::Peek(const std::shared_ptr<Sniffer>& sniffer) {
  sniffer->socket.async_receive(
      boost::asio::buffer(sniffer->bytes), tcp::socket::message_peek,
      [self = shared_from_this(), sniffer](const boost::system::error_code& error, size_t n) {
        if (self->closed || sniffer->done) return;
        if (error || n == 0) return self->Drop(sniffer);
        switch (ClassifyOpening(std::string_view(sniffer->bytes.data(), n))) {
          case Opening::kUnknown:
            return self->Drop(sniffer);
          case Opening::kIncomplete:
            // Rare (a preface split across packets): look again soon, less often each time.
            sniffer->again.expires_after(sniffer->wait);
            sniffer->wait = std::min(sniffer->wait * 2, milliseconds(200));
            sniffer->again.async_wait([self, sniffer](const boost::system::error_code& e) {
              if (!e && !self->closed && !sniffer->done) self->Peek(sniffer);
            });
            return;
          case Opening::kSession: {
            std::array<char, rpc::kSessionMagic.size()> magic;
            boost::system::error_code read_error;
            boost::asio::read(sniffer->socket, boost::asio::buffer(magic), read_error);
            if (read_error) return self->Drop(sniffer);
            sniffer->done = true;
            self->sniffers.erase(sniffer);
            auto session = std::make_shared<Session>(self, std::move(sniffer->socket),
                                                     sniffer->deadline.expiry());
            sniffer->deadline.cancel();
            self->sessions[session.get()] = session;
            session->Start();
            return;
          }
          case Opening::kHttp2: {
            sniffer->done = true;
            self->sniffers.erase(sniffer);
            sniffer->deadline.cancel();
            boost::system::error_code release_error;
            const int fd = sniffer->socket.release(release_error);
            if (release_error) return;
            self->grpc->AddConnection(self->acceptor.native_handle(), fd);
            return;
          }
        }
      });
}

void SessionPort::State::Drop(const std::shared_ptr<Sniffer>& sniffer) {
  sniffer->done = true;
  boost::system::error_code ignored;
  sniffer->socket.close(ignored);
  sniffer->deadline.cancel();
  sniffer->again.cancel();
  sniffers.erase(sniffer);
}

void SessionPort::State::StopAccepting() {
  boost::system::error_code ignored;
  acceptor.close(ignored);
  retry.cancel();
  for (const auto& sniffer : sniffers) {
    sniffer->done = true;
    sniffer->socket.close(ignored);
    sniffer->deadline.cancel();
    sniffer->again.cancel();
  }
  sniffers.clear();
}

void SessionPort::State::Drained() {
  auto done = std::move(drained);
  drained = nullptr;
  drain_deadline.cancel();
  Close();
  if (done) done();
}

void SessionPort::State::Close() {
  if (closed) return;
  closed = true;
  StopAccepting();
  drain_deadline.cancel();
  auto open = std::move(sessions);
  sessions.clear();
  for (auto& [raw, session] : open) session->Shut();
}

absl::StatusOr<std::unique_ptr<SessionPort>> SessionPort::Open(boost::asio::io_context& io,
                                                               const std::string& listen_address) {
  auto parsed = common::ParseHostPort(listen_address, "the scheduler's address", true);
  if (!parsed.ok()) return parsed.status();
  boost::system::error_code error;
  boost::asio::ip::address address = boost::asio::ip::make_address(parsed->host, error);
  if (error) {
    auto resolved = common::ResolveHost(parsed->host);
    if (!resolved.ok()) return resolved.status();
    address = boost::asio::ip::make_address(resolved->front(), error);
    if (error) return absl::InvalidArgumentError("cannot listen on " + listen_address);
  }
  std::unique_ptr<SessionPort> port(new SessionPort());
  port->state_ = std::make_shared<State>(io);
  tcp::acceptor& acceptor = port->state_->acceptor;
  tcp::endpoint endpoint(address, static_cast<uint16_t>(parsed->port));
  // A wildcard listens on IPv6 and IPv4, as gRPC's does.
  if (address.is_unspecified()) {
    acceptor.open(tcp::v6(), error);
    if (!error) {
      acceptor.set_option(boost::asio::ip::v6_only(false), error);
      endpoint = tcp::endpoint(tcp::v6(), endpoint.port());
    } else {
      endpoint = tcp::endpoint(tcp::v4(), endpoint.port());
    }
  }
  if (!acceptor.is_open()) acceptor.open(endpoint.protocol(), error);
  if (error) return absl::UnavailableError("cannot listen on " + listen_address + ": " + error.message());
  fcntl(acceptor.native_handle(), F_SETFD, FD_CLOEXEC);
  acceptor.set_option(tcp::acceptor::reuse_address(true), error);
  acceptor.bind(endpoint, error);
  if (error == boost::asio::error::address_in_use) {
    return absl::AlreadyExistsError(listen_address + " is taken");
  }
  if (!error) acceptor.listen(tcp::socket::max_listen_connections, error);
  if (error) return absl::UnavailableError("cannot listen on " + listen_address + ": " + error.message());
  port->port_ = acceptor.local_endpoint(error).port();
  return port;
}

void SessionPort::Start(Scheduler& scheduler, std::string token, rpc::Server* grpc) {
  state_->scheduler = &scheduler;
  state_->token = std::move(token);
  state_->grpc = grpc;
  state_->Accept();
}

void SessionPort::Drain(std::chrono::milliseconds within, std::function<void()> done) {
  State& state = *state_;
  if (state.closed || state.drained) {
    boost::asio::post(state.io, std::move(done));
    return;
  }
  state.StopAccepting();
  state.drained = std::move(done);
  state.drain_deadline.expires_after(within);
  state.drain_deadline.async_wait([state = state_](const boost::system::error_code& error) {
    if (!error && state->drained) state->Drained();
  });
  if (state.sessions.empty()) {
    boost::asio::post(state.io, [state = state_] {
      if (state->drained) state->Drained();
    });
  }
}

void SessionPort::Close() {
  if (state_) state_->Close();
}

SessionPort::~SessionPort() { Close(); }

}  // namespace gangrun::scheduler
