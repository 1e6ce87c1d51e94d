#include "rpc/port.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <map>
#include <set>
#include <unordered_set>

#include "common/logging.h"
#include "common/net.h"
#include "common/status.h"
#include "rpc/frame_connection.h"
#include "rpc/frame_format.h"
#include "rpc/server.h"

namespace gangrun::rpc {
namespace {

using boost::asio::ip::tcp;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

bool StartsAs(std::string_view bytes, std::string_view whole) {
  const size_t n = std::min(bytes.size(), whole.size());
  return bytes.substr(0, n) == whole.substr(0, n);
}

}  // namespace

Opening ClassifyOpening(std::string_view first_bytes) {
  if (first_bytes.empty()) return Opening::kIncomplete;
  if (StartsAs(first_bytes, kSessionMagicPrefix)) {
    return first_bytes.size() >= kSessionMagic.size() ? Opening::kSession : Opening::kIncomplete;
  }
  if (StartsAs(first_bytes, kHttp2Preface)) {
    return first_bytes.size() >= kHttp2Preface.size() ? Opening::kHttp2 : Opening::kIncomplete;
  }
  // A TLS record: content type 22 (handshake), protocol version 3.x.
  if (first_bytes[0] == 0x16) {
    if (first_bytes.size() < 3) return Opening::kIncomplete;
    return first_bytes[1] == 0x03 && static_cast<unsigned char>(first_bytes[2]) <= 0x04
               ? Opening::kTls
               : Opening::kUnknown;
  }
  return Opening::kUnknown;
}

// The slots of connections that have proven nothing, oldest first.
struct PreAuthSlot::Table : std::enable_shared_from_this<PreAuthSlot::Table> {
  std::map<uint64_t, PreAuthSlot*> held;  // by id: ids grow with time
  uint64_t next_id = 1;
  std::function<void()> on_release;

  std::shared_ptr<PreAuthSlot> Take() {
    std::shared_ptr<PreAuthSlot> slot(new PreAuthSlot());
    slot->table_ = weak_from_this();
    slot->since_ = SteadyClock::now();
    slot->id_ = next_id++;
    held[slot->id_] = slot.get();
    return slot;
  }
};

PreAuthSlot::~PreAuthSlot() { Release(); }

void PreAuthSlot::Evict() {
  auto evict = std::move(evict_);
  Release();
  if (evict) evict();  // may destroy this slot
}

void PreAuthSlot::Release() {
  if (id_ == 0) return;
  const uint64_t id = id_;
  id_ = 0;
  evict_ = nullptr;
  if (auto table = table_.lock()) {
    table->held.erase(id);
    if (table->on_release) table->on_release();
  }
}

// A connection whose first bytes have not yet said what it is.
struct Sniffer {
  Sniffer(tcp::socket s, boost::asio::io_context& io) : socket(std::move(s)), again(io) {}
  tcp::socket socket;
  boost::asio::steady_timer again;  // the next look at an opening that is still arriving
  std::array<char, kHttp2Preface.size()> bytes{};
  milliseconds wait{5};
  std::shared_ptr<PreAuthSlot> slot;
  bool done = false;
};

struct Port::State : std::enable_shared_from_this<Port::State> {
  explicit State(boost::asio::io_context& context)
      : io(context),
        acceptor(context),
        retry(context),
        slot_wait(context),
        slots(std::make_shared<PreAuthSlot::Table>()) {}

  // Connections accepted in one turn of the loop past the first: bounds that turn's work.
  static constexpr int kAcceptBatch = 256;
  void Accept();
  void AcceptWaiting();
  void Admit(tcp::socket socket);
  void AdmitFromLobby();
  void OnAccepted(tcp::socket socket);
  void Peek(const std::shared_ptr<Sniffer>& sniffer);
  void Classified(const std::shared_ptr<Sniffer>& sniffer, Opening opening);
  void ToGrpc(const std::shared_ptr<Sniffer>& sniffer);
  void Drop(const std::shared_ptr<Sniffer>& sniffer);
  void StopAccepting();

