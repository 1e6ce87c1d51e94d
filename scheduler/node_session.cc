#include "scheduler/node_session.h"

#include <boost/asio/post.hpp>

#include "common/logging.h"
#include "rpc/session_auth.h"
#include "scheduler/liveness.h"

namespace gangrun::scheduler {

NodeSession::NodeSession(NodeSessions& sessions, uint64_t id, std::string key)
    : sessions_(sessions), id_(id), key_(std::move(key)), last_heard_(sessions.scheduler().Now()) {}

NodeSession::~NodeSession() = default;

void NodeSession::Send(const v1::NodeCommand& command) {
  if (ended_) return;
  v1::NodeCommand sent = command;
  sent.set_seq(next_seq_++);
  unacked_bytes_ += sent.ByteSizeLong();
  if (unacked_bytes_ > kMaxUnackedBytes) {
    const std::string why =
        "it acknowledges nothing: " + std::to_string(unacked_bytes_) + " bytes of commands wait";
    if (wire_) wire_->Drop();
    wire_.reset();
    boost::asio::post(sessions_.io(), [&sessions = sessions_, id = id_, why] {
      auto it = sessions.sessions_.find(id);
      if (it != sessions.sessions_.end()) it->second->End(why);
    });
    return;
  }
  if (wire_) wire_->SendCommand(sent);
  unacked_.push_back(std::move(sent));
}

void NodeSession::Close() {
  if (ended_ || closing_) return;
  closing_ = true;
  if (wire_) wire_->CloseAfterWrites();
}

void NodeSession::Drop() {
  if (ended_) return;
  closing_ = true;  // no resume, no more events
  if (wire_) wire_->Drop();
  wire_.reset();
  boost::asio::post(sessions_.io(), [&sessions = sessions_, id = id_] {
    auto it = sessions.sessions_.find(id);
    if (it != sessions.sessions_.end()) it->second->End("dropped by the scheduler");
  });
}

void NodeSession::Attach(std::unique_ptr<Wire> wire, uint64_t acked) {
  std::unique_ptr<Wire> old = std::move(wire_);
  wire_ = std::move(wire);
  if (old) {
    common::Logger("scheduler")
        ->info("the session of {} moved to a new connection from {}", old->PeerEndpoint(),
               wire_->PeerEndpoint());
    old->Drop();
  }
  last_heard_ = sessions_.scheduler().Now();
  Acknowledged(acked);
  for (const auto& command : unacked_) wire_->SendCommand(command);
}

bool NodeSession::OnEvent(const Wire* wire, const v1::NodeEvent& event) {
  if (ended_ || wire != wire_.get()) return true;
  last_heard_ = sessions_.scheduler().Now();
  if (event.seq() == 0 && event.has_log_read()) {
    // Unsequenced (node/session_link.h), and taken while the session closes: the last
    // pieces of the logs come as the job ends.
    sessions_.scheduler().OnNodeEvent(node_id_, event);
    return true;
  }
  if (event.seq() <= last_event_) return true;  // sent again after a resume: already had it
  if (event.seq() != last_event_ + 1) return false;
  last_event_ = event.seq();
  // A heartbeat is counted here, as a ping is: no trip further.
  if (event.has_heartbeat() || closing_) return true;
  sessions_.scheduler().OnNodeEvent(node_id_, event);
  return true;
}

void NodeSession::OnPing(const Wire* wire, uint64_t acked, bool sparse_pongs) {
  if (ended_ || wire != wire_.get()) return;
  const common::TimePoint now = sessions_.scheduler().Now();
  last_heard_ = now;
  Acknowledged(acked);
  // Never answered yet: last_pong_ is min() (and now - min() overflows).
  const bool answered = last_pong_ != common::TimePoint::min();
  if (sparse_pongs && answered && last_event_ == last_pong_acked_ &&
      now - last_pong_ < sessions_.scheduler().node_timeout() / 2) {
    return;
  }
  Pong(now);
}

void NodeSession::OnSweep() {
  if (ended_ || closing_ || !wire_ || !DataProvesLoop()) return;
  const common::TimePoint now = sessions_.scheduler().Now();
  if (last_pong_ != common::TimePoint::min() &&
      now - last_pong_ < quiet_pong_timeout_ / Liveness::kMissedMessages) {
    return;
  }
  Pong(now);
}

// A pong skipped (the node is behind) is not counted: the next sweep tries again.
void NodeSession::Pong(common::TimePoint now) {
  if (!wire_->SendPong(last_event_)) return;
  last_pong_ = now;
  last_pong_acked_ = last_event_;
}

void NodeSession::Acknowledged(uint64_t acked) {
  while (!unacked_.empty() && unacked_.front().seq() <= acked) {
    unacked_bytes_ -= unacked_.front().ByteSizeLong();
    unacked_.pop_front();
  }
}

void NodeSession::OnWireEnded(const Wire* wire, const std::string& why) {
  if (ended_ || wire != wire_.get()) return;
  End(why);
}

void NodeSession::End(const std::string& why) {
  if (ended_) return;
  ended_ = true;
  if (wire_) wire_->Drop();
  common::Logger("scheduler")->debug("session {:x} ended: {}", id_, why);
  // Also after Close: the scheduler lets go of the link only when it hears this.
  sessions_.scheduler().OnNodeDisconnected(node_id_);
  sessions_.Remove(id_);  // destroys this session: the last thing it does
}

NodeSessions::~NodeSessions() = default;

NodeSession* NodeSessions::Create(std::string key, std::unique_ptr<NodeSession::Wire> wire) {
  GANGRUN_ON_STRAND(strand_);
  uint64_t id = rpc::RandomId();
  while (sessions_.count(id) > 0) id = rpc::RandomId();
  auto session = std::make_unique<NodeSession>(*this, id, std::move(key));
  NodeSession* raw = session.get();
  sessions_[id] = std::move(session);
  raw->wire_ = std::move(wire);
  raw->node_id_ = scheduler_.AddNode(raw);
  return raw;
}

NodeSession* NodeSessions::Find(uint64_t id) {
  GANGRUN_ON_STRAND(strand_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->closing() || it->second->ended_) return nullptr;
  return it->second.get();
}

NodeSession* NodeSessions::Lookup(uint64_t id) {
  GANGRUN_ON_STRAND(strand_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->ended_) return nullptr;
  return it->second.get();
}

void NodeSessions::DropAll() {
  dropping_ = true;
  for (auto& [id, session] : sessions_) {
    session->ended_ = true;
    if (session->wire_) session->wire_->Drop();
  }
  sessions_.clear();
  dropping_ = false;
}

void NodeSessions::Remove(uint64_t id) {
  if (dropping_) return;
  sessions_.erase(id);
  if (sessions_.empty() && on_empty_) {
    auto on_empty = std::move(on_empty_);
    on_empty_ = nullptr;
    on_empty();
  }
}

}  // namespace gangrun::scheduler
