#include "scheduler/torch_store.h"

#include <algorithm>
#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <map>
#include <set>
#include <vector>

#include "common/logging.h"
#include "common/net.h"
#include "rpc/port.h"
#include "scheduler/torch_store_protocol.h"

namespace gangrun::scheduler {
namespace {

using boost::asio::ip::tcp;
using torch_store::Op;

// What one read asks the kernel for.
constexpr size_t kReadChunk = 64 << 10;
// How often a refused connection is said, at most (the refusals in between are counted).
constexpr auto kRefusalLinePeriod = std::chrono::minutes(1);
// After a failed accept (no descriptor left), the next try.
constexpr auto kAcceptRetry = std::chrono::milliseconds(100);

// torch's key of the attempt `n` under its elastic agent store: the client's "/" and the
// PrefixStore's "/worker/attempt_<n>" (torch/distributed/rendezvous.py).
std::string AttemptPrefix(int n) { return "//worker/attempt_" + std::to_string(n) + "/"; }

}  // namespace

class TorchConnection;

struct TorchStore::State : std::enable_shared_from_this<TorchStore::State> {
  State(boost::asio::io_context& io, common::Clock& clock, KvStore& store)
      : clock(clock), store(store), acceptor(io) {}
  void Accept();
  void WaitBegan();  // arms the check of long waits if it is not
  void CheckLongWaits();
  void Said(const std::string& line);  // a connection refused or closed, at most once a minute

  common::Clock& clock;
  KvStore& store;
  tcp::acceptor acceptor;
  size_t max_connections = 0;
  size_t max_unread_reply_bytes = 0;
  size_t buffered = 0;  // queries read and replies not yet sent, of every connection
  std::array<char, kReadChunk> chunk{};  // what one read brings, before its connection's input
  std::set<std::shared_ptr<TorchConnection>> connections;
  int forgotten_below = 0;
  std::chrono::steady_clock::time_point last_line{};
  size_t unsaid = 0;
  common::Duration report_after{};
  std::function<void(const LongWait&)> on_long_wait;
  std::unique_ptr<common::Timer> long_wait_check;
  std::unique_ptr<common::Timer> accept_retry;
  std::vector<std::string> reported_keys;  // the last report's, said once
};

// One rank's connection: reads queries, answers them in order.
class TorchConnection : public std::enable_shared_from_this<TorchConnection> {
 public:
  TorchConnection(std::shared_ptr<TorchStore::State> state, tcp::socket socket)
      : state_(std::move(state)), socket_(std::move(socket)) {
    boost::system::error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);
    socket_.non_blocking(true, ignored);
    auto peer = socket_.remote_endpoint(ignored);
    peer_ = ignored ? "?" : common::JoinHostPort(peer.address().to_string(), peer.port());
  }

  // Waits until the socket is readable, then reads what is there into the store's one read
  // buffer: a connection holds no buffer while it waits (100,000 idle ranks cost no 64 KiB
  // each).
  void Read() {
    auto self = shared_from_this();
    socket_.async_wait(tcp::socket::wait_read, [self](boost::system::error_code error) {
      if (error) return self->Close("");
      boost::system::error_code read_error;
      const size_t n =
          self->socket_.read_some(boost::asio::buffer(self->state_->chunk), read_error);
      if (read_error == boost::asio::error::would_block) return self->Read();
      if (read_error) return self->Close("");
      self->OnRead(n);
    });
  }

  // The waits of this connection begun before `before`: their keys still missing into `keys`.
  size_t OldWaits(common::TimePoint before, std::set<std::string>& keys,
                  common::TimePoint& oldest) const {
    size_t count = 0;
    for (const auto& [id, pending] : waits_) {
      if (pending.since > before) continue;
      ++count;
      oldest = std::min(oldest, pending.since);
      for (const auto& key : pending.keys) {
        if (!state_->store.Present(key)) keys.insert(key);
      }
    }
    return count;
  }
  bool waiting() const { return !waits_.empty(); }

  // Closes the socket and cancels its waits; `why` non-empty: said (the client did wrong).
  void Close(const std::string& why) {
    if (closed_) return;
    closed_ = true;
    if (!why.empty()) state_->Said("torch store: closed " + peer_ + ": " + why);
    CancelWaits();
    boost::system::error_code ignored;
    socket_.close(ignored);
    state_->buffered -= input_.size() + accounted_;
    accounted_ = 0;
    input_.clear();
    output_.clear();
    state_->connections.erase(shared_from_this());
  }

