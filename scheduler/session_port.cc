#include "scheduler/session_port.h"

#include <atomic>
#include <boost/asio/post.hpp>
#include <list>
#include <set>

#include "common/logging.h"
#include "gangrun/v1/session.pb.h"
#include "rpc/frame_connection.h"
#include "rpc/server.h"
#include "rpc/session_auth.h"
#include "scheduler/liveness.h"

namespace gangrun::scheduler {
namespace {

using boost::asio::ip::tcp;
using std::chrono::milliseconds;

// What the port says about refused and broken connections: a flood of them is logged at
// most this often, with a count of what was not.
constexpr std::chrono::seconds kLogPeriod{1};
constexpr int kLogsPerPeriod = 10;

// Opened sessions without an event yet, in every port of this process.
std::atomic<size_t> unjoined_in_process{0};

}  // namespace

class Handshake;
class FrameWire;

struct SessionPort::PortState : std::enable_shared_from_this<SessionPort::PortState> {
  PortState(boost::asio::io_context& context, NodeSessions& node_sessions, Options o)
      : io(context), sessions(node_sessions), options(std::move(o)), drain_deadline(context) {}

  void Warn(const std::string& peer, const std::string& why);
  // Whether one more session that has not joined may open here: at a bound, the one of this
  // port that has waited longest is closed for it; false when this port has none.
  bool AdmitUnjoined();
  // rpc::TokenKey of the job's token, made at the first handshake (a job without a node of
  // another host never loads OpenSSL for it).
  const std::string& TokenKey() {
    if (token_key.empty()) token_key = rpc::TokenKey(options.token);
    return token_key;
  }
  // A quiet node's pongs come from the scheduler's sweep, one every kMessageIntervals node
  // timeouts (NodeSession::OnSweep); kMissedMessages of them missed lose the scheduler, as the
  // scheduler loses a node that sends no messages. Zero (no quiet sessions) without a node
  // timeout.
  milliseconds QuietPongTimeout() const {
    return std::chrono::duration_cast<milliseconds>(sessions.scheduler().node_timeout() *
                                                    Liveness::kMessageIntervals *
                                                    Liveness::kMissedMessages);
  }

  boost::asio::io_context& io;
  NodeSessions& sessions;
  Options options;
  std::string token_key;
  milliseconds handshake{rpc::HandshakeTimeoutMs()};
  std::set<std::shared_ptr<Handshake>> handshakes;
  std::list<FrameWire*> unjoined;  // oldest first; each wire removes itself
  boost::asio::steady_timer drain_deadline;
  std::function<void()> drained;  // set while draining
  bool closed = false;
  std::chrono::steady_clock::time_point log_period_start{};
  int logged = 0;
  uint64_t unlogged = 0;
};

void SessionPort::PortState::Warn(const std::string& peer, const std::string& why) {
  const auto now = std::chrono::steady_clock::now();
  if (now - log_period_start >= kLogPeriod) {
    if (unlogged > 0) {
      common::Logger("scheduler")
          ->warn("{} more refused or broken sessions were not logged", unlogged);
    }
    log_period_start = now;
    logged = 0;
    unlogged = 0;
  }
  if (logged++ >= kLogsPerPeriod) {
    ++unlogged;
    return;
  }
  common::Logger("scheduler")->warn("closing the session from {}: {}", peer, why);
}

// A session's connection, once its handshake succeeded: the session's Wire. Its frames are
// sealed both ways.
class FrameWire : public NodeSession::Wire {
 public:
  FrameWire(std::shared_ptr<SessionPort::PortState> port,
            std::shared_ptr<rpc::FrameConnection> conn, const rpc::FrameKeys& keys)
      : port_(std::move(port)),
        conn_(std::move(conn)),
        sealer_(keys.scheduler_to_node),
        opener_(keys.node_to_scheduler),
        linger_(port_->io) {}
  ~FrameWire() override {
    Joined();
    linger_.cancel();
    conn_->Close();
  }

