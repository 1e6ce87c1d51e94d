// The Daemon service over gRPC: agent and submit streams, Status, Stop and Drain. As for the job
// schedulers, reactors only post to the io_context, where the Daemon actor lives.

#include "daemon/daemon.h"
#include "gangrun/v1/daemon.grpc.pb.h"
#include "scheduler/logs_stream.h"
#include "scheduler/peer_checks.h"

namespace gangrun::daemon {

class DaemonServer::Service : public v1::Daemon::CallbackService {
 public:
  Service(boost::asio::io_context& io, Daemon& daemon, std::string token)
      : io_(io), daemon_(daemon), auth_(std::move(token)) {}
  // CallAuth.Challenge, whose challenges this service's calls are bound to.
  grpc::Service* challenges() { return auth_.service(); }

  grpc::ServerBidiReactor<v1::AgentEvent, v1::AgentCommand>* Agent(
      grpc::CallbackServerContext* context) override {
    return Open<Daemon::AgentStream>(
        context, "Agent", [](Daemon& d, auto handle) { return d.AddAgent(std::move(handle)); },
        [](Daemon& d, int id, const v1::AgentEvent& e) { d.OnAgentEvent(id, e); },
        [](Daemon& d, int id) { d.OnAgentGone(id); });
  }

  grpc::ServerBidiReactor<v1::SubmitEvent, v1::SubmitReply>* Submit(
      grpc::CallbackServerContext* context) override {
    return Open<Daemon::SubmitStream>(
        context, "Submit", [](Daemon& d, auto handle) { return d.AddSubmitter(std::move(handle)); },
        [](Daemon& d, int id, const v1::SubmitEvent& e) { d.OnSubmitEvent(id, e); },
        [](Daemon& d, int id) { d.OnSubmitterGone(id); });
  }

  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* context,
                                   const v1::DaemonStatusRequest* request,
                                   v1::DaemonStatusResponse* response) override {
    return rpc::ServeOnStrand(io_, context, auth_, rpc::MethodPath<v1::Daemon>("Status"), *request,
                              [this, response](grpc::ServerUnaryReactor* r) {
                                *response = daemon_.Status();
                                r->Finish(grpc::Status::OK);
                              });
  }

