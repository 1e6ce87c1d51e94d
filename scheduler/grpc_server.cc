#include "scheduler/grpc_server.h"

#include <boost/asio/post.hpp>
#include <csignal>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "common/logging.h"
#include "common/secret.h"
#include "gangrun/v1/kv.grpc.pb.h"
#include "gangrun/v1/session.grpc.pb.h"
#include "rpc/server_stream.h"
#include "rpc/session_auth.h"
#include "scheduler/logs_stream.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::milliseconds;

using rpc::MethodPath;
using rpc::ToGrpcStatus;

using SessionStream = rpc::ServerStream<v1::NodeEvent, v1::NodeCommand>;

// One node stream, as the strand sees it: which session it carries once it has started, and
// whether its wire is still the session's (a wire dies with its session or when the session
// moves to another stream).
struct StreamState {
  std::shared_ptr<SessionStream::Handle> handle = std::make_shared<SessionStream::Handle>();
  std::string peer;  // rpc::PeerEndpoint of the call's peer
  uint64_t session = 0;
  const NodeSession::Wire* wire = nullptr;  // null until started, and once the wire is gone
  bool started = false;
};

// A session's stream: the session's Wire.
class GrpcWire : public NodeSession::Wire {
 public:
  explicit GrpcWire(std::shared_ptr<StreamState> state) : state_(std::move(state)) {
    state_->wire = this;
  }
  ~GrpcWire() override { state_->wire = nullptr; }
  void SendCommand(const v1::NodeCommand& command) override { state_->handle->Send(command); }
  bool SendPong(uint64_t acked) override {
    v1::NodeCommand pong;
    pong.mutable_pong()->set_acked(acked);
    return state_->handle->TrySend(pong, 0);  // skipped while earlier writes wait
  }
  void CloseAfterWrites() override { state_->handle->Close(); }
  void Drop() override { state_->handle->Close(); }
  std::string PeerEndpoint() const override { return state_->peer; }

 private:
  std::shared_ptr<StreamState> state_;
};

// The first event of a stream: a new session, or the resume of one.
void StartSession(NodeSessions& sessions, const std::shared_ptr<StreamState>& state,
                  const v1::NodeEvent& event) {
  state->started = true;
  v1::NodeCommand answer;
  if (!event.has_start()) {
    answer.mutable_refused()->set_reason("no session start");
    state->handle->Send(answer);
    state->handle->Close();
    return;
  }
  const v1::SessionStart& start = event.start();
  if (start.session() == 0) {
    const std::string key = rpc::RandomBytes(32);
    NodeSession* session = sessions.Create(key, std::make_unique<GrpcWire>(state));
    state->session = session->id();
    answer.mutable_opened()->set_session(session->id());
    answer.mutable_opened()->set_key(key);
    state->handle->Send(answer);
    return;
  }
  NodeSession* session = sessions.Find(start.session());
  if (session == nullptr || !rpc::MacsEqual(start.key(), session->key())) {
    answer.mutable_refused()->set_reason(
        "no such session here (the scheduler lost that node, or restarted)");
    answer.mutable_refused()->set_unknown_session(true);
    state->handle->Send(answer);
    state->handle->Close();
    return;
  }
  state->session = session->id();
  answer.mutable_opened()->set_session(session->id());
  answer.mutable_opened()->set_acked(session->last_event());
  state->handle->Send(answer);  // before the commands the session sends again
  session->Attach(std::make_unique<GrpcWire>(state), start.acked());
}

void OnStreamEvent(NodeSessions& sessions, const std::shared_ptr<StreamState>& state,
                   const v1::NodeEvent& event) {
  if (!state->started) return StartSession(sessions, state, event);
  if (state->wire == nullptr) return;
  NodeSession* session = sessions.Lookup(state->session);
  if (session == nullptr) return;
  if (event.has_ping()) return session->OnPing(state->wire, event.ping().acked());
  if (!session->OnEvent(state->wire, event)) {
    common::Logger("scheduler")
        ->warn("closing the session from {}: an event out of order", state->peer);
    state->handle->Close();
    session->OnWireEnded(state->wire, "an event out of order");
  }
}

