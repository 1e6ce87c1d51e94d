#pragma once
// The job's torch store (--agent_store True): torch's TCPStore protocol
// (scheduler/torch_store_protocol.h, torch 1.x and 2.x) served from the job's key-value store
// (scheduler/kv_store.h) on a port of its own, where the scheduler listens. The workers get its
// address as MASTER_ADDR:MASTER_PORT with TORCHELASTIC_USE_AGENT_STORE=True, so
// init_process_group connects to it instead of a TCPStore hosted by rank 0: the store outlives a
// generation's workers, as torchrun's agent store does, and torch's clients prefix their keys
// with the restart count (`/worker/attempt_<n>`), which ForgetAttempt drops.
//
// Bounded, because anything that reaches the port may connect (torch's protocol has no
// authentication; the port is where the scheduler listens, as torch's own store is where rank
// 0 runs): at most `max_connections` connections (past it a new one is closed, said once a
// minute), each buffering at most one query (torch_store_protocol.h's kMaxQueryBytes) and
// `max_unread_reply_bytes` of replies its client has not read; all connections together buffer
// at most kMaxBufferedBytes. The store's own bounds (bytes, pending waits) hold as for gRPC calls.
// A connection that passes a bound, sends what torch does not, or asks what the store refuses
// (a full store) is closed alone, with one line saying why; the others go on.
//
// Everything runs on the io_context (the scheduler's strand), which one thread runs.

#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "scheduler/kv_store.h"

namespace gangrun::scheduler {

class TorchStore {
 public:
  struct Options {
    std::string listen_host;     // the scheduler's host (an address or a name)
    int port = 0;                // 0: any free port
    size_t max_connections = 0;  // 0: from the file limit (ConnectionBound)
    // Replies a client has not read, at most, per connection.
    size_t max_unread_reply_bytes = size_t{64} << 20;
    // Waits older than this are reported (SetOnLongWait); zero: never.
    common::Duration report_waits_after = std::chrono::seconds(60);
  };
  // Ranks that have waited past Options::report_waits_after for keys nobody has set: the keys
  // (at most kMaxReportedKeys, sorted), how many waits, the oldest's age.
  struct LongWait {
    std::vector<std::string> keys;
    size_t waits = 0;
    common::Duration waited{};
  };
  static constexpr size_t kMaxReportedKeys = 64;
  static constexpr size_t kMaxBufferedBytes = size_t{512} << 20;

  static absl::StatusOr<std::unique_ptr<TorchStore>> Start(boost::asio::io_context& io,
                                                           common::Clock& clock, KvStore& store,
                                                           Options options);
  // Closes every connection and cancels their waits in the store.
  ~TorchStore();
  TorchStore(const TorchStore&) = delete;
  TorchStore& operator=(const TorchStore&) = delete;

  int port() const;
  // Called, on the strand, when waits pass the report bound: checked every quarter of the bound
  // while any wait is pending, so a wait is reported between 1 and 1.25 bounds after it began;
  // the same keys are reported once.
  void SetOnLongWait(std::function<void(const LongWait&)> on_long_wait);
  size_t connections() const;
  // A new generation's restart count: the keys torch's clients wrote under the attempts before
  // it go (torch's agent store keeps them for the job's life; a long job restarted many times
  // would fill the store).
  void ForgetAttemptsBefore(int restart_count);

  // file limit / 2 (64..131072): a connection costs a descriptor; the rest stay for the job.
  static size_t ConnectionBound(uint64_t file_limit);

  struct State;

 private:
  TorchStore() = default;
  std::shared_ptr<State> state_;
};

}  // namespace gangrun::scheduler
