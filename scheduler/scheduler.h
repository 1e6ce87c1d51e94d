#pragma once
// The scheduler (meta-server): membership, rendezvous and rank assignment, generations,
// abort fan-out and the job's outcome. Transports (an in-process link for the master's own
// node, a resumable session per node otherwise: scheduler/node_session.h) call AddNode /
// OnNodeEvent / OnNodeDisconnected and deliver the NodeCommands it sends through each node's
// NodeLink.
//
// An actor: all of its state is touched only on the io_context's single thread (its strand),
// checked at every entry point. Links must outlive it or be removed with OnNodeDisconnected
// first. The core (docs/ARCHITECTURE.md) keeps the job's state (scheduler/job_state.h: the
// table of its edges), its membership and its nodes (scheduler/core_records.h); its part
// files' declarations are grouped below under their names. Its components own their state
// behind their own headers and reach it through NodeDirectory (scheduler/node_directory.h).

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/clock.h"
#include "gangrun/v1/progress.pb.h"
#include "gangrun/v1/session.pb.h"
#include "nlohmann/json.hpp"
#include "rpc/connection_activity.h"
#include "scheduler/core_records.h"
#include "scheduler/formation.h"
#include "scheduler/hang_capture.h"
#include "scheduler/health_rounds.h"
#include "scheduler/job_state.h"
#include "scheduler/ledger.h"
#include "scheduler/liveness.h"
#include "scheduler/logs.h"
#include "scheduler/node_directory.h"
#include "scheduler/node_link.h"
#include "scheduler/peer_checks.h"
#include "scheduler/rank_assignment.h"
#include "scheduler/restarts.h"
#include "scheduler/scheduler_options.h"
#include "scheduler/spare_pool.h"
#include "scheduler/stacks_request.h"
#include "scheduler/telemetry.h"
#include "scheduler/time_limit.h"

namespace gangrun::scheduler {

// The core. Its components reach it through NodeDirectory alone (the ledger and the spare pool
// need only what the core tells them); it routes to each the node events that answer it.
class TorchStore;

class Scheduler : private NodeDirectory, public LogsSource {
 public:
  using Options = SchedulerOptions;  // scheduler/scheduler_options.h

  Scheduler(common::Clock& clock, Options options);
  ~Scheduler();

  void Start();  // arms the formation timeout and the heartbeat sweep
  // A launcher at `peer` (HOST:PORT) was refused at its session's opening, for `why` (its
  // token, its TLS): said in the wait's lines and the formation's failure.
  void NoteRefused(const std::string& peer, const std::string& why);
  int AddNode(NodeLink* link);
  void OnNodeEvent(int node_id, const v1::NodeEvent& event);
  void OnNodeDisconnected(int node_id);
  void SetOnFinished(std::function<void(const v1::JobOutcome&)> on_finished) {
    owner_.on_finished = std::move(on_finished);
  }
  // Each decision a job's owner should read where they are (a daemon sends it to the job's
  // submit): why a generation ended and whether it is restarted, once per generation.
  void SetOnNote(std::function<void(const std::string&)> on_note) {
    owner_.on_note = std::move(on_note);
  }
  // The job's record for a store, at every generation start and at the end (JSON:
  // generation, restarts_used, restarts_forgiven when any, max_restarts, world_size,
  // min_world_size, members, outcome).
  void SetOnRecord(std::function<void(nlohmann::json)> on_record) {
    owner_.on_record = std::move(on_record);
  }
  // A failure this job puts on a node's agent (a daemon's job; JoinRequest.agent): the node
  // was lost or excluded, with why. Not for nodes without an agent, nor after a stop request.
  void SetOnBlame(std::function<void(const std::string& agent, const std::string& why)> on_blame) {
    owner_.on_blame = std::move(on_blame);
  }
  uint64_t generation() const override { return generation_; }
  common::Duration node_timeout() const { return options_.node_timeout; }
  // The scheduler's time, which its links' timestamps (NodeLink::LastHeartbeat) follow.
  common::TimePoint Now() const { return clock_.Now(); }
  v1::GetStatusResponse Status() const;
  // Events and counters go here (the event log and /metrics); may stay unset.
  void SetTelemetry(Telemetry* telemetry) { owner_.telemetry = telemetry; }
  // The job's torch store (--agent_store True): its port goes to every node with each
  // generation, and a generation's start drops the keys of the attempts before it.
  // Ranks that wait there past its bound for keys nobody set are named (OnTorchStoreWait).
  void SetTorchStore(TorchStore* store);
  // `gangrun stop`, a daemon's job being cancelled: as if a launcher had got `signal`.
  void Stop(int signal, const std::string& reason);
  bool finished() const { return state_ == JobState::kFinished; }
  JobState state() const override { return state_; }
  // How the scheduler reads the activity of connections their links cannot read (gRPC's:
  // rpc::ConnectionActivityReader); unset, their Heartbeat messages alone. On the strand.
  using ActivityReader = Liveness::ActivityReader;
  void WatchConnections(ActivityReader reader);
  // `gangrun scale`: sets the elastic job's maximum size. Below the current size, the
  // newest nodes are released and the job re-forms. Refuses sizes below the minimum.
  absl::Status Scale(int target);
  // `gangrun stacks` (scheduler/stacks_request.h): the stacks of every rank (or of
  // request.ranks) of the running generation; `done` is called once, on the strand.
  using StacksDone = StacksRequests::Done;
  void RequestStacks(const v1::StacksRequest& request, StacksDone done);