 private:
  void OnRead(size_t n) {
    if (state_->buffered + n > TorchStore::kMaxBufferedBytes) {
      return Close("the store's connections buffer " + std::to_string(state_->buffered) +
                   " bytes (at most " + std::to_string(TorchStore::kMaxBufferedBytes) + ")");
    }
    input_.append(state_->chunk.data(), n);
    state_->buffered += n;
    size_t used = 0;
    while (!closed_ && input_.size() - used >= wanted_) {
      torch_store::Decoded decoded =
          torch_store::Decode(std::string_view(input_).substr(used), dialect_);
      used += decoded.consumed;
      wanted_ = decoded.wanted;
      if (decoded.kind == torch_store::Decoded::Kind::kNeedMore) break;
      if (decoded.kind == torch_store::Decoded::Kind::kRefused) return Close(decoded.refusal);
      Execute(decoded.query);
    }
    if (closed_) return;
    input_.erase(0, used);
    state_->buffered -= used;
    Flush();
    if (!closed_) Read();
  }

  void Execute(torch_store::Query& query) {
    KvStore& store = state_->store;
    absl::Status status;
    switch (query.op) {
      case Op::kSet:
        status = store.Put(query.keys[0], std::move(query.values[0]));
        break;
      case Op::kCompareSet: {
        auto answer = store.CompareSet(query.keys[0], query.values[0], std::move(query.values[1]));
        status = answer.status();
        if (answer.ok()) torch_store::AppendBytes(output_, *answer);
        break;
      }
      case Op::kGet:
        AnswerValue(query.keys[0]);
        break;
      case Op::kMultiGet:
        for (const auto& key : query.keys) AnswerValue(key);
        break;
      case Op::kMultiSet:
        for (size_t i = 0; i < query.keys.size() && status.ok(); ++i) {
          status = store.Put(query.keys[i], std::move(query.values[i]));
        }
        break;
      case Op::kAdd: {
        auto sum = store.Add(query.keys[0], query.delta);
        status = sum.status();
        if (sum.ok()) torch_store::AppendI64(output_, *sum);
        break;
      }
      case Op::kCheck: {
        const bool ready = std::all_of(query.keys.begin(), query.keys.end(),
                                       [&](const std::string& key) { return store.Present(key); });
        torch_store::AppendU8(output_, ready ? torch_store::kReady : torch_store::kNotReady);
        break;
      }
      case Op::kWait:
        Wait(query.keys);
        break;
      case Op::kCancelWait:
        CancelWaits();
        torch_store::AppendU8(output_, torch_store::kWaitCanceled);
        break;
      case Op::kNumKeys:
        torch_store::AppendI64(output_, static_cast<int64_t>(store.keys()));
        break;
      case Op::kDeleteKey:
        torch_store::AppendI64(output_, store.Delete(query.keys[0]) ? 1 : 0);
        break;
      case Op::kAppend:
        status = store.Append(query.keys[0], query.values[0]);
        break;
      case Op::kPing:
        torch_store::AppendU32(output_, query.nonce);
        break;
      case Op::kQueuePush:
        status = store.QueuePush(query.keys[0], std::move(query.values[0]));
        break;
      case Op::kQueuePop: {
        // torch answers the length before the pop, then the item when there was one.
        torch_store::AppendI64(output_, static_cast<int64_t>(store.QueueLength(query.keys[0])));
        if (auto item = store.QueuePop(query.keys[0])) torch_store::AppendBytes(output_, *item);
        break;
      }
      case Op::kQueueLen:
        torch_store::AppendI64(output_, static_cast<int64_t>(store.QueueLength(query.keys[0])));
        break;
      case Op::kWatchKey:
        status = absl::UnimplementedError(
            "watch_key (torch 1.x's experimental key callbacks) is not served by gangrun's store");
        break;
      case Op::kValidate:
        break;  // never decoded as a query
    }
    if (!status.ok()) Close(std::string(torch_store::OpName(query.op)) + ": " + status.ToString());
  }

  // GET answers the empty value for a missing key, as torch's server does (its client waits
  // for the key first).
  void AnswerValue(const std::string& key) {
    KvStore& store = state_->store;
    store.Get(key, common::Duration::zero(), [this](absl::StatusOr<std::string> value) {
      torch_store::AppendBytes(output_, value.ok() ? *value : std::string());
    });
  }

