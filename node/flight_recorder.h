#pragma once
// Torch's NCCL flight recorder, armed for every worker and dumped at a hang.
//
// Arming: a worker's environment gets a trace buffer (TORCH_FR_BUFFER_SIZE and its older
// name TORCH_NCCL_TRACE_BUFFER_SIZE, 2000 entries), a dump trigger (TORCH_FR_DEBUG_INFO_PIPE_FILE
// and TORCH_NCCL_DEBUG_INFO_PIPE_FILE) and a dump file prefix (TORCH_FR_DUMP_TEMP_FILE and
// TORCH_NCCL_DEBUG_INFO_TEMP_FILE) in the node's runtime directory, each only when the user
// set neither name. Torch's ProcessGroupNCCL makes the pipe <trigger prefix><rank>.pipe and
// dumps to <dump prefix><rank> when something is written to it; without NCCL (gloo, no
// GPU) nothing reads the variables and nothing happens.
//
// Collecting (at a hang, before the job is stopped): every rank's pipe gets a byte (a pipe
// with no reader is skipped at once), and each dump that appears and stops growing within
// the timeout is copied beside the rank's log as <log name>.flight_recorder (bounded to
// kMaxDumpBytes). Whatever the user's prefixes are, the dumps are looked for where the
// worker's environment says they go.
//
// Runs on the io_context's thread (the node's strand).

#include <sys/stat.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace gangrun::node {

class FlightRecorder {
 public:
  static constexpr int kTraceEntries = 2000;
  static constexpr size_t kMaxDumpBytes = 64 << 20;

  // One rank's dump: where to trigger it, where torch writes it, where it is kept.
  struct Target {
    int rank = 0;
    std::string pipe;
    std::string dump;
    std::string destination;
  };

  // Makes `runtime_dir`/flight.
  static absl::StatusOr<std::unique_ptr<FlightRecorder>> Create(boost::asio::io_context& io,
                                                                const std::string& runtime_dir);
  ~FlightRecorder();

  void AddWorkerEnv(std::vector<std::string>& env) const;
  // The rank's target, from its environment (nullopt: no trigger, or no log to put it beside).
  static std::optional<Target> TargetOf(const std::vector<std::string>& env, int rank,
                                        const std::string& log_path);
  // Triggers and collects every target's dump; `done` gets rank -> kept path for the dumps
  // that came, by `timeout` at the latest.
  void Collect(std::vector<Target> targets, common::Duration timeout,
               std::function<void(std::map<int, std::string>)> done);

 private:
  struct Session;
  FlightRecorder(boost::asio::io_context& io, std::string dir) : io_(io), dir_(std::move(dir)) {}
  void Poll(const std::shared_ptr<Session>& session);
  void Finish(const std::shared_ptr<Session>& session);

  boost::asio::io_context& io_;
  std::string dir_;
  std::vector<std::shared_ptr<Session>> sessions_;
};

}  // namespace gangrun::node