  grpc::ServerUnaryReactor* Stop(grpc::CallbackServerContext* context,
                                 const v1::StopJobRequest* request,
                                 v1::StopJobResponse* response) override {
    return rpc::ServeOnStrand(
        io_, context, auth_, rpc::MethodPath<v1::Daemon>("Stop"), *request,
        [this, request, response](grpc::ServerUnaryReactor* r) {
          if (absl::Status standby = daemon_.Standby(); !standby.ok()) {
            r->Finish(rpc::ToGrpcStatus(standby));
            return;
          }
          response->set_stopped(daemon_.Stop(request->job_id(), StopSignal(request->signal()),
                                             request->reason().empty()
                                                 ? "stopped by gangrun stop"
                                                 : Sanitize(request->reason(), kMaxReasonBytes)));
          if (!request->job_id().empty() && response->stopped() == 0) {
            r->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                                   "no running or waiting job '" + request->job_id() + "'"));
            return;
          }
          r->Finish(grpc::Status::OK);
        });
  }

  // `gangrun drain` / `gangrun undrain`: authenticated as every call here (the daemon's token).
  grpc::ServerUnaryReactor* Drain(grpc::CallbackServerContext* context,
                                  const v1::DrainRequest* request,
                                  v1::DrainResponse* response) override {
    return rpc::ServeOnStrand(io_, context, auth_, rpc::MethodPath<v1::Daemon>("Drain"), *request,
                              [this, request, response](grpc::ServerUnaryReactor* r) {
                                if (absl::Status standby = daemon_.Standby(); !standby.ok()) {
                                  r->Finish(rpc::ToGrpcStatus(standby));
                                  return;
                                }
                                auto said = daemon_.Drain(*request);
                                if (said.ok()) response->set_message(*said);
                                r->Finish(rpc::ToGrpcStatus(said.status()));
                              });
  }

  grpc::ServerUnaryReactor* Stacks(grpc::CallbackServerContext* context,
                                   const v1::StacksRequest* request,
                                   v1::StacksResponse* response) override {
    return rpc::ServeOnStrand(io_, context, auth_, rpc::MethodPath<v1::Daemon>("Stacks"), *request,
                              [this, request, response](grpc::ServerUnaryReactor* r) {
                                daemon_.Stacks(*request, [r, response](auto answer) {
                                  if (answer.ok()) *response = std::move(*answer);
                                  r->Finish(rpc::ToGrpcStatus(answer.status()));
                                });
                              });
  }

  grpc::ServerWriteReactor<v1::LogChunk>* Logs(grpc::CallbackServerContext* context,
                                               const v1::LogsRequest* request) override {
    return scheduler::StartLogsStream(
        io_, auth_.Check(*context, rpc::MethodPath<v1::Daemon>("Logs"), request), *request,
        [this, job_id = request->job_id()] { return daemon_.LogsOf(job_id); });
  }

 private:
  // A stream whose events go to the daemon in order: added first, then each message, then
  // its end, all posted to the io_context.
  template <typename Stream, typename Add, typename OnEvent, typename OnGone>
  Stream* Open(grpc::CallbackServerContext* context, std::string_view method, Add add,
               OnEvent on_event, OnGone on_gone) {
    absl::Status authorized = auth_.Check(*context, rpc::MethodPath<v1::Daemon>(method), nullptr);
    if (authorized.ok()) authorized = daemon_.Standby();  // a standby serves no stream
    auto handle = std::make_shared<typename Stream::Handle>();
    auto id = std::make_shared<int>(0);  // set on the io_context before any event is posted
    if (authorized.ok()) {
      boost::asio::post(io_, [this, handle, id, add] { *id = add(daemon_, handle); });
    }
    typename Stream::Handlers handlers;
    handlers.on_read = [this, id, on_event](const auto& event) {
      boost::asio::post(io_, [this, id, on_event, event] { on_event(daemon_, *id, event); });
    };
    handlers.on_end = [this, id, on_gone] {
      boost::asio::post(io_, [this, id, on_gone] { on_gone(daemon_, *id); });
    };
    return new Stream(handle, authorized, std::move(handlers));
  }

  boost::asio::io_context& io_;
  Daemon& daemon_;
  rpc::CallAuthenticator auth_;
};

absl::StatusOr<std::unique_ptr<DaemonServer>> DaemonServer::Start(
    boost::asio::io_context& io, Daemon& daemon, const std::string& listen_address,
    const std::string& token, std::shared_ptr<grpc::ServerCredentials> credentials) {
  std::unique_ptr<DaemonServer> server(new DaemonServer());
  server->service_ = std::make_unique<Service>(io, daemon, token);
  // The daemon's port has the same bounds before authentication as a job's (rpc/port.h).
  auto port = rpc::Port::Open(io, {listen_address, credentials != nullptr, 0, 0});
  if (!port.ok()) {
    return absl::UnavailableError("cannot listen on " + listen_address + " (" +
                                  std::string(port.status().message()) + ")");
  }
  auto started =
      rpc::Server::Start("", credentials, {server->service_.get(), server->service_->challenges()});
  if (!started.ok()) return started.status();
  server->server_ = std::move(*started);
  server->port_ = std::move(*port);
  server->port_->Start(nullptr, server->server_.get());
  return server;
}

void DaemonServer::ShutdownAsync(boost::asio::io_context& io, std::function<void()> done) {
  port_->StopAccepting();
  server_->ShutdownAsync(io, std::move(done));
}

DaemonServer::~DaemonServer() {
  if (port_) port_->StopAccepting();
  server_.reset();
}

}  // namespace gangrun::daemon
