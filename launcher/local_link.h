#pragma once
// The in-process link between this host's node and the scheduler it hosts: the same
// NodeEvent / NodeCommand messages a remote node's session carries, delivered by posting onto the
// io_context so neither side is ever re-entered from the other's call stack.
// Owned by the launcher; outlives neither the scheduler nor the node.

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "node/node.h"
#include "scheduler/scheduler.h"

namespace gangrun::launcher {

class LocalLink : public node::SchedulerLink, public scheduler::NodeLink {
 public:
  LocalLink(boost::asio::io_context& io, scheduler::Scheduler& scheduler)
      : io_(io), scheduler_(scheduler), node_id_(scheduler.AddNode(this)) {}

  void Connect(node::Node* node) { node_ = node; }

  void Send(const v1::NodeEvent& event) override {
    boost::asio::post(io_, [this, event] { scheduler_.OnNodeEvent(node_id_, event); });
  }
  bool InProcess() const override { return true; }
  void Send(const v1::NodeCommand& command) override {
    boost::asio::post(io_, [this, command] {
      if (node_ != nullptr) node_->OnCommand(command);
    });
  }

 private:
  boost::asio::io_context& io_;
  scheduler::Scheduler& scheduler_;
  int node_id_;
  node::Node* node_ = nullptr;
};

}  // namespace gangrun::launcher