  // `gangrun logs` (scheduler/logs.h): the ranks' logs, pulled piece by piece from the nodes
  // that hold them, as fast as the sink takes them.
  absl::StatusOr<uint64_t> OpenLogs(const v1::LogsRequest& request,
                                    std::shared_ptr<LogsSink> sink) override;
  void LogsWritten(uint64_t id) override;
  // The client went away: the sink is called no more.
  void CloseLogs(uint64_t id) override;

 private:
  // adoption.cc
  struct Adoption;
  void OnResume(KnownNode& node, const v1::JoinRequest& join);
  void CompleteAdoption(const std::string& missing);
  void ArmAdoption();
  std::unique_ptr<Adoption> adoption_;
  // joins.cc
  void OnJoin(int node_id, KnownNode& node, const v1::JoinRequest& join);
  // What a member or a spare keeps of its join beyond its place (ports, pid, domain, agent).
  void TakeJoinFacts(KnownNode& node, const v1::JoinRequest& join) const;
  absl::Status CheckJoinAllowed(const KnownNode& node, const v1::JoinRequest& join) const;
  void Reject(KnownNode& node, const v1::JoinRequest& join, const absl::Status& why);
  // Refuses, alone, the nodes whose explicit node rank the job's final node count cannot
  // reach; true if any was refused (the job then waits for the right nodes).
  bool RejectUnreachableNodeRanks();
  // Checks a joined node's event; false (with a warning) for one that must be ignored.
  bool CheckEvent(const KnownNode& node, const v1::NodeEvent& event) const;
  // generation.cc
  void Form();
  void StartGeneration();
  void OnWorkerStarted(KnownNode& node, const v1::WorkerStarted& started);
  void OnWorkerExited(KnownNode& node, const v1::WorkerExited& exited);
  void OnLogOutputLost(const KnownNode& node, const v1::WorkerExited& exited);
  void OnGenerationEnded(KnownNode& node);
  // kRunning -> kStopping: tells every node to stop (a repeat keeps the first reason).
  void BeginStopping(StopReason reason);
  // Every node has ended: decides what comes next (the kStopping row of the table).
  void MaybeGenerationOver();
  void AbortAll(const std::string& reason);
  void Finish(v1::JobOutcome outcome);
  void SendTo(KnownNode& node, v1::NodeCommand command);
  // The last command a node gets on this connection (finished, rejected).
  void SendAndClose(KnownNode& node, v1::NodeCommand command);
  // progress.cc
  void OnProgress(KnownNode& node, const v1::ProgressReport& report);
  void OnRankHung(KnownNode& node, const v1::RankHung& hung);
  // Ranks have waited `waited` in the job's torch store for `keys`, which no rank has set: the
  // ranks the keys name are said, and with a hang rule (--hang_timeout), while no rank has made
  // progress (the start-up), the job stops as hung.
  void OnTorchStoreWait(const std::vector<std::string>& keys, size_t waits,
                        common::Duration waited);
  void OnTimerExpired(KnownNode& node, const v1::TimerExpired& expired);
  void OnStacksCaptured(int node_id, const v1::StacksCaptured& captured);
  // The hang capture's verdict: kCapturing -> kStopping(hung).
  void OnHangJudged(HangVerdict verdict);
  // A rank failed while running: the job's silence before it, past a few of its usual steps,
  // was a stall (no hang rule caught it: a collective's timeout ended it), not training.
  void ReclassifyStall();
  // NodeDirectory, for the components (scheduler.cc).
  std::map<int, Place> RankPlaces() const override;
  std::string HostOf(int node_id) const override;
  bool Reachable(int node_id) const override;
  void Send(int node_id, v1::NodeCommand command) override;
  int world_size() const override { return options_.world_size; }
  // Progress ages, straggler flags and the median step time, as of now.
  void AddProgress(v1::GetStatusResponse& status) const;
  // The one writer of state_: checks the edge against the table (scheduler/job_state.h) and
  // records the transition.
  void Enter(JobState to, std::string_view why);
  // A generation's workers run, or are being captured before the stop.
  bool Live() const { return state_ == JobState::kRunning || state_ == JobState::kCapturing; }
  // Waiting for nodes: the first time, or for a lost node's replacement.
  bool Forming() const {
    return state_ == JobState::kForming || state_ == JobState::kAwaitingReplacement;
  }
  // recovery.cc
  void AfterFailedGeneration(bool worker_failed);
  void ScheduleRestart();
  void WaitForReplacement();
  void OnFormationTimeout();
  // Membership changed while a generation ran: stop it and form again (no budget used).
  void Reform(const std::string& why);
  void Release(int node_id, const std::string& why);
  bool Elastic() const { return min_world() < options_.world_size; }
  int min_world() const {
    return options_.min_world_size > 0 ? options_.min_world_size : options_.world_size;
  }
  // Liveness (scheduler/liveness.h): what a node is to the heartbeat sweep.
  Liveness::Standing StandingOf(int node_id) const;
  // The core forgets a node (it left, was refused, closed): every component forgets it too.
  void Forget(int node_id);
  void OnSilent(int node_id, const std::string& why);
  void CloseUnjoined(int node_id);
  // scheduler.cc
  void OnNodeLost(int node_id, KnownNode& node, FailureCause cause, const std::string& why);
  // The error line, the failure count and the node_lost event of a lost node.
  void RecordLoss(const KnownNode& node, FailureCause cause, const std::string& why);
  // The failure is the node's agent's (SetOnBlame).
  void Blame(const KnownNode& node, const std::string& why);
  // spares.cc
  // Whether this join, which has no place in the job, may wait as a spare.
  bool JoinsAsSpare(const KnownNode& node, const v1::JoinRequest& join) const;
  void AdmitSpare(KnownNode& node, const v1::JoinRequest& join);
  // Gives `gone`'s place (its node rank and ranks) to a spare with as many workers; false if
  // none has, and after generation 1 the place is kept as a hole that the next spare to come
  // fills (FillHoles). `gone` must already be out of the membership.
  // A `lost` node's place (not an excluded one's) is first held for --rejoin_window (HoldPlace).
  bool TakeSpareFor(const KnownNode& gone, bool lost = false);
  // Keeps the place as a hole no spare takes before the window ends (a launcher that joins
  // meanwhile takes it, with its node rank); then FillHoles gives it to a spare.
  void HoldPlace(SparePool::Hole place, const KnownNode& gone);
  void ArmRejoin(common::Duration in);
  std::unique_ptr<common::Timer> rejoin_timer_;  // the earliest hold's end
  bool TakeSpare(const SparePool::Hole& place, const KnownNode* except);
  // A spare that came after a place was left empty takes it (and, forming, the job forms);
  // `end_holds`: the places held for a launcher too (the wait for nodes is over).
  void FillHoles(bool end_holds = false);
  // Every member keeps the node rank it has (a spare's promotion must not move anyone).
  void PinNodeRanks(const KnownNode* except);
  // Takes the node out of the job (it is told why; its launcher exits 6). True if that left a
  // place nobody took: no spare had as many workers and the job cannot shrink.
  bool Exclude(int node_id, FailureCause cause, const std::string& why);
  // What ended the generation being stopped, in a phrase ("rank 3 on h1 exited with code 7
  // (log: ...)"), and the owner's note of it with what follows ("restarting in 1 s ...").
  std::string EndedWhy() const;
  void NoteEnded(const std::string& then);
  // Health rounds: before a generation after the first, every member and spare that has a
  // --health_check runs it; the generation starts once all answered. False when nothing
  // needs checking (or the round for the next generation is done).
  bool AwaitHealth();
  void OnHealthChecked(KnownNode& node, const v1::HealthChecked& checked);
  // A fixed-size job has all its workers; an elastic one at least its minimum.
  bool MembershipComplete() const;
  // signals.cc
  // The time limit passed (scheduler/time_limit.h): the job stops.
  void OnTimeLimit(const std::string& why);
  void OnForwardSignal(const KnownNode& from, int signal);
  // Sends `signal` to every worker of every member.
  void SignalWorkers(int signal, const std::string& why);
  // job_status.cc
  void LogProgress();
  // Formation::WaitingLine of the joined nodes.
  std::string WaitingLine() const;
  void RemindWaiting(const std::string& left);
  std::string Describe(const KnownNode& node) const;
  void OnStopRequest(const v1::StopRequest& request);
  // The outcome if the job ended now.
  v1::JobOutcome CurrentOutcome() const;
  void Record(Event event, nlohmann::json fields = nlohmann::json::object()) override {
    if (owner_.telemetry != nullptr) owner_.telemetry->Record(event, std::move(fields));
  }
  void CountFailure(FailureCause cause) {
    ++failures_[static_cast<size_t>(cause)];
    if (owner_.telemetry != nullptr) owner_.telemetry->CountFailure(cause);
  }

