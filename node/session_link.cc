#include "node/session_link.h"

#include <algorithm>

#include "common/logging.h"

namespace gangrun::node {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using End = SessionConnection::End;

common::Duration ConnectTimeoutFor(common::Duration heartbeat_interval) {
  return std::clamp<common::Duration>(heartbeat_interval, milliseconds(250), milliseconds(1000));
}

SessionLink::SessionLink(common::Clock& clock, Options options, ConnectionFactory factory)
    : clock_(clock), options_(std::move(options)), factory_(std::move(factory)) {}

SessionLink::~SessionLink() {
  tick_timer_.reset();
  retry_timer_.reset();
  attempt_timer_.reset();
  attempt_.reset();
  active_.reset();
}

common::Duration SessionLink::ResumeAfter() const {
  return std::max<common::Duration>(2 * options_.heartbeat_interval, milliseconds(200));
}

common::Duration SessionLink::LoseAfter() const {
  return options_.node_timeout + 2 * options_.heartbeat_interval;
}

void SessionLink::Connect(CommandHandler on_command, LostHandler on_lost) {
  on_command_ = std::move(on_command);
  on_lost_ = std::move(on_lost);
  Attempt();
}

void SessionLink::Attempt() {
  if (lost_ || over_ || attempt_) return;
  // Handlers name their connection: the attempt may become the session's connection while
  // another attempt is made beside it later.
  const uint64_t id = ++last_connection_id_;
  SessionConnection::Handlers handlers;
  handlers.on_accepted = [this, id](uint64_t session, const std::string& key, uint64_t acked) {
    if (id == attempt_id_) OnAccepted(session, key, acked);
  };
  handlers.on_opened = [this, id] {
    if (id == attempt_id_) OnOpened();
  };
  handlers.on_refused = [this, id](const v1::SessionRefused& refused) {
    if (id == attempt_id_) OnRefused(refused);
  };
  handlers.on_command = [this, id](const v1::NodeCommand& command) {
    if (id == active_id_) OnCommand(command);
  };
  handlers.on_pong = [this, id](uint64_t acked) {
    if (id == active_id_) OnPong(acked);
  };
  handlers.on_end = [this, id](End end, const std::string& why) {
    if (id == active_id_) return OnActiveEnded(end, why);
    if (id == attempt_id_) OnAttemptEnded(end, why);
  };
  attempt_id_ = id;
  opened_through_ = 0;
  attempt_ = factory_(std::move(handlers));
  attempt_->Open(session_, key_, last_command_);
  if (session_ == 0) return;
  // A resume that stalls (its SYN got through, then the path broke again) gives way to a new
  // attempt instead of holding the session until the transport's own bound.
  attempt_timer_ = clock_.After(ResumeAfter(), [this, id] {
    attempt_timer_.reset();
    if (id != attempt_id_ || lost_ || over_) return;
    attempt_.reset();
    attempt_id_ = 0;
    Attempt();
  });
}

void SessionLink::RetryLater() {
  if (lost_) return;
  retry_timer_ = clock_.After(backoff_, [this] {
    retry_timer_.reset();
    Attempt();
  });
  backoff_ = std::min(duration_cast<milliseconds>(backoff_ * 8 / 5), kMaxBackoff);
}

// A new session's attempt: what waits (the join) goes with its opening.
void SessionLink::OnOpened() {
  if (session_ != 0) return;
  for (const auto& event : unacked_) attempt_->SendEvent(event);
  if (!unacked_.empty()) opened_through_ = unacked_.back().seq();
}

// The attempt became the session's connection: the old one (if any) goes, and what the
// scheduler has not acknowledged is sent again on the new one, in order (but for what went
// with its opening).
void SessionLink::OnAccepted(uint64_t session, const std::string& key, uint64_t acked) {
  const bool resumed = session_ != 0;
  if (resumed && session != session_) {
    return Lose("the scheduler at " + options_.target + " answered for another session", false);
  }
  session_ = session;
  key_ = key;
  attempt_timer_.reset();
  active_ = std::move(attempt_);
  active_id_ = attempt_id_;
  attempt_id_ = 0;
  active_closed_ = false;
  mismatches_ = 0;
  backoff_ = kInitialBackoff;
  last_heard_ = clock_.Now();
  quiet_pong_timeout_ = active_->QuietPongTimeout();
  if (resumed) {
    common::Logger("node")->info("resumed the session with the scheduler at {} on a new connection",
                                 options_.target);
  }
  Acknowledged(acked);
  for (const auto& event : unacked_) {
    if (event.seq() > opened_through_) active_->SendEvent(event);
  }
  opened_through_ = 0;
  if (!tick_timer_) Tick();
}

void SessionLink::OnRefused(const v1::SessionRefused& refused) {
  if (session_ != 0 && refused.unknown_session()) {
    return Lose("the scheduler at " + options_.target +
                    " no longer holds this node's session (it lost this node: " + refused.reason() +
                    ")",
                false);
  }
  Lose(refused.reason().empty() ? "the scheduler refused the session" : refused.reason(),
       refused.unauthenticated());
}

void SessionLink::OnCommand(const v1::NodeCommand& command) {
  last_heard_ = clock_.Now();
  if (command.seq() != 0) {
    if (command.seq() <= last_command_) return;  // sent again after a resume: already had it
    last_command_ = command.seq();
  }
  if (command.has_finished() || command.has_rejected()) {
    // The scheduler's last word on this session: it closes it next, and nothing resumes.
    over_ = true;
    tick_timer_.reset();
    retry_timer_.reset();
    attempt_timer_.reset();
    attempt_.reset();
    attempt_id_ = 0;
  }
  on_command_(command);
}

void SessionLink::OnPong(uint64_t acked) {
  last_heard_ = clock_.Now();
  Acknowledged(acked);
}

void SessionLink::Acknowledged(uint64_t acked) {
  while (!unacked_.empty() && unacked_.front().seq() <= acked) {
    unacked_bytes_ -= unacked_.front().ByteSizeLong();
    unacked_.pop_front();
  }
}

void SessionLink::OnAttemptEnded(End end, const std::string& why) {
  attempt_timer_.reset();
  attempt_.reset();
  attempt_id_ = 0;
  if (lost_) return;
  if (session_ == 0) {
    // Not accepted yet: nothing listens yet, or something that is not a plaintext gangrun
    // scheduler answered; twice in a row is an answer.
    if (end == End::kNotAScheduler && ++mismatches_ >= kMismatchesToGiveUp) {
      return Lose("the scheduler at " + options_.target +
                      " expects TLS (or is not a gangrun scheduler), but this launcher does not "
                      "use it (give it the job's --tls_ca/--tls_cert/--tls_key)",
                  false);
    }
    return RetryLater();
  }
  // A resume attempt. The scheduler's host closed our connection and now refuses new ones:
  // its launcher is gone.
  if (active_closed_ && end == End::kConnectionRefused) {
    return Lose("the scheduler's launcher at " + options_.target +
                    " is gone: it closed the session and its port refuses connections",
                false);
  }
  if (end == End::kConnectionRefused || end == End::kNotAScheduler) return RetryLater();
  Attempt();  // timed out or failed: the next attempt at once (each is bounded)
}

void SessionLink::OnActiveEnded(End end, const std::string& why) {
  if (over_) {
    active_.reset();
    active_id_ = 0;
    return;
  }
  common::Logger("node")->warn("the connection to the scheduler at {} ended ({}); resuming",
                               options_.target, why);
  active_.reset();
  active_id_ = 0;
  active_closed_ = end == End::kClosed;
  Attempt();
}

void SessionLink::Tick() {
  tick_timer_ = clock_.After(options_.heartbeat_interval, [this] { Tick(); });
  const common::TimePoint now = clock_.Now();
  // The kernel's ACKs say the path works while the scheduler's pongs are sparse.
  const std::optional<common::Duration> since_ack =
      active_ ? active_->SinceLastAck() : std::nullopt;
  if (since_ack) last_acked_ = std::max(last_acked_, now - *since_ack);
  common::Duration silent = now - last_heard_;
  if (quiet_pong_timeout_ == common::Duration::zero()) {
    if (silent >= LoseAfter()) return Lose(Silence(silent), false);
  } else {
    // Quiet: pongs are rare, the path is judged by the ACKs alone.
    const common::Duration path_silent = now - std::max(last_heard_, last_acked_);
    if (path_silent >= LoseAfter()) return Lose(Silence(path_silent), false);
    if (silent >= quiet_pong_timeout_) {
      return Lose("the scheduler at " + options_.target + " sent no pong for " +
                      std::to_string(duration_cast<milliseconds>(silent).count()) +
                      " ms while its host still acknowledged this node's ticks (its launcher is "
                      "stuck)",
                  false);
    }
  }
  if (active_) active_->SendPing(last_command_, since_ack.has_value());
  if (since_ack) silent = std::min(silent, *since_ack);
  if (silent >= ResumeAfter() && !attempt_ && !retry_timer_) {
    common::Logger("node")->warn(
        "nothing from the scheduler at {} for {} ms; opening a new connection to resume the "
        "session",
        options_.target, duration_cast<milliseconds>(silent).count());
    Attempt();
  }
}

std::string SessionLink::Silence(common::Duration silent) const {
  return "the scheduler at " + options_.target + " did not answer for " +
         std::to_string(duration_cast<milliseconds>(silent).count()) +
         " ms (its host is down, unreachable or stalled)";
}

void SessionLink::Send(const v1::NodeEvent& event) {
  if (lost_ || over_) return;
  if (event.has_log_read()) {
    // Unsequenced: never resent, never waiting for an acknowledgement (the scheduler asks
    // again for a piece it did not get).
    if (active_) active_->SendEvent(event);
    return;
  }
  v1::NodeEvent sent = event;
  sent.set_seq(next_seq_++);
  unacked_bytes_ += sent.ByteSizeLong();
  if (unacked_bytes_ > options_.max_unacked_bytes) {
    return Lose("more than " + std::to_string(options_.max_unacked_bytes) +
                    " bytes of events wait for the scheduler at " + options_.target +
                    " to acknowledge them",
                false);
  }
  if (active_) active_->SendEvent(sent);
  unacked_.push_back(std::move(sent));
}

void SessionLink::Lose(const std::string& reason, bool unauthenticated) {
  if (lost_) return;
  lost_ = true;
  tick_timer_.reset();
  retry_timer_.reset();
  attempt_timer_.reset();
  attempt_.reset();
  active_.reset();
  if (on_lost_) on_lost_(reason, unauthenticated);
}

}  // namespace gangrun::node