  // WAIT: STOP_WAITING once every key is present. One KvStore wait per missing key.
  void Wait(const std::vector<std::string>& keys) {
    std::vector<std::string> missing;
    for (const auto& key : keys) {
      if (!state_->store.Present(key)) missing.push_back(key);
    }
    if (missing.empty()) {
      torch_store::AppendU8(output_, torch_store::kStopWaiting);
      return;
    }
    const uint64_t id = next_wait_++;
    waits_[id].remaining = missing.size();
    waits_[id].keys = missing;
    waits_[id].since = state_->clock.Now();
    state_->WaitBegan();
    std::weak_ptr<TorchConnection> weak = weak_from_this();
    for (const auto& key : missing) {
      const KvStore::WaitId wait_id =
          state_->store.Await(key, common::Duration(-1), [weak, id](absl::Status status) {
            auto self = weak.lock();
            if (!self) return;
            if (status.ok()) {
              self->OnKeyPresent(id);
            } else {
              self->OnWaitFailed(id, status);
            }
          });
      if (closed_) break;  // refused at once (the store's wait bound)
      auto pending = waits_.find(id);
      if (pending != waits_.end() && wait_id != 0) pending->second.ids.insert(wait_id);
    }
  }

  void OnKeyPresent(uint64_t id) {
    auto it = waits_.find(id);
    if (it == waits_.end() || --it->second.remaining > 0) return;
    waits_.erase(it);
    torch_store::AppendU8(output_, torch_store::kStopWaiting);
    Flush();
  }

  void OnWaitFailed(uint64_t id, const absl::Status& status) {
    if (waits_.count(id) == 0) return;
    if (status.code() == absl::StatusCode::kCancelled) {  // the job is over
      waits_.erase(id);
      return;
    }
    Close("wait: " + status.ToString());
  }

  void CancelWaits() {
    auto waits = std::move(waits_);
    waits_.clear();
    for (auto& [id, pending] : waits) {
      for (KvStore::WaitId wait_id : pending.ids) state_->store.CancelWait(wait_id);
    }
  }

  // Sends what the queries answered; a client that does not read its replies is closed.
  void Flush() {
    if (closed_) return;
    const size_t unsent = output_.size() + sending_.size();
    state_->buffered += unsent - accounted_;
    accounted_ = unsent;
    if (output_.size() > state_->max_unread_reply_bytes) {
      return Close("it leaves " + std::to_string(unsent) + " bytes of replies unread (at most " +
                   std::to_string(state_->max_unread_reply_bytes) + ")");
    }
    if (writing_ || output_.empty()) return;
    writing_ = true;
    sending_.swap(output_);
    auto self = shared_from_this();
    boost::asio::async_write(socket_, boost::asio::buffer(sending_),
                             [self](boost::system::error_code error, size_t) {
                               self->writing_ = false;
                               if (self->closed_) return;
                               self->state_->buffered -= self->sending_.size();
                               self->accounted_ -= self->sending_.size();
                               self->sending_.clear();
                               if (error) return self->Close("");
                               self->Flush();
                             });
  }

  struct PendingWait {
    size_t remaining = 0;
    std::set<KvStore::WaitId> ids;
    std::vector<std::string> keys;  // the keys awaited that were missing
    common::TimePoint since;
  };

  std::shared_ptr<TorchStore::State> state_;
  tcp::socket socket_;
  std::string peer_;
  std::string input_;
  torch_store::Dialect dialect_ = torch_store::Dialect::kUnknown;
  size_t wanted_ = 0;     // the partial query at the start of input_ needs this many bytes
  std::string output_;    // replies not yet handed to the socket
  std::string sending_;   // what async_write holds
  size_t accounted_ = 0;  // output_ and sending_ as counted in state_->buffered
  bool writing_ = false;
  bool closed_ = false;
  uint64_t next_wait_ = 1;
  std::map<uint64_t, PendingWait> waits_;
};

void TorchStore::State::Said(const std::string& line) {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_line < kRefusalLinePeriod) {
    ++unsaid;
    return;
  }
  last_line = now;
  common::Logger("scheduler")
      ->warn("{}{}", line,
             unsaid == 0 ? std::string()
                         : " (and " + std::to_string(unsaid) + " more since the last such line)");
  unsaid = 0;
}

