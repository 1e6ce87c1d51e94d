#pragma once
// A real scheduler server on 127.0.0.1:0 (token "s3cret" unless Token() says otherwise, run id
// "job-a", a job of 2 workers, long timeouts) whose io_context runs on a thread of the test;
// for tests of what reaches the scheduler over the network. The scheduler is not started:
// only what clients do moves it.

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/clock.h"
#include "node/session_link.h"
#include "node/tcp_link.h"
#include "scheduler/grpc_server.h"
#include "scheduler/kv_store.h"
#include "scheduler/scheduler.h"

namespace gangrun::testing {

class SchedulerServerFixture : public ::testing::Test {
 protected:
  static constexpr char kToken[] = "s3cret";

  virtual std::string Token() const { return kToken; }
  // Sessions whose pings are read as they come (scheduler::ServerOptions); 0: every session
  // of a node that can keeps quiet.
  virtual size_t LoudSessions() const { return 64; }
  // Opened sessions that have not joined, at most (scheduler::ServerOptions).
  virtual size_t MaxUnjoined() const { return scheduler::SessionPort::kMaxUnjoined; }

  void SetUp() override {
    auto server = scheduler::SchedulerServer::Start(
        io_, scheduler_, store_,
        {"127.0.0.1:0", Token(), nullptr, "job-a", LoudSessions(), MaxUnjoined()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    boost::asio::post(io_, [this] {
      if (before_shutdown_) before_shutdown_();
      store_.CancelAll();
      server_->ShutdownAsync(io_, [this] { guard_.reset(); });
    });
    if (thread_.joinable()) thread_.join();
    server_.reset();
  }
  std::string Target() const { return "127.0.0.1:" + std::to_string(server_->port()); }
  // A real node's link to this server over gangrun's session framing, with `token`; made and
  // used on the io_context.
  std::unique_ptr<node::SessionLink> NodeLink(const std::string& token) {
    node::TcpSessionConnection::Options tcp;
    tcp.target = Target();
    tcp.token = token;
    node::SessionLink::Options options;
    options.target = Target();
    return std::make_unique<node::SessionLink>(clock_, options,
                                               node::TcpSessionConnection::Factory(io_, tcp));
  }

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_ =
      boost::asio::make_work_guard(io_);
  common::AsioClock clock_{io_.get_executor()};
  scheduler::Scheduler scheduler_{clock_, [] {
                                    scheduler::Scheduler::Options options;
                                    options.world_size = 2;
                                    options.cluster_timeout = std::chrono::seconds(60);
                                    options.node_timeout = std::chrono::seconds(60);
                                    options.run_id = "job-a";
                                    return options;
                                  }()};
  scheduler::KvStore store_{clock_};
  std::unique_ptr<scheduler::SchedulerServer> server_;
  std::thread thread_;
  std::function<void()> before_shutdown_;  // runs on the io_context before the shutdown
};

}  // namespace gangrun::testing