  boost::asio::io_context& io;
  tcp::acceptor acceptor;
  boost::asio::steady_timer retry;      // the next accept after an error (out of descriptors)
  boost::asio::steady_timer slot_wait;  // every slot is young: the lobby waits
  // Connections accepted while every slot is taken, oldest first: a descriptor each, nothing
  // read yet (at most options.max_waiting); each takes a slot as one frees.
  std::deque<tcp::socket> lobby;
  bool waiting_for_room = false;  // the lobby is full: accepting waits
  bool admit_posted = false;
  bool accepting = false;
  Options options;
  SessionHandler on_session;
  GrpcServer grpc;
  std::shared_ptr<ConnectionActivityReader> activity;
  milliseconds handshake{HandshakeTimeoutMs()};
  std::shared_ptr<PreAuthSlot::Table> slots;
  std::unordered_set<std::shared_ptr<Sniffer>> sniffers;
  std::set<std::string> grpc_peers;  // the connections handed to gRPC, by remote endpoint
  std::string grpc_count_error;      // said once
  bool said_grpc_full = false;
  bool said_slots_full = false;
};

size_t Port::UnauthenticatedBound(uint64_t file_limit) {
  return static_cast<size_t>(std::clamp<uint64_t>(file_limit / 8, 16, 1024));
}

size_t Port::LobbyBound(uint64_t file_limit) {
  return static_cast<size_t>(std::clamp<uint64_t>(file_limit / 4, 16, 16384));
}

size_t Port::GrpcConnectionBound(uint64_t file_limit) {
  return static_cast<size_t>(std::clamp<uint64_t>(file_limit / 2, 32, 16384));
}

size_t Port::max_unauthenticated() const { return state_->options.max_unauthenticated; }
size_t Port::max_waiting() const { return state_->options.max_waiting; }
size_t Port::max_grpc_connections() const { return state_->options.max_grpc_connections; }

// Lets the lobby's oldest connections take the free slots, and when every slot is taken
// closes a holder that has had its slot for kMinSlotAge (an attacker's idle connections are
// always the oldest) for the lobby's oldest; when every holder is younger, looks again once
// the oldest is old enough. Accepting, paused while the lobby was full, goes on.
void Port::State::AdmitFromLobby() {
  admit_posted = false;
  while (!lobby.empty() && accepting) {
    if (slots->held.size() >= options.max_unauthenticated) {
      PreAuthSlot* oldest = slots->held.begin()->second;
      const auto age = SteadyClock::now() - oldest->since();
      if (age < kMinSlotAge) {
        slot_wait.expires_after(kMinSlotAge - age);
        slot_wait.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
          if (!error && self->accepting) self->AdmitFromLobby();
        });
        break;
      }
      if (!said_slots_full) {
        said_slots_full = true;
        common::Logger("scheduler")
            ->warn(
                "{} connections on port {} have proven nothing yet and {} more wait; closing "
                "the oldest of them as new ones come",
                slots->held.size(), acceptor.local_endpoint().port(), lobby.size());
      }
      oldest->Evict();
    }
    tcp::socket socket = std::move(lobby.front());
    lobby.pop_front();
    OnAccepted(std::move(socket));
  }
  if (waiting_for_room && lobby.size() < options.max_waiting) {
    waiting_for_room = false;
    Accept();
  }
}

// Takes an accepted connection: it waits in the lobby (a descriptor, nothing read) until it
// has a slot.
void Port::State::Admit(tcp::socket socket) {
  lobby.push_back(std::move(socket));
  AdmitFromLobby();
}

void Port::State::Accept() {
  if (!accepting || waiting_for_room) return;
  if (lobby.size() >= options.max_waiting) {
    waiting_for_room = true;  // the kernel's backlog holds the rest; AdmitFromLobby resumes
    return;
  }
  acceptor.async_accept(
      [self = shared_from_this()](const boost::system::error_code& error, tcp::socket socket) {
        if (!self->accepting) return;
        if (error) {
          if (error == boost::asio::error::operation_aborted) return;
          // Out of descriptors, most likely: try again shortly instead of spinning.
          self->retry.expires_after(milliseconds(100));
          self->retry.async_wait([self](const boost::system::error_code& e) {
            if (!e && self->accepting) self->Accept();
          });
          return;
        }
        self->Admit(std::move(socket));
        self->AcceptWaiting();
        self->Accept();
      });
}

// The connections already waiting in the kernel's queue, taken in this turn of the loop (at
// most kAcceptBatch): each async accept completes one turn later, behind every other handler,
// so a loop busy with thousands of sessions would otherwise let the queue (SOMAXCONN) fill,
// and the kernel drops what does not fit: the peer waits a second for a retransmission.
void Port::State::AcceptWaiting() {
  boost::system::error_code error;
  for (int i = 0; i < kAcceptBatch && accepting && lobby.size() < options.max_waiting; ++i) {
    tcp::socket socket(io);
    acceptor.accept(socket, error);
    if (error) return;  // would block (none waits), or an error the async accept meets again
    Admit(std::move(socket));
  }
}