SessionStream* OpenSession(boost::asio::io_context& io, NodeSessions& sessions,
                           const grpc::CallbackServerContext& context,
                           const absl::Status& authorized) {
  auto state = std::make_shared<StreamState>();
  state->peer = rpc::PeerEndpoint(context.peer());
  SessionStream::Handlers handlers;
  handlers.on_read = [&io, &sessions, state](const v1::NodeEvent& event) {
    boost::asio::post(io, [&sessions, state, event] { OnStreamEvent(sessions, state, event); });
  };
  handlers.on_end = [&io, &sessions, state] {
    boost::asio::post(io, [&sessions, state] {
      if (state->wire == nullptr) return;
      if (NodeSession* session = sessions.Lookup(state->session)) {
        session->OnWireEnded(state->wire, "its stream ended");
      }
    });
  };
  return new SessionStream(state->handle, authorized, std::move(handlers));
}

common::Duration WaitFromMs(int64_t wait_ms) {
  if (wait_ms < 0) return common::Duration(-1);
  // Anything beyond a year is "as long as the call lives" (and cannot overflow a duration).
  return milliseconds(std::min<int64_t>(wait_ms, int64_t{365} * 24 * 3600 * 1000));
}

// A KeyValue call that may wait (Get with wait_ms, Barrier). If its caller goes away (it
// cancels, its deadline passes, its connection breaks), the store forgets the wait at once
// instead of holding it until a timer or a put.
//
// gRPC calls OnCancel on its own thread; everything else runs on the io_context. The reactor
// lives until OnDone, which gRPC calls only after Finish; `state` tells a late cancellation
// (posted before, run after the store answered) that the call is already finished.
class WaitingCall : public grpc::ServerUnaryReactor {
 public:
  WaitingCall(boost::asio::io_context& io, KvStore& store) : io_(io), store_(store) {}

  // Runs `start(done)` on the io_context; `start` returns the store's wait id.
  template <typename Start>
  void Begin(Start start) {
    boost::asio::post(io_, [this, state = state_, start = std::move(start)]() mutable {
      state->id = start([this, state](const grpc::Status& status) {
        state->finished = true;
        Finish(status);
      });
    });
  }

  void OnCancel() override {
    boost::asio::post(io_, [this, state = state_, &store = store_] {
      if (state->finished) return;
      store.CancelWait(state->id);
      state->finished = true;
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
    });
  }
  void OnDone() override { delete this; }

 private:
  struct WaitCall {
    KvStore::WaitId id = 0;
    bool finished = false;  // on the io_context only
  };
  boost::asio::io_context& io_;
  KvStore& store_;
  std::shared_ptr<WaitCall> state_ = std::make_shared<WaitCall>();
};

}  // namespace