  // Starts reading the session's frames; `session` must hold this wire from now on.
  // Frames are bounded by kMaxJoinPayload until the scheduler answers the node's join, then
  // by kMaxFramePayload. A session with no event yet counts as unjoined (after
  // PortState::AdmitUnjoined) until its first.
  void Start(NodeSession* session) {
    session_ = session;
    if (session->commanded())
      Answered();
    else
      conn_->set_max_payload(rpc::kMaxJoinPayload);
    if (session->last_event() == 0) {
      unjoined_ = port_->unjoined.insert(port_->unjoined.end(), this);
      counted_ = true;
      unjoined_in_process.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // Closed for a newer unjoined session (PortState::AdmitUnjoined); may destroy this.
  void Evict() {
    Fail("it opened a session and sent no join while " + std::to_string(port_->unjoined.size()) +
         " others had not joined either (the longest waiting is closed)");
  }
  void Answered() {
    if (answered_) return;
    answered_ = true;
    conn_->set_max_payload(rpc::kMaxFramePayload);
  }
  bool OnFrame(rpc::FrameType type, std::string_view payload);
  void OnEnd(const std::string& why, bool malformed) {
    if (malformed) port_->Warn(conn_->peer(), why);
    if (session_ != nullptr) session_->OnWireEnded(this, why);  // may destroy this
  }

  // `quiet_pong_timeout` non-zero: the session keeps quiet from now on, if the kernel takes
  // the watermark (the session is told either way). After Start. `events_follow`: the node's
  // first events left with its opening, unpadded, so the watermark waits for the first of
  // them to be read (it is rarely refused; a session told to keep quiet whose watermark was
  // refused is only read more often).
  void SendAccepted(const std::string& proof, uint64_t session, uint64_t acked,
                    milliseconds quiet_pong_timeout, bool events_follow = false) {
    v1::SessionAccepted accepted;
    accepted.set_proof(proof);
    accepted.set_session(session);
    accepted.set_acked(acked);
    if (quiet_pong_timeout > milliseconds::zero() && events_follow) {
      quiet_ = watermark_due_ = true;
    } else if (quiet_pong_timeout > milliseconds::zero()) {
      // Before the acceptance leaves: the node sends nothing until it has it.
      quiet_ = conn_->SetReadWatermark(rpc::kQuietWatermark);
    }
    if (quiet_) {
      accepted.set_quiet_watermark(rpc::kQuietWatermark);
      accepted.set_quiet_pong_timeout_ms(static_cast<uint32_t>(quiet_pong_timeout.count()));
    }
    session_->KeepQuiet(quiet_ ? quiet_pong_timeout : milliseconds::zero());
    Seal(rpc::FrameType::kAccepted, accepted);
  }
  void SendCommand(const v1::NodeCommand& command) override {
    Answered();
    Seal(rpc::FrameType::kCommand, command);
  }
  bool SendPong(uint64_t acked) override {
    if (conn_->queued_bytes() > 0) return false;  // the node is behind: a later pong acks as much
    v1::SessionAck ack;
    ack.set_acked(acked);
    Seal(rpc::FrameType::kPong, ack);
    return true;
  }
  // A node that does not close its end within the handshake timeout is closed on.
  void CloseAfterWrites() override {
    conn_->CloseAfterWrites();
    linger_.expires_after(port_->handshake);
    linger_.async_wait([this](const boost::system::error_code& error) {
      if (error || conn_->closed()) return;
      conn_->Close();
      if (session_ != nullptr) session_->OnWireEnded(this, "the node did not close its end");
    });
  }
  void Drop() override { conn_->Close(); }
  std::string PeerEndpoint() const override { return conn_->peer(); }
  std::optional<common::Duration> SinceLastData() const override { return conn_->SinceLastData(); }

 private:
  void Seal(rpc::FrameType type, const google::protobuf::MessageLite& message) {
    conn_->Send(type, sealer_.Seal(type, message.SerializeAsString()));
  }
  // Leaves the unjoined sessions (its first event was read, or it ends).
  void Joined() {
    if (!counted_) return;
    counted_ = false;
    port_->unjoined.erase(unjoined_);
    unjoined_in_process.fetch_sub(1, std::memory_order_relaxed);
  }
  // Ends the connection on a frame that cannot be trusted or understood.
  bool Fail(const std::string& why) {
    port_->Warn(conn_->peer(), why);
    conn_->Close();
    if (session_ != nullptr) session_->OnWireEnded(this, why);  // may destroy this
    return false;
  }

  std::shared_ptr<SessionPort::PortState> port_;
  std::shared_ptr<rpc::FrameConnection> conn_;
  rpc::FrameSealer sealer_;
  rpc::FrameOpener opener_;
  boost::asio::steady_timer linger_;
  NodeSession* session_ = nullptr;
  bool quiet_ = false;
  bool watermark_due_ = false;  // quiet once the first event that came with the opening is read
  bool answered_ = false;       // the scheduler sent a command: frames up to kMaxFramePayload
  std::list<FrameWire*>::iterator unjoined_;  // in port_->unjoined while counted_
  bool counted_ = false;                      // unjoined: no event read yet
};

bool SessionPort::PortState::AdmitUnjoined() {
  if (unjoined.size() < options.max_unjoined &&
      unjoined_in_process.load(std::memory_order_relaxed) < kMaxUnjoinedInProcess) {
    return true;
  }
  if (unjoined.empty()) return false;
  unjoined.front()->Evict();
  return true;
}

bool FrameWire::OnFrame(rpc::FrameType type, std::string_view payload) {
  if (type == rpc::FrameType::kTick) {
    // Read only with what woke the connection: the kernel's "last data received" counted it.
    if (!quiet_ || !payload.empty()) return Fail("an unexpected tick");
    opener_.Skip();
    return true;
  }
  std::string_view body;
  if (!opener_.Open(type, payload, &body)) return Fail("a forged or corrupted frame");
  switch (type) {
    case rpc::FrameType::kEvent: {
      v1::NodeEvent event;
      if (!event.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
        return Fail("a malformed event");
      }
      if (watermark_due_) {
        watermark_due_ = false;
        conn_->SetReadWatermark(rpc::kQuietWatermark);
      }
      if (port_->closed) return true;
      Joined();
      if (!session_->OnEvent(this, event)) return Fail("an event out of order");
      return !conn_->closed();
    }
    case rpc::FrameType::kPing: {
      v1::SessionAck ack;
      if (!ack.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
        return Fail("a malformed ping");
      }
      session_->OnPing(this, ack.acked(), ack.sparse_pongs());
      return !conn_->closed();
    }
    default:
      return Fail("an unexpected frame (type " + std::to_string(static_cast<int>(type)) + ")");
  }
}

// One connection's handshake: hello, challenge, open, accepted (or refused).
class Handshake : public std::enable_shared_from_this<Handshake> {
 public:
  Handshake(std::shared_ptr<SessionPort::PortState> port, tcp::socket socket,
            std::shared_ptr<rpc::PreAuthSlot> slot)
      : port_(std::move(port)),
        conn_(std::make_shared<rpc::FrameConnection>(std::move(socket))),
        slot_(std::move(slot)),
        deadline_(port_->io) {}

  void Start(const std::string& magic);
  void Shut() {
    deadline_.cancel();
    conn_->Close();
  }

 private:
  bool OnFrame(rpc::FrameType type, std::string_view payload);
  bool OnHello(std::string_view payload);
  bool OnOpen(std::string_view payload);
  // Refuses with `refused` (sent as kRefused, then the connection closes); false.
  bool Refuse(v1::SessionRefused refused, bool log = true);
  bool Fail(const std::string& why);
  void Done() {
    deadline_.cancel();
    port_->handshakes.erase(shared_from_this());
  }

  std::shared_ptr<SessionPort::PortState> port_;
  std::shared_ptr<rpc::FrameConnection> conn_;
  std::shared_ptr<rpc::PreAuthSlot> slot_;
  boost::asio::steady_timer deadline_;
  rpc::Handshake handshake_;
  bool challenged_ = false;
  bool refused_ = false;
};

void Handshake::Start(const std::string& magic) {
  auto self = shared_from_this();
  port_->handshakes.insert(self);
  slot_->OnEvict([weak = weak_from_this()] {
    if (auto self = weak.lock()) {
      self->conn_->Close();
      self->Done();
    }
  });
  deadline_.expires_after(port_->handshake);
  deadline_.async_wait([weak = weak_from_this()](const boost::system::error_code& error) {
    auto self = weak.lock();
    if (error || !self) return;
    self->conn_->Close();
    self->Done();
  });
  conn_->Start(
      [this](rpc::FrameType type, std::string_view payload) { return OnFrame(type, payload); },
      [this](const std::string& why, bool malformed) {
        if (malformed) port_->Warn(conn_->peer(), why);
        // A launcher without a token leaves at the challenge of a job that has one (one with
        // a token proves it first, and a wrong one is refused in OnOpen).
        if (challenged_ && !refused_ && !port_->options.token.empty()) {
          port_->sessions.scheduler().NoteRefused(
              conn_->peer(),
              "it left at the token's challenge (it has no token, or not the job's)");
        }
        Done();
      });
  v1::SessionRefused refused;
  if (magic != rpc::kSessionMagic) {
    refused.set_reason("the scheduler speaks gangrun's session protocol " +
                       std::string(rpc::kSessionMagic) + " and this launcher " + magic +
                       ": run the same gangrun version on every host");
    // Version 1 launchers read a refusal as frame type 3.
    refused_ = true;
    conn_->Send(static_cast<rpc::FrameType>(3), refused.SerializeAsString());
    conn_->CloseAfterWrites();
    return;
  }
  if (port_->options.tls) {
    refused.set_reason(
        "the scheduler at this port uses TLS, but this launcher does not (give it "
        "the job's --tls_ca/--tls_cert/--tls_key)");
    port_->sessions.scheduler().NoteRefused(conn_->peer(), "it does not use the job's TLS");
    Refuse(refused, false);
  }
}

bool Handshake::OnFrame(rpc::FrameType type, std::string_view payload) {
  if (refused_) return true;  // the node reads the refusal and closes
  if (!challenged_) {
    if (type != rpc::FrameType::kHello) return Fail("no session opening");
    return OnHello(payload);
  }
  if (type != rpc::FrameType::kOpen) return Fail("no answer to the challenge");
  return OnOpen(payload);
}

bool Handshake::OnHello(std::string_view payload) {
  v1::SessionHello hello;
  if (!hello.ParseFromArray(payload.data(), static_cast<int>(payload.size())) ||
      hello.nonce().size() != rpc::kNonceBytes) {
    return Fail("a malformed opening");
  }
  if (hello.has_token() && port_->options.token.empty()) {
    v1::SessionRefused refused;
    refused.set_reason(
        "the scheduler's job has no token, but this launcher has one (a token "
        "mismatch: give both the same --token_file, or neither)");
    refused.set_unauthenticated(true);
    port_->sessions.scheduler().NoteRefused(conn_->peer(), "it has a token, the job has none");
    return Refuse(refused);
  }
  challenged_ = true;
  handshake_.node_nonce = hello.nonce();
  handshake_.scheduler_nonce = rpc::RandomBytes(rpc::kNonceBytes);
  handshake_.run_id = port_->options.run_id;
  handshake_.resume = hello.resume();
  v1::SessionChallenge challenge;
  challenge.set_nonce(handshake_.scheduler_nonce);
  challenge.set_run_id(handshake_.run_id);
  challenge.set_token_required(!port_->options.token.empty());
  conn_->Send(rpc::FrameType::kChallenge, challenge.SerializeAsString());
  return true;
}

bool Handshake::OnOpen(std::string_view payload) {
  v1::SessionOpen open;
  if (!open.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return Fail("a malformed answer to the challenge");
  }
  v1::SessionRefused refused;
  NodeSession* resumed = nullptr;
  if (handshake_.resume != 0) {
    resumed = port_->sessions.Find(handshake_.resume);
    if (resumed == nullptr) {
      refused.set_reason("no such session here (the scheduler lost that node, or restarted)");
      refused.set_unknown_session(true);
      return Refuse(refused);
    }
  }
  const std::string& key = resumed != nullptr ? resumed->key() : port_->TokenKey();
  if (!rpc::MacsEqual(open.proof(), rpc::NodeProof(key, handshake_))) {
    refused.set_reason("the scheduler refused this launcher's token (wrong or missing)");
    refused.set_unauthenticated(true);
    if (resumed == nullptr) {
      port_->sessions.scheduler().NoteRefused(conn_->peer(), "its token is not the job's");
    }
    return Refuse(refused);
  }
  if (port_->closed) return Fail("the scheduler is closing");
  // A resume moves its session to this connection (its old one leaves the count), so only a
  // new session can add one; evicting for a resume could end the very session being resumed.
  if (resumed == nullptr && !port_->AdmitUnjoined()) {
    return Fail("opened while " + std::to_string(SessionPort::kMaxUnjoinedInProcess) +
                " sessions of this process's jobs had not joined");
  }
  // Proven: the connection leaves the pre-authentication budget and becomes a session's, and
  // the scheduler proves itself in turn (with the token's key, for a resume too).
  slot_->Release();
  const std::string proof = rpc::SchedulerProof(port_->TokenKey(), handshake_);
  auto self = shared_from_this();
  Done();
  auto wire = std::make_unique<FrameWire>(port_, conn_, rpc::DeriveFrameKeys(key, handshake_));
  FrameWire* raw = wire.get();
  conn_->SetHandlers(
      [raw](rpc::FrameType type, std::string_view payload) { return raw->OnFrame(type, payload); },
      [raw](const std::string& why, bool malformed) { raw->OnEnd(why, malformed); });
  if (resumed != nullptr) {
    // Accepted first: the session then sends again what the node has not acknowledged.
    raw->Start(resumed);
    raw->SendAccepted(proof, resumed->id(), resumed->last_event(),
                      open.can_keep_quiet() ? resumed->quiet_pong_timeout() : milliseconds::zero());
    resumed->Attach(std::move(wire), open.acked());
  } else {
    const bool quiet =
        open.can_keep_quiet() && port_->sessions.size() >= port_->options.loud_sessions;
    NodeSession* session =
        port_->sessions.Create(rpc::ResumeKey(port_->TokenKey(), handshake_), std::move(wire));
    raw->Start(session);
    raw->SendAccepted(proof, session->id(), 0,
                      quiet ? port_->QuietPongTimeout() : milliseconds::zero(),
                      open.events_follow());
  }
  return !conn_->closed();
}

bool Handshake::Refuse(v1::SessionRefused refused, bool log) {
  if (log) port_->Warn(conn_->peer(), refused.reason());
  refused_ = true;
  conn_->Send(rpc::FrameType::kRefused, refused.SerializeAsString());
  conn_->CloseAfterWrites();
  return true;  // reading goes on until the node closes (or the deadline)
}

bool Handshake::Fail(const std::string& why) {
  port_->Warn(conn_->peer(), why);
  conn_->Close();
  Done();
  return false;
}

SessionPort::SessionPort(boost::asio::io_context& io, NodeSessions& sessions, Options options)
    : state_(std::make_shared<PortState>(io, sessions, std::move(options))) {}

SessionPort::~SessionPort() { Close(); }

rpc::Port::SessionHandler SessionPort::Handler() {
  return [state = state_](tcp::socket socket, std::string magic,
                          std::shared_ptr<rpc::PreAuthSlot> slot) {
    if (state->closed || state->drained) return;
    auto handshake = std::make_shared<Handshake>(state, std::move(socket), std::move(slot));
    handshake->Start(magic);
  };
}

void SessionPort::Drain(std::chrono::milliseconds within, std::function<void()> done) {
  PortState& state = *state_;
  if (state.closed || state.drained) {
    boost::asio::post(state.io, std::move(done));
    return;
  }
  state.drained = std::move(done);
  for (const auto& handshake : std::set(state.handshakes)) handshake->Shut();
  state.handshakes.clear();
  auto finish = [weak = std::weak_ptr(state_)] {
    auto state = weak.lock();
    if (!state || !state->drained) return;
    auto done = std::move(state->drained);
    state->drained = nullptr;
    state->drain_deadline.cancel();
    done();
  };
  state.drain_deadline.expires_after(within);
  state.drain_deadline.async_wait([finish](const boost::system::error_code& error) {
    if (!error) finish();
  });
  if (state.sessions.size() == 0) {
    boost::asio::post(state.io, finish);
  } else {
    state.sessions.OnEmpty([&io = state.io, finish] { boost::asio::post(io, finish); });
  }
}

void SessionPort::Close() {
  PortState& state = *state_;
  if (state.closed) return;
  state.closed = true;
  state.drain_deadline.cancel();
  for (const auto& handshake : std::set(state.handshakes)) handshake->Shut();
  state.handshakes.clear();
  state.sessions.DropAll();
}

}  // namespace gangrun::scheduler