void Port::State::OnAccepted(tcp::socket socket) {
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  fcntl(socket.native_handle(), F_SETFD, FD_CLOEXEC);  // Asio's accept does not set it
  auto sniffer = std::make_shared<Sniffer>(std::move(socket), io);
  sniffer->slot = slots->Take();
  sniffer->slot->OnEvict([weak = std::weak_ptr(sniffer), self = weak_from_this()] {
    auto sniffer = weak.lock();
    auto state = self.lock();
    if (sniffer && state && !sniffer->done) state->Drop(sniffer);
  });
  sniffers.insert(sniffer);
  // The opening must be complete within the handshake timeout.
  sniffer->again.expires_after(handshake);
  sniffer->again.async_wait([self = shared_from_this(),
                             weak = std::weak_ptr(sniffer)](const boost::system::error_code& e) {
    auto sniffer = weak.lock();
    if (e || !sniffer || sniffer->done) return;
    self->Drop(sniffer);
  });
  Peek(sniffer);
}

// Looks at the first bytes without taking them, so that gRPC reads the whole opening.
void Port::State::Peek(const std::shared_ptr<Sniffer>& sniffer) {
  sniffer->socket.async_receive(
      boost::asio::buffer(sniffer->bytes), tcp::socket::message_peek,
      [self = shared_from_this(), sniffer](const boost::system::error_code& error, size_t n) {
        if (!self->accepting || sniffer->done) return;
        if (error || n == 0) return self->Drop(sniffer);
        const Opening opening = ClassifyOpening(std::string_view(sniffer->bytes.data(), n));
        if (opening != Opening::kIncomplete) return self->Classified(sniffer, opening);
        // Rare (an opening split across packets): look again soon, less often each time,
        // within the handshake timeout armed at accept.
        auto deadline = sniffer->again.expiry();
        auto look = std::make_shared<boost::asio::steady_timer>(self->io);
        look->expires_after(
            std::min<SteadyClock::duration>(sniffer->wait, deadline - SteadyClock::now()));
        sniffer->wait = std::min(sniffer->wait * 2, milliseconds(200));
        look->async_wait([self, sniffer, look](const boost::system::error_code& e) {
          if (!e && self->accepting && !sniffer->done) self->Peek(sniffer);
        });
      });
}

void Port::State::Classified(const std::shared_ptr<Sniffer>& sniffer, Opening opening) {
  switch (opening) {
    case Opening::kSession: {
      if (!on_session) return Drop(sniffer);
      std::string magic(kSessionMagic.size(), '\0');
      boost::system::error_code read_error;
      boost::asio::read(sniffer->socket, boost::asio::buffer(magic), read_error);
      if (read_error) return Drop(sniffer);
      sniffer->done = true;
      sniffer->again.cancel();
      sniffers.erase(sniffer);
      auto slot = std::move(sniffer->slot);
      slot->OnEvict(nullptr);
      on_session(std::move(sniffer->socket), std::move(magic), std::move(slot));
      return;
    }
    case Opening::kHttp2:
      if (options.tls) return Drop(sniffer);  // gRPC speaks TLS here
      return ToGrpc(sniffer);
    case Opening::kTls:
      if (!options.tls) return Drop(sniffer);
      return ToGrpc(sniffer);
    case Opening::kUnknown:
    case Opening::kIncomplete:
      return Drop(sniffer);
  }
}

// Hands a connection to the gRPC server, unless it already holds as many as it may: then the
// ones it closed meanwhile are counted out first (one sock_diag request), and a connection
// over the bound is closed.
void Port::State::ToGrpc(const std::shared_ptr<Sniffer>& sniffer) {
  const std::string peer = PeerOf(sniffer->socket);
  if (grpc_peers.size() >= options.max_grpc_connections) {
    auto current = activity->Read();
    if (!current.ok()) {
      if (grpc_count_error.empty()) {
        grpc_count_error = std::string(current.status().message());
        common::Logger("scheduler")
            ->warn("cannot count the gRPC connections on port {} ({}); they are not bounded",
                   acceptor.local_endpoint().port(), grpc_count_error);
      }
      grpc_peers.clear();
    } else {
      for (auto it = grpc_peers.begin(); it != grpc_peers.end();) {
        it = current->count(*it) ? std::next(it) : grpc_peers.erase(it);
      }
    }
    if (grpc_peers.size() >= options.max_grpc_connections) {
      if (!said_grpc_full) {
        said_grpc_full = true;
        common::Logger("scheduler")
            ->warn(
                "port {} holds {} gRPC connections, its bound (from the file limit); new ones "
                "are closed until some end",
                acceptor.local_endpoint().port(), grpc_peers.size());
      }
      return Drop(sniffer);
    }
  }
  sniffer->done = true;
  sniffer->again.cancel();
  sniffers.erase(sniffer);
  sniffer->slot.reset();
  boost::system::error_code release_error;
  const int fd = sniffer->socket.release(release_error);
  if (release_error) return;
  Server* server = grpc ? grpc() : nullptr;
  if (server == nullptr) {
    ::close(fd);
    return;
  }
  if (!peer.empty()) grpc_peers.insert(peer);
  server->AddConnection(acceptor.native_handle(), fd);
}