class SchedulerServer::Services : public v1::Scheduler::CallbackService,
                                  public v1::KeyValue::CallbackService {
 public:
  Services(boost::asio::io_context& io, Scheduler& scheduler, KvStore& store,
           NodeSessions& sessions, std::string token)
      : io_(io),
        scheduler_(scheduler),
        store_(store),
        sessions_(sessions),
        auth_(std::move(token)) {}
  // CallAuth.Challenge, whose challenges these services' calls are bound to.
  grpc::Service* challenges() { return auth_.service(); }

  grpc::ServerBidiReactor<v1::NodeEvent, v1::NodeCommand>* Session(
      grpc::CallbackServerContext* context) override {
    return OpenSession(io_, sessions_, *context,
                       auth_.Check(*context, MethodPath<v1::Scheduler>("Session"), nullptr));
  }

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::GetStatusRequest* request,
                                      v1::GetStatusResponse* response) override {
    return Serve<v1::Scheduler>(context, "GetStatus", *request,
                                [this, response](grpc::ServerUnaryReactor* reactor) {
                                  *response = scheduler_.Status();
                                  reactor->Finish(grpc::Status::OK);
                                });
  }

  grpc::ServerUnaryReactor* Scale(grpc::CallbackServerContext* context,
                                  const v1::ScaleRequest* request, v1::ScaleResponse*) override {
    return Serve<v1::Scheduler>(
        context, "Scale", *request, [this, request](grpc::ServerUnaryReactor* reactor) {
          reactor->Finish(ToGrpcStatus(scheduler_.Scale(request->worker_num())));
        });
  }

  grpc::ServerUnaryReactor* Stop(grpc::CallbackServerContext* context,
                                 const v1::StopJobRequest* request,
                                 v1::StopJobResponse* response) override {
    return Serve<v1::Scheduler>(
        context, "Stop", *request, [this, request, response](grpc::ServerUnaryReactor* reactor) {
          response->set_stopped(scheduler_.finished() ? 0 : 1);
          scheduler_.Stop(StopSignal(request->signal()),
                          request->reason().empty() ? "stopped by gangrun stop"
                                                    : Sanitize(request->reason(), kMaxReasonBytes));
          reactor->Finish(grpc::Status::OK);
        });
  }

  grpc::ServerUnaryReactor* Stacks(grpc::CallbackServerContext* context,
                                   const v1::StacksRequest* request,
                                   v1::StacksResponse* response) override {
    return Serve<v1::Scheduler>(
        context, "Stacks", *request, [this, request, response](grpc::ServerUnaryReactor* reactor) {
          scheduler_.RequestStacks(*request, [reactor, response](auto answer) {
            if (answer.ok()) *response = std::move(*answer);
            reactor->Finish(ToGrpcStatus(answer.status()));
          });
        });
  }

  grpc::ServerWriteReactor<v1::LogChunk>* Logs(grpc::CallbackServerContext* context,
                                               const v1::LogsRequest* request) override {
    return StartLogsStream(io_, auth_.Check(*context, MethodPath<v1::Scheduler>("Logs"), request),
                           *request,
                           [this]() -> absl::StatusOr<LogsSource*> { return &scheduler_; });
  }

  grpc::ServerUnaryReactor* Put(grpc::CallbackServerContext* context, const v1::PutRequest* request,
                                v1::PutResponse*) override {
    return Serve<v1::KeyValue>(
        context, "Put", *request, [this, request](grpc::ServerUnaryReactor* reactor) {
          reactor->Finish(ToGrpcStatus(store_.Put(request->key(), request->value())));
        });
  }

  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context, const v1::GetRequest* request,
                                v1::GetResponse* response) override {
    if (auto refused = Refused<v1::KeyValue>(context, "Get", *request)) return refused;
    auto* call = new WaitingCall(io_, store_);
    call->Begin([this, request, response](auto finish) {
      return store_.Get(request->key(), WaitFromMs(request->wait_ms()),
                        [response, finish](absl::StatusOr<std::string> value) {
                          if (value.ok()) response->set_value(*value);
                          finish(ToGrpcStatus(value.status()));
                        });
    });
    return call;
  }

  grpc::ServerUnaryReactor* Add(grpc::CallbackServerContext* context, const v1::AddRequest* request,
                                v1::AddResponse* response) override {
    return Serve<v1::KeyValue>(context, "Add", *request,
                               [this, request, response](grpc::ServerUnaryReactor* reactor) {
                                 auto value = store_.Add(request->key(), request->delta());
                                 if (value.ok()) response->set_value(*value);
                                 reactor->Finish(ToGrpcStatus(value.status()));
                               });
  }

  grpc::ServerUnaryReactor* Delete(grpc::CallbackServerContext* context,
                                   const v1::DeleteRequest* request,
                                   v1::DeleteResponse* response) override {
    return Serve<v1::KeyValue>(context, "Delete", *request,
                               [this, request, response](grpc::ServerUnaryReactor* reactor) {
                                 response->set_existed(store_.Delete(request->key()));
                                 reactor->Finish(grpc::Status::OK);
                               });
  }

  grpc::ServerUnaryReactor* Barrier(grpc::CallbackServerContext* context,
                                    const v1::BarrierRequest* request,
                                    v1::BarrierResponse*) override {
    if (auto refused = Refused<v1::KeyValue>(context, "Barrier", *request)) return refused;
    auto* call = new WaitingCall(io_, store_);
    call->Begin([this, request](auto finish) {
      return store_.Barrier(request->name(), request->count(), WaitFromMs(request->wait_ms()),
                            [finish](absl::Status status) { finish(ToGrpcStatus(status)); });
    });
    return call;
  }

 private:
  template <typename Service, typename Work>
  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* context, std::string_view method,
                                  const google::protobuf::Message& request, Work work) {
    return rpc::ServeOnStrand(io_, context, auth_, MethodPath<Service>(method), request,
                              std::move(work));
  }
  // A refused call's reactor (finished), or null for a call that may go on.
  template <typename Service>
  grpc::ServerUnaryReactor* Refused(grpc::CallbackServerContext* context, std::string_view method,
                                    const google::protobuf::Message& request) {
    absl::Status allowed = auth_.Check(*context, MethodPath<Service>(method), &request);
    if (allowed.ok()) return nullptr;
    auto* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(allowed));
    return reactor;
  }

  boost::asio::io_context& io_;
  Scheduler& scheduler_;
  KvStore& store_;
  NodeSessions& sessions_;
  rpc::CallAuthenticator auth_;
};

