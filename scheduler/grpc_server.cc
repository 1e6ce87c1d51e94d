#include "scheduler/grpc_server.h"

#include <boost/asio/post.hpp>
#include <deque>
#include <mutex>

#include "common/logging.h"
#include "gangrun/v1/kv.grpc.pb.h"
#include "gangrun/v1/session.grpc.pb.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::milliseconds;

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

class SessionReactor;

// What the scheduler holds for one node stream. It outlives the reactor: the reactor may be
// gone (the stream ended) while the scheduler has not yet heard of it.
class StreamLink : public NodeLink {
 public:
  void Send(const v1::NodeCommand& command) override;
  void Close() override;
  common::TimePoint LastHeartbeat() const override {
    return common::TimePoint(common::Duration(last_heartbeat.load(std::memory_order_relaxed)));
  }
  std::atomic<common::Duration::rep> last_heartbeat{
      common::TimePoint::min().time_since_epoch().count()};
  std::mutex mu;
  SessionReactor* reactor = nullptr;  // guarded by mu; null once the stream is done
  int node_id = 0;                    // set on the io_context
};

class SessionReactor : public grpc::ServerBidiReactor<v1::NodeEvent, v1::NodeCommand> {
 public:
  SessionReactor(boost::asio::io_context& io, Scheduler& scheduler, bool authorized)
      : io_(io), scheduler_(scheduler), link_(std::make_shared<StreamLink>()) {
    if (!authorized) {
      FinishOnce(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong or missing token"));
      return;
    }
    link_->reactor = this;
    boost::asio::post(io_, [link = link_, &scheduler = scheduler_] {
      link->node_id = scheduler.AddNode(link.get());
    });
    StartRead(&incoming_);
  }

  // Called with link_->mu held.
  void QueueLocked(const v1::NodeCommand& command) {
    if (finished_ || closing_) return;
    outgoing_.push_back(command);
    if (outgoing_.size() == 1) StartWrite(&outgoing_.front());
  }
  void CloseLocked() {
    closing_ = true;
    if (outgoing_.empty()) FinishOnce(grpc::Status::OK);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      boost::asio::post(io_, [link = link_, &scheduler = scheduler_] {
        scheduler.OnNodeDisconnected(link->node_id);
      });
      std::lock_guard<std::mutex> lock(link_->mu);
      if (outgoing_.empty()) FinishOnce(grpc::Status::OK);
      closing_ = true;
      return;
    }
    if (incoming_.has_heartbeat()) {
      // Counted here, not posted: a heartbeat costs no trip to the scheduler's strand.
      link_->last_heartbeat.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                                  std::memory_order_relaxed);
    } else {
      boost::asio::post(io_, [link = link_, &scheduler = scheduler_, event = incoming_] {
        scheduler.OnNodeEvent(link->node_id, event);
      });
    }
    StartRead(&incoming_);
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(link_->mu);
    outgoing_.pop_front();
    if (!ok) {
      outgoing_.clear();
      FinishOnce(grpc::Status::OK);
      return;
    }
    if (!outgoing_.empty()) {
      StartWrite(&outgoing_.front());
    } else if (closing_) {
      FinishOnce(grpc::Status::OK);
    }
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(link_->mu);
      link_->reactor = nullptr;
    }
    delete this;
  }

 private:
  void FinishOnce(const grpc::Status& status) {
    if (!finished_.exchange(true)) Finish(status);
  }

  boost::asio::io_context& io_;
  Scheduler& scheduler_;
  std::shared_ptr<StreamLink> link_;
  v1::NodeEvent incoming_;
  std::deque<v1::NodeCommand> outgoing_;  // guarded by link_->mu
  bool closing_ = false;                  // guarded by link_->mu
  std::atomic<bool> finished_{false};
};

void StreamLink::Send(const v1::NodeCommand& command) {
  std::lock_guard<std::mutex> lock(mu);
  if (reactor != nullptr) reactor->QueueLocked(command);
}

void StreamLink::Close() {
  std::lock_guard<std::mutex> lock(mu);
  if (reactor != nullptr) reactor->CloseLocked();
}

common::Duration WaitFromMs(int64_t wait_ms) {
  if (wait_ms < 0) return common::Duration(-1);
  return milliseconds(wait_ms);
}

}  // namespace

bool Authorized(const grpc::ServerContextBase& context, const std::string& token) {
  if (token.empty()) return true;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return false;
  std::string value(it->second.data(), it->second.size());
  return value == "Bearer " + token;
}

class SchedulerServer::Services : public v1::Scheduler::CallbackService,
                                  public v1::KeyValue::CallbackService {
 public:
  Services(boost::asio::io_context& io, Scheduler& scheduler, KvStore& store, std::string token)
      : io_(io), scheduler_(scheduler), store_(store), token_(std::move(token)) {}

  grpc::ServerBidiReactor<v1::NodeEvent, v1::NodeCommand>* Session(
      grpc::CallbackServerContext* context) override {
    return new SessionReactor(io_, scheduler_, Authorized(*context, token_));
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

  grpc::ServerUnaryReactor* Put(grpc::CallbackServerContext* context, const v1::PutRequest* request,
                                v1::PutResponse*) override {
    return Serve(context, [this, request](grpc::ServerUnaryReactor* reactor) {
      reactor->Finish(ToGrpc(store_.Put(request->key(), request->value())));
    });
  }

  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context, const v1::GetRequest* request,
                                v1::GetResponse* response) override {
    return Serve(context, [this, request, response](grpc::ServerUnaryReactor* reactor) {
      store_.Get(request->key(), WaitFromMs(request->wait_ms()),
                 [reactor, response](absl::StatusOr<std::string> value) {
                   if (value.ok()) response->set_value(*value);
                   reactor->Finish(ToGrpc(value.status()));
                 });
    });
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
    return Serve(context, [this, request](grpc::ServerUnaryReactor* reactor) {
      store_.Barrier(request->name(), request->count(), WaitFromMs(request->wait_ms()),
                     [reactor](absl::Status status) { reactor->Finish(ToGrpc(status)); });
    });
  }

 private:
  // Every unary call: refused with UNAUTHENTICATED without the token, otherwise `work` runs
  // on the io_context (the scheduler's strand) and finishes the call there.
  template <typename Work>
  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* context, Work work) {
    auto* reactor = context->DefaultReactor();
    if (!Authorized(*context, token_)) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong or missing token"));
      return reactor;
    }
    boost::asio::post(io_, [reactor, work = std::move(work)]() mutable { work(reactor); });
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
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  // Two launchers must not share the port: the second one has to find it taken.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.SetMaxReceiveMessageSize(8 << 20);
  builder.AddListeningPort(
      options.listen_address,
      options.credentials ? options.credentials : grpc::InsecureServerCredentials(),
      &server->port_);
  builder.RegisterService(static_cast<v1::Scheduler::CallbackService*>(server->services_.get()));
  builder.RegisterService(static_cast<v1::KeyValue::CallbackService*>(server->services_.get()));
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || server->port_ == 0) {
    return absl::AlreadyExistsError("cannot listen on " + options.listen_address);
  }
  return server;
}

void SchedulerServer::ShutdownAsync(boost::asio::io_context& io, std::function<void()> done) {
  // Server::Shutdown blocks until every call has finished, and calls finish on the
  // io_context: so it runs on its own thread while the io_context keeps running.
  shutdown_thread_ = std::thread([this, &io, done = std::move(done)] {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    boost::asio::post(io, done);
  });
}

SchedulerServer::~SchedulerServer() {
  if (shutdown_thread_.joinable()) shutdown_thread_.join();
}

}  // namespace gangrun::scheduler
