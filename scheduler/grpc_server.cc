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

namespace gangrun::scheduler {
namespace {

using std::chrono::milliseconds;

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

using SessionStream = rpc::ServerStream<v1::NodeEvent, v1::NodeCommand>;

// What the scheduler holds for one node stream. It outlives the stream: the stream may be
// gone (the node disconnected) while the scheduler has not yet heard of it.
class StreamLink : public NodeLink {
 public:
  void Send(const v1::NodeCommand& command) override { handle->Send(command); }
  void Close() override { handle->Close(); }
  common::TimePoint LastHeartbeat() const override {
    return common::TimePoint(common::Duration(last_heartbeat.load(std::memory_order_relaxed)));
  }
  std::string PeerEndpoint() const override { return peer; }
  std::shared_ptr<SessionStream::Handle> handle = std::make_shared<SessionStream::Handle>();
  std::atomic<common::Duration::rep> last_heartbeat{
      common::TimePoint::min().time_since_epoch().count()};
  int node_id = 0;   // set on the io_context
  std::string peer;  // rpc::PeerEndpoint of the call's peer; set before the stream starts
};

SessionStream* OpenSession(boost::asio::io_context& io, Scheduler& scheduler,
                           const grpc::CallbackServerContext& context, bool authorized) {
  auto link = std::make_shared<StreamLink>();
  link->peer = rpc::PeerEndpoint(context.peer());
  SessionStream::Handlers handlers;
  handlers.on_read = [&io, &scheduler, link](const v1::NodeEvent& event) {
    if (event.has_heartbeat()) {
      // Counted here, not posted: a heartbeat costs no trip to the scheduler's strand.
      link->last_heartbeat.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                                 std::memory_order_relaxed);
      return;
    }
    boost::asio::post(io,
                      [link, &scheduler, event] { scheduler.OnNodeEvent(link->node_id, event); });
  };
  handlers.on_end = [&io, &scheduler, link] {
    boost::asio::post(io, [link, &scheduler] { scheduler.OnNodeDisconnected(link->node_id); });
  };
  if (authorized) {
    // Posted before the first read can post an event, so the node has its id by then.
    boost::asio::post(io, [link, &scheduler] { link->node_id = scheduler.AddNode(link.get()); });
  }
  return new SessionStream(link->handle, authorized, std::move(handlers));
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
  struct State {
    KvStore::WaitId id = 0;
    bool finished = false;  // on the io_context only
  };
  boost::asio::io_context& io_;
  KvStore& store_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace

class SchedulerServer::Services : public v1::Scheduler::CallbackService,
                                  public v1::KeyValue::CallbackService {
 public:
  Services(boost::asio::io_context& io, Scheduler& scheduler, KvStore& store, std::string token)
      : io_(io), scheduler_(scheduler), store_(store), token_(std::move(token)) {}

  grpc::ServerBidiReactor<v1::NodeEvent, v1::NodeCommand>* Session(
      grpc::CallbackServerContext* context) override {
    return OpenSession(io_, scheduler_, *context, rpc::Authorized(*context, token_));
  }

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::GetStatusRequest*,
                                      v1::GetStatusResponse* response) override {
    return Serve(context, [this, response](grpc::ServerUnaryReactor* reactor) {
      *response = scheduler_.Status();
      reactor->Finish(grpc::Status::OK);
    });
  }

  grpc::ServerUnaryReactor* Scale(grpc::CallbackServerContext* context,
                                  const v1::ScaleRequest* request, v1::ScaleResponse*) override {
    return Serve(context, [this, request](grpc::ServerUnaryReactor* reactor) {
      reactor->Finish(ToGrpc(scheduler_.Scale(request->worker_num())));
    });
  }

  grpc::ServerUnaryReactor* Stop(grpc::CallbackServerContext* context,
                                 const v1::StopJobRequest* request,
                                 v1::StopJobResponse* response) override {
    return Serve(context, [this, request, response](grpc::ServerUnaryReactor* reactor) {
      response->set_stopped(scheduler_.finished() ? 0 : 1);
      scheduler_.Stop(StopSignal(request->signal()),
                      request->reason().empty() ? "stopped by gangrun stop"
                                                : Sanitize(request->reason(), kMaxReasonBytes));
      reactor->Finish(grpc::Status::OK);
    });
  }

  grpc::ServerUnaryReactor* Put(grpc::CallbackServerContext* context, const v1::PutRequest* request,
                                v1::PutResponse*) override {
    return Serve(context, [this, request](grpc::ServerUnaryReactor* reactor) {
      reactor->Finish(ToGrpc(store_.Put(request->key(), request->value())));
    });
  }

  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context, const v1::GetRequest* request,
                                v1::GetResponse* response) override {
    if (!rpc::Authorized(*context, token_)) return Refuse(context);
    auto* call = new WaitingCall(io_, store_);
    call->Begin([this, request, response](auto finish) {
      return store_.Get(request->key(), WaitFromMs(request->wait_ms()),
                        [response, finish](absl::StatusOr<std::string> value) {
                          if (value.ok()) response->set_value(*value);
                          finish(ToGrpc(value.status()));
                        });
    });
    return call;
  }