absl::StatusOr<std::unique_ptr<SchedulerServer>> SchedulerServer::Start(
    boost::asio::io_context& io, Scheduler& scheduler, KvStore& store,
    const ServerOptions& options) {
  std::unique_ptr<SchedulerServer> server(new SchedulerServer());
  const bool tls = options.credentials != nullptr;
  auto port = rpc::Port::Open(io, {options.listen_address, tls, 0, 0});
  if (!port.ok()) return absl::AlreadyExistsError(std::string(port.status().message()));
  server->port_ = std::move(*port);
  server->port_number_ = server->port_->port();
  server->sessions_ = std::make_unique<NodeSessions>(io, scheduler);
  server->services_ =
      std::make_unique<Services>(io, scheduler, store, *server->sessions_, options.token);
  // A plaintext job's gRPC server (status, stop, scale, the key-value store) starts on its
  // first connection: a job nobody asks anything never pays for gRPC's threads (issue #24).
  // A TLS job's starts now, so that unusable credentials fail the launch, not a node's join.
  server->credentials_ = options.credentials;
  if (tls && server->Grpc() == nullptr) return server->grpc_error_;
  server->session_port_ = std::make_unique<SessionPort>(
      io, *server->sessions_,
      SessionPort::Options{options.token, options.run_id, tls, options.loud_sessions,
                           options.max_unjoined});
  server->port_->Start(server->session_port_->Handler(),
                       [raw = server.get()] { return raw->Grpc(); });
  // The nodes' pings are their heartbeats (scheduler/liveness.h). Posted, so that it runs on
  // the scheduler's strand; a scheduler whose server is gone by then is not touched.
  boost::asio::post(io, [&scheduler, weak = std::weak_ptr(server->port_->activity())] {
    if (weak.expired()) return;
    scheduler.WatchConnections([weak]() -> absl::StatusOr<rpc::ConnectionActivity> {
      auto reader = weak.lock();
      if (!reader) return absl::UnavailableError("the scheduler's server has stopped");
      return reader->Read();
    });
  });
  return server;
}

rpc::Server* SchedulerServer::Grpc() {
  if (server_ || !grpc_error_.ok()) return server_.get();
  const std::vector<grpc::Service*> services = {
      static_cast<v1::Scheduler::CallbackService*>(services_.get()),
      static_cast<v1::KeyValue::CallbackService*>(services_.get()), services_->challenges()};
  auto started = rpc::Server::Start("", credentials_, services);
  if (!started.ok()) {
    grpc_error_ = started.status();
    common::Logger("scheduler")
        ->error("cannot start the scheduler's gRPC server: {}", std::string(grpc_error_.message()));
    return nullptr;
  }
  server_ = std::move(*started);
  return server_.get();
}

void SchedulerServer::ShutdownAsync(boost::asio::io_context& io, std::function<void()> done) {
  port_->StopAccepting();
  // The sessions first: their nodes get the job's end, as gRPC's Shutdown lets calls finish.
  session_port_->Drain(std::chrono::seconds(1), [this, &io, done = std::move(done)]() mutable {
    if (!server_) return boost::asio::post(io, std::move(done));
    server_->ShutdownAsync(io, std::move(done));
  });
}

SchedulerServer::~SchedulerServer() {
  if (session_port_) session_port_->Close();
  if (port_) port_->StopAccepting();
  server_.reset();
}

}  // namespace gangrun::scheduler