void TorchStore::State::Accept() {
  acceptor.async_accept(
      [self = shared_from_this()](boost::system::error_code error, tcp::socket socket) {
        if (error == boost::asio::error::operation_aborted || !self->acceptor.is_open()) return;
        if (error) {
          // Out of descriptors, say: accepting again at once would spin. Waits kAcceptRetry.
          self->Said("torch store: cannot accept a connection: " + error.message());
          self->accept_retry = self->clock.After(kAcceptRetry, [weak = self->weak_from_this()] {
            if (auto state = weak.lock()) state->Accept();
          });
          return;
        }
        if (self->connections.size() >= self->max_connections) {
          self->Said("torch store: a connection refused: " + std::to_string(self->max_connections) +
                     " are open (its bound)");
        } else {
          auto connection = std::make_shared<TorchConnection>(self, std::move(socket));
          self->connections.insert(connection);
          connection->Read();
        }
        self->Accept();
      });
}

void TorchStore::State::WaitBegan() {
  if (long_wait_check || !on_long_wait || report_after <= common::Duration::zero()) return;
  long_wait_check = clock.After(report_after / 4, [this] { CheckLongWaits(); });
}

void TorchStore::State::CheckLongWaits() {
  auto self = shared_from_this();  // the report may end the job, and the store with it
  long_wait_check.reset();
  const common::TimePoint now = clock.Now();
  std::set<std::string> keys;
  common::TimePoint oldest = now;
  size_t waits = 0;
  bool any = false;
  for (const auto& connection : connections) {
    any = any || connection->waiting();
    waits += connection->OldWaits(now - report_after, keys, oldest);
  }
  if (!keys.empty()) {
    LongWait wait;
    for (const auto& key : keys) {
      if (wait.keys.size() == kMaxReportedKeys) break;
      wait.keys.push_back(key);
    }
    wait.waits = waits;
    wait.waited = now - oldest;
    if (wait.keys != reported_keys) {
      reported_keys = wait.keys;
      // May stop the job and destroy the store: `self` keeps this state, and a destroyed store
      // has cleared on_long_wait, so WaitBegan arms nothing then.
      on_long_wait(wait);
      return WaitBegan();
    }
  }
  if (any) WaitBegan();
}

size_t TorchStore::ConnectionBound(uint64_t file_limit) {
  return static_cast<size_t>(std::clamp<uint64_t>(file_limit / 2, 64, 131072));
}

absl::StatusOr<std::unique_ptr<TorchStore>> TorchStore::Start(boost::asio::io_context& io,
                                                              common::Clock& clock, KvStore& store,
                                                              Options options) {
  auto listener = rpc::OpenListener(io, common::JoinHostPort(options.listen_host, options.port));
  if (!listener.ok()) return listener.status();
  std::unique_ptr<TorchStore> server(new TorchStore());
  server->state_ = std::make_shared<State>(io, clock, store);
  server->state_->report_after = options.report_waits_after;
  server->state_->acceptor = std::move(*listener);
  server->state_->max_connections =
      options.max_connections != 0 ? options.max_connections : ConnectionBound(rpc::FileLimit());
  server->state_->max_unread_reply_bytes = options.max_unread_reply_bytes;
  server->state_->Accept();
  return server;
}

TorchStore::~TorchStore() {
  state_->long_wait_check.reset();
  state_->accept_retry.reset();
  state_->on_long_wait = nullptr;
  boost::system::error_code ignored;
  state_->acceptor.close(ignored);
  auto connections = state_->connections;
  for (const auto& connection : connections) connection->Close("");
}

int TorchStore::port() const {
  boost::system::error_code ignored;
  return state_->acceptor.local_endpoint(ignored).port();
}

void TorchStore::SetOnLongWait(std::function<void(const LongWait&)> on_long_wait) {
  state_->on_long_wait = std::move(on_long_wait);
}

size_t TorchStore::connections() const { return state_->connections.size(); }

void TorchStore::ForgetAttemptsBefore(int restart_count) {
  for (; state_->forgotten_below < restart_count; ++state_->forgotten_below) {
    state_->store.DeletePrefix(AttemptPrefix(state_->forgotten_below));
  }
}

}  // namespace gangrun::scheduler