  grpc::ServerUnaryReactor* Add(grpc::CallbackServerContext* context, const v1::AddRequest* request,
                                v1::AddResponse* response) override {
    return Serve(context, [this, request, response](grpc::ServerUnaryReactor* reactor) {
      auto value = store_.Add(request->key(), request->delta());
      if (value.ok()) response->set_value(*value);
      reactor->Finish(ToGrpc(value.status()));
    });
  }

  grpc::ServerUnaryReactor* Delete(grpc::CallbackServerContext* context,
                                   const v1::DeleteRequest* request,
                                   v1::DeleteResponse* response) override {
    return Serve(context, [this, request, response](grpc::ServerUnaryReactor* reactor) {
      response->set_existed(store_.Delete(request->key()));
      reactor->Finish(grpc::Status::OK);
    });
  }

  grpc::ServerUnaryReactor* Barrier(grpc::CallbackServerContext* context,
                                    const v1::BarrierRequest* request,
                                    v1::BarrierResponse*) override {
    if (!rpc::Authorized(*context, token_)) return Refuse(context);
    auto* call = new WaitingCall(io_, store_);
    call->Begin([this, request](auto finish) {
      return store_.Barrier(request->name(), request->count(), WaitFromMs(request->wait_ms()),
                            [finish](absl::Status status) { finish(ToGrpc(status)); });
    });
    return call;
  }

 private:
  template <typename Work>
  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* context, Work work) {
    return rpc::ServeOnStrand(io_, context, token_, std::move(work));
  }
  static grpc::ServerUnaryReactor* Refuse(grpc::CallbackServerContext* context) {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong or missing token"));
    return reactor;
  }

  boost::asio::io_context& io_;
  Scheduler& scheduler_;
  KvStore& store_;
  std::string token_;
};

absl::StatusOr<std::unique_ptr<SchedulerServer>> SchedulerServer::Start(
    boost::asio::io_context& io, Scheduler& scheduler, KvStore& store,
    const ServerOptions& options) {
  std::unique_ptr<SchedulerServer> server(new SchedulerServer());
  server->services_ = std::make_unique<Services>(io, scheduler, store, options.token);
  const std::vector<grpc::Service*> services = {
      static_cast<v1::Scheduler::CallbackService*>(server->services_.get()),
      static_cast<v1::KeyValue::CallbackService*>(server->services_.get())};
  if (options.credentials == nullptr) {
    // Plaintext: node sessions on gangrun's own framing, everything else handed to gRPC.
    auto port = SessionPort::Open(io, options.listen_address);
    if (!port.ok()) return absl::AlreadyExistsError(std::string(port.status().message()));
    auto started = rpc::Server::Start("", nullptr, services);
    if (!started.ok()) return started.status();
    server->server_ = std::move(*started);
    server->sessions_ = std::move(*port);
    server->sessions_->Start(scheduler, options.token, server->server_.get());
    server->port_ = server->sessions_->port();
  } else {
    auto started = rpc::Server::Start(options.listen_address, options.credentials, services);
    if (!started.ok()) return absl::AlreadyExistsError(std::string(started.status().message()));
    server->server_ = std::move(*started);
    server->port_ = server->server_->port();
  }
  // The nodes' pings are their heartbeats (scheduler/liveness.cc).
  // Posted, so that it runs on the scheduler's strand; a scheduler whose server is gone by
  // then is not touched.
  server->activity_ = std::make_shared<rpc::ConnectionActivityReader>(server->port_);
  boost::asio::post(io, [&scheduler, weak = std::weak_ptr(server->activity_)] {
    if (weak.expired()) return;
    scheduler.WatchConnections([weak]() -> absl::StatusOr<rpc::ConnectionActivity> {
      auto reader = weak.lock();
      if (!reader) return absl::UnavailableError("the scheduler's server has stopped");
      return reader->Read();
    });
  });
  return server;
}

void SchedulerServer::ShutdownAsync(boost::asio::io_context& io, std::function<void()> done) {
  if (!sessions_) return server_->ShutdownAsync(io, std::move(done));
  // The sessions first: their nodes get the job's end, as gRPC's Shutdown lets calls finish.
  sessions_->Drain(std::chrono::seconds(1), [this, &io, done = std::move(done)]() mutable {
    server_->ShutdownAsync(io, std::move(done));
  });
}

SchedulerServer::~SchedulerServer() {
  if (sessions_) sessions_->Close();
  server_.reset();
}

}  // namespace gangrun::scheduler