  common::Clock& clock_;
  Options options_;
  JobIdentity identity_;  // what a joining node must agree with (as configured)
  common::ThreadAffinity strand_;
  JobState state_ = JobState::kForming;
  std::optional<StopReason> stopping_;             // kStopping: why
  std::optional<v1::StopRequest> stop_requested_;  // nothing restarts or re-forms after one
  common::TimePoint started_at_;
  std::array<uint64_t, static_cast<size_t>(FailureCause::kCount)> failures_{};
  std::string lost_node_;            // kAwaitingReplacement (and on the way there): what was lost
  bool membership_changed_ = false;  // elastic: re-form when the generation is over
  uint64_t generation_ = 0;
  int next_node_id_ = 1;
  std::map<int, KnownNode> nodes_;
  int ended_scan_from_ = 0;  // MaybeGenerationOver: every node below this id has ended
  Membership membership_;    // the joined nodes, for O(log n) join checks
  std::unique_ptr<common::Timer> restart_timer_;
  std::unique_ptr<common::Timer> fence_timer_;  // Form() again once the lease is confirmed
  // The running generation's workers, job-wide.
  struct Tally {
    int world = 0;      // the generation's size
    int started = 0;    // workers that have started
    int succeeded = 0;  // exited 0 on their own
    std::vector<int> stopped;
  } tally_;
  std::set<std::string> log_warnings_;  // lost worker log output, for the outcome
  // When the last failure was heard of, and in which generation.
  std::optional<std::pair<uint64_t, common::TimePoint>> failed_at_;
  common::TimePoint last_progress_log_;
  std::string last_note_;  // the last NoteEnded, for Status (GetStatusResponse.last_generation_end)
  // Who hears of the job as it goes (the setters above).
  struct Owner {
    std::function<void(const v1::JobOutcome&)> on_finished;
    std::function<void(const std::string&)> on_note;
    std::function<void(nlohmann::json)> on_record;
    std::function<void(const std::string&, const std::string&)> on_blame;
    Telemetry* telemetry = nullptr;
    TorchStore* torch_store = nullptr;
  } owner_;
  void WriteRecord() const;                // job_status.cc
  std::optional<v1::JobOutcome> outcome_;  // kFinished
  struct Timing {
    // Since when the scheduler has been bringing up the next generation (for the rendezvous
    // latency), and when the running one was told to abort (for the stop latency).
    common::TimePoint requested_at;
    std::optional<common::TimePoint> abort_sent_at;
  } timing_;
  // The components, last: destroyed first, while the core they reach is whole. Each is
  // constructed (scheduler.cc) with what it is told of the job and the core's callbacks.
  Formation formation_;  // the wait for nodes
  LogsPump logs_;
  StacksRequests stacks_requests_;
  HangCapture hang_capture_;
  Ledger ledger_;      // where the job's time went
  Restarts restarts_;  // the budget, the backoff, the policy and the verdicts
  SparePool spare_pool_;
  HealthRounds health_rounds_;
  Liveness liveness_;
  TimeLimit time_limit_;
};

}  // namespace gangrun::scheduler
