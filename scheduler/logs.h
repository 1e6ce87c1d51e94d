#pragma once
// `gangrun logs`, the scheduler's half: a component of the scheduler (scheduler/node_directory.h)
// that owns the open log streams. Each stream reads its ranks' logs from their nodes piece by
// piece (ReadLog -> LogRead), at most kLogsInFlight pieces ahead of what the client has taken,
// one read per rank at a time (a rank's pieces stay in order), round-robin over the ranks.
// The sink gets one chunk at a time, and the next only after Written: a slow client slows the
// reads. On the scheduler's strand.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "gangrun/v1/logs.pb.h"
#include "scheduler/node_directory.h"

namespace gangrun::scheduler {

// Where a stream's chunks go (scheduler/logs_stream.h: a gRPC call).
class LogsSink {
 public:
  virtual ~LogsSink() = default;
  virtual void Write(v1::LogChunk chunk) = 0;
  virtual void Finish(absl::Status status) = 0;  // the last call
};

// What serves `gangrun logs` streams: a running job's scheduler (its LogsPump), or a daemon's
// reader of an ended job's logs on its agents (daemon/ended_logs.h). On its strand.
class LogsSource {
 public:
  virtual ~LogsSource() = default;
  // A new stream (LogsPump::Open's errors); its id.
  virtual absl::StatusOr<uint64_t> OpenLogs(const v1::LogsRequest& request,
                                            std::shared_ptr<LogsSink> sink) = 0;
  // The sink has written the last chunk it got: it gets the next.
  virtual void LogsWritten(uint64_t id) = 0;
  // The client went away: the sink is called no more.
  virtual void CloseLogs(uint64_t id) = 0;
};

class LogsPump {
 public:
  // Pieces read ahead per stream, each at most kLogPieceBytes; streams open at once.
  static constexpr int kLogsInFlight = 4;
  static constexpr uint32_t kLogPieceBytes = 64 * 1024;
  static constexpr int kMaxLogStreams = 16;

  LogsPump(NodeDirectory& nodes, common::Clock& clock) : nodes_(nodes), clock_(clock) {}
  // Every stream still open is finished ("the job has ended").
  ~LogsPump();
  LogsPump(const LogsPump&) = delete;
  LogsPump& operator=(const LogsPump&) = delete;

  // A new stream of the request's ranks (all of them when it names none) of the current
  // generation; its id. FailedPrecondition before any rank has a log, InvalidArgument for a
  // rank the generation does not have, Unavailable when kMaxLogStreams are open.
  absl::StatusOr<uint64_t> Open(const v1::LogsRequest& request, std::shared_ptr<LogsSink> sink);
  // The sink has written the last chunk it got: it gets the next.
  void Written(uint64_t id);
  // The client went away: the sink is called no more.
  void Close(uint64_t id);

  // The core's routing: a node's answer to a ReadLog.
  void OnLogRead(int node_id, const v1::LogRead& read);
  // A rank exited: streams following it read the rest of its log now, while its node is
  // certainly there.
  void ReadRestOf(int rank);
  // The job has ended: nothing is followed any more (each stream ends at its logs' ends).
  void EndFollowing();

 private:
  struct RankLog {
    int node_id = 0;
    std::string host;
    int64_t offset = -1;  // -1: not read yet
    bool asked = false;   // a ReadLog is out
    common::TimePoint asked_at;
    common::TimePoint again_at;  // --follow at the end of the log: read again then
    int retries = 0;             // reads asked for again in a row
    bool done = false;
  };
  struct Stream {
    uint64_t id = 0;
    std::shared_ptr<LogsSink> sink;
    bool follow = false;
    int64_t tail_lines = 0;
    std::map<int, RankLog> ranks;
    int next_rank = 0;  // where the round-robin of reads goes on
    std::deque<v1::LogChunk> ready;
    bool writing = false;
    int in_flight = 0;
    std::unique_ptr<common::Timer> timer;
  };

  void Pump(uint64_t id);
  void Ask(Stream& stream, int rank, RankLog& log);
  void ArmTimer(Stream& stream);

  NodeDirectory& nodes_;
  common::Clock& clock_;
  std::map<uint64_t, Stream> streams_;  // by id
  uint64_t opened_ = 0;                 // streams ever opened: the next id
};

}  // namespace gangrun::scheduler