void Port::State::Drop(const std::shared_ptr<Sniffer>& sniffer) {
  sniffer->done = true;
  boost::system::error_code ignored;
  sniffer->socket.close(ignored);
  sniffer->again.cancel();
  sniffer->slot.reset();
  sniffers.erase(sniffer);
}

void Port::State::StopAccepting() {
  if (!accepting && !acceptor.is_open()) return;
  accepting = false;
  boost::system::error_code ignored;
  acceptor.close(ignored);
  retry.cancel();
  slot_wait.cancel();
  lobby.clear();  // closes them
  auto open = std::move(sniffers);
  sniffers.clear();
  for (const auto& sniffer : open) {
    sniffer->done = true;
    sniffer->socket.close(ignored);
    sniffer->again.cancel();
    sniffer->slot.reset();
  }
}

absl::StatusOr<tcp::acceptor> OpenListener(boost::asio::io_context& io,
                                           const std::string& listen_address) {
  auto parsed = common::ParseHostPort(listen_address, "the listening address", true);
  if (!parsed.ok()) return parsed.status();
  boost::system::error_code error;
  boost::asio::ip::address address = boost::asio::ip::make_address(parsed->host, error);
  if (error) {
    auto resolved = common::ResolveHost(parsed->host);
    if (!resolved.ok()) return resolved.status();
    address = boost::asio::ip::make_address(resolved->front(), error);
    if (error) return absl::InvalidArgumentError("cannot listen on " + listen_address);
  }
  tcp::acceptor acceptor(io);
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
  if (error) {
    return absl::UnavailableError("cannot listen on " + listen_address + ": " + error.message());
  }
  fcntl(acceptor.native_handle(), F_SETFD, FD_CLOEXEC);
  acceptor.set_option(tcp::acceptor::reuse_address(true), error);
  acceptor.bind(endpoint, error);
  if (error == boost::asio::error::address_in_use) {
    return absl::AlreadyExistsError(listen_address + " is taken");
  }
  if (!error) acceptor.listen(tcp::socket::max_listen_connections, error);
  if (error) {
    return absl::UnavailableError("cannot listen on " + listen_address + ": " + error.message());
  }
  return acceptor;
}

uint64_t FileLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1 << 20;
  return limit.rlim_cur;
}

absl::StatusOr<std::unique_ptr<Port>> Port::Open(boost::asio::io_context& io, Options options) {
  ASSIGN_OR_RETURN(tcp::acceptor listener, OpenListener(io, options.listen_address));
  const uint64_t file_limit = FileLimit();
  if (options.max_unauthenticated == 0) {
    options.max_unauthenticated = UnauthenticatedBound(file_limit);
  }
  if (options.max_waiting == 0) options.max_waiting = LobbyBound(file_limit);
  if (options.max_grpc_connections == 0) {
    options.max_grpc_connections = GrpcConnectionBound(file_limit);
  }
  std::unique_ptr<Port> port(new Port());
  port->state_ = std::make_shared<State>(io);
  port->state_->options = options;
  tcp::acceptor& acceptor = port->state_->acceptor;
  acceptor = std::move(listener);
  boost::system::error_code error;
  // Non-blocking once: AcceptWaiting's accepts return at once when nobody waits.
  acceptor.non_blocking(true, error);
  if (error) {
    return absl::UnavailableError("cannot listen on " + options.listen_address + ": " +
                                  error.message());
  }
  port->port_ = acceptor.local_endpoint(error).port();
  port->activity_ = std::make_shared<ConnectionActivityReader>(port->port_);
  port->state_->activity = port->activity_;
  return port;
}

void Port::Start(SessionHandler on_session, GrpcServer grpc) {
  State& state = *state_;
  state.on_session = std::move(on_session);
  state.grpc = std::move(grpc);
  state.accepting = true;
  state.slots->on_release = [weak = std::weak_ptr(state_)] {
    auto state = weak.lock();
    if (!state || state->lobby.empty() || state->admit_posted) return;
    state->admit_posted = true;  // one admission pass for the releases of one turn
    boost::asio::post(state->io, [state] {
      if (state->accepting) state->AdmitFromLobby();
    });
  };
  state.Accept();
}

void Port::StopAccepting() {
  if (state_) state_->StopAccepting();
}

Port::~Port() {
  if (!state_) return;
  state_->slots->on_release = nullptr;
  StopAccepting();
}

}  // namespace gangrun::rpc
