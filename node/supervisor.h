#pragma once
// A node's supervision of its workers: their GANGRUN_PROGRESS reports, the hang rules the
// scheduler gives with each generation, torch FileTimers (TORCHELASTIC_TIMER_FILE), and stack
// capture (at a hang, or on request). It owns the progress tracker, the torch timers, the hang
// and timer checks and the ranks' local names; it reaches its node through Owner alone, and a
// test gives it a fake owner. The node calls its verbs: a generation starts (StartGeneration),
// a worker is added before its spawn (AddWorker) and removed once gone (RemoveWorker), reports
// are taken at each heartbeat (SendProgress), stacks are captured when the scheduler asks
// (CaptureStacks), and it stops when the node finishes. The workers' channels
// (node/worker_channels.h) deliver their reports to it directly (Supervision::report_to).
//
// Runs on the node's strand.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/check.h"
#include "common/clock.h"
#include "gangrun/v1/session.pb.h"
#include "node/file_timer.h"
#include "node/process_backend.h"
#include "node/progress.h"
#include "node/stacks.h"

namespace gangrun::node {

class FlightRecorder;
class Supervisor;

// What a node's workers report to and how their stacks are taken; every part may be missing
// (tests).
struct Supervision {
  // GANGRUN_PROGRESS of the worker with this local rank, ready for its reports (made on first
  // use, just before the worker's spawn). On an error the worker runs without one (a warning),
  // or, when the generation has hang rules, fails to start.
  std::function<absl::StatusOr<std::string>(int local_rank)> progress_path;
  std::string timer_file;  // TORCHELASTIC_TIMER_FILE ("" = none)
  // TORCHELASTIC_ERROR_FILE of the worker with this local rank (unset: none).
  std::function<std::string(int local_rank)> error_file;
  StackSampler* stacks = nullptr;
  FlightRecorder* flight_recorder = nullptr;  // torch's NCCL flight recorder, dumped at a hang
  // Wall-clock seconds (torch timers are absolute wall-clock times).
  std::function<double()> wall_now;
  // Sends a signal to a process (unset: kill(2)).
  std::function<void(pid_t, int)> signal_process;
  // A process's start time, which tells a pid's process from a later one (unset: /proc).
  FileTimers::StartTimeOf process_start_time;
  // Reads the progress reports the worker of this local rank sent and were not read yet.
  std::function<void(int local_rank)> read_progress;
  // Where the channels deliver the workers' reports from now on (nullptr: nowhere); the
  // Supervisor sets itself while it lives.
  std::function<void(Supervisor*)> report_to;
};

class Supervisor {
 public:
  // The supervisor's way to its node.
  class Owner {
   public:
    virtual ~Owner() = default;
    // Sends an event to the scheduler (as the node's own: held while detached).
    virtual void Send(v1::NodeEvent event) = 0;
    // This generation's processes that run, by pid (nullptr before the first generation).
    virtual const std::map<pid_t, ProcessSpec>* Running() const = 0;
    virtual uint64_t generation() const = 0;
  };

  Supervisor(common::Clock& clock, Owner& owner, Supervision parts);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // A generation's supervision starts afresh, under its progress rules.
  void StartGeneration(const v1::StartGeneration& start);
  // A worker of the generation, just before its spawn: its GANGRUN_PROGRESS, timer file,
  // error file and the stack hook's variables go into its environment. An error (its progress
  // socket could not be made while the generation has hang rules) fails its start.
  absl::Status AddWorker(const v1::StartGeneration& start, ProcessSpec& spec);
  // A worker is gone (it exited or could not start; pid 0 when it never ran). With
  // `read_last`, the reports it sent before it exited are read and sent first.
  void RemoveWorker(const ProcessSpec& spec, pid_t pid, bool read_last);
  // Sends the ranks' progress changed since the last call (every heartbeat).
  void SendProgress();
  // The scheduler asked for the stacks of this node's ranks (request 0: a hang's).
  void CaptureStacks(const v1::CaptureStacks& capture);
  // The node finished: nothing more is checked or sent.
  void Stop();

  // A GANGRUN_PROGRESS datagram on the socket of `local_rank`, from process `sender` (0:
  // unknown). Dropped when the sender is another rank's worker or one of its processes, or,
  // once this rank's worker is known to run, a process that is not of it.
  void OnProgressDatagram(int local_rank, pid_t sender, absl::string_view datagram);
  // A line from the TORCHELASTIC_TIMER_FILE pipe.
  void OnTimerLine(absl::string_view line);

 private:
  struct StackCapture;
  void ArmHangCheck();
  void CheckHangs();
  void SaySilentRanks();
  void ArmTimerCheck();
  void SayRefusedTimers();
  void CheckTimers();
  void OnStacksCaptured(StackCapture& capture);
  // The rank whose worker is `pid` or one of its descendants; nullopt if none of ours.
  std::optional<int> RankOfPid(pid_t pid) const;
  // `sender` may report for `rank` (OnProgressDatagram).
  bool MayReportFor(int rank, pid_t sender) const;

  common::Clock& clock_;
  Owner& owner_;
  Supervision parts_;
  bool stopped_ = false;
  std::unique_ptr<ProgressTracker> progress_;  // this generation's
  std::map<int, int> rank_of_local_;           // this generation's local rank -> rank
  std::unique_ptr<common::Timer> hang_timer_;
  std::optional<common::TimePoint> hang_check_at_;
  bool hang_reported_ = false;  // this generation's first hang went to the scheduler
  FileTimers timers_;
  std::unique_ptr<common::Timer> timer_check_;
  std::optional<double> timer_check_for_;  // the expiration timer_check_ is armed for
  uint64_t refused_timers_ = 0;
  uint64_t malformed_timer_lines_ = 0;
  // Senders whose progress for another rank was refused, each warned about once; at most
  // kMaxRefusedSenders remembered (then no more warnings).
  static constexpr size_t kMaxRefusedSenders = 64;
  std::set<pid_t> refused_senders_;
  common::ThreadAffinity strand_;  // the node's: the channels' deliveries check it
};

}  // namespace gangrun::node
