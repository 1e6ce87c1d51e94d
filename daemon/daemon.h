#pragma once
// The daemon (`gangrun scheduler --listen`): a long-lived scheduler that keeps a registry of
// agents (`gangrun agent`) and runs submitted jobs (`gangrun submit`) on their free slots.
//
// Each job gets what a one-shot job's master launcher has: a Scheduler, a KvStore and a
// SchedulerServer on a port of its own; the agents start one ordinary launcher per job that
// joins that port as a node. The daemon places jobs first come, first served, relays the
// launchers' output to the submitter, and answers the submitter with the job's outcome once
// every launcher of the job has exited. An actor on the io_context, like the Scheduler.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "common/check.h"
#include "common/clock.h"
#include "daemon/agent_standing.h"
#include "daemon/ended_logs.h"
#include "daemon/store_link.h"
#include "gangrun/v1/daemon.pb.h"
#include "rpc/port.h"
#include "rpc/server.h"
#include "rpc/server_stream.h"
#include "scheduler/grpc_server.h"
#include "scheduler/kv_store.h"
#include "scheduler/peer_checks.h"
#include "scheduler/scheduler.h"
#include "scheduler/telemetry.h"
#include "scheduler/torch_store.h"

namespace gangrun::daemon {

// The scheduler's names the daemon's files use (each job runs a Scheduler).
using scheduler::Event;
using scheduler::kMaxReasonBytes;
using scheduler::KvStore;
using scheduler::Sanitize;
using scheduler::Scheduler;
using scheduler::SchedulerServer;
using scheduler::StopSignal;
using scheduler::Telemetry;

// A job's progress as its record in the store says it (the scheduler's record, or the daemon's
// own): its generation and its restarts used and forgiven, 0 when missing (Job::progress).
nlohmann::json ProgressOf(const nlohmann::json& record);

class Daemon {
 public:
  using AgentStream = rpc::ServerStream<v1::AgentEvent, v1::AgentCommand>;
  using SubmitStream = rpc::ServerStream<v1::SubmitEvent, v1::SubmitReply>;
  // What the daemon runs a job with: its scheduler's settings, its store's bounds, and what
  // placing it takes (launcher/launch_spec.h reads them from the spec).
  struct JobConfig {
    scheduler::Scheduler::Options scheduler;
    scheduler::KvLimits kv;
    int world_size = 1;
    int local_worker_num = 1;   // with local_worker_num_given: the workers per agent
    int cluster_time_out = -1;  // seconds; negative = forever
    std::string task;           // the task script, for messages
  };
  // A job's settings from its launcher options, parsed and checked by the launcher library.
  using Configure = std::function<absl::StatusOr<JobConfig>(const v1::SubmitJob&)>;

  struct Options {
    std::string listen_host;  // where the jobs' own ports listen (the daemon's host)
    std::string token;
    std::shared_ptr<grpc::ServerCredentials> credentials;  // null = insecure
    scheduler::EventLog* event_log =
        nullptr;  // every job's events and the daemon's own; may be null
    // A daemon on a store (daemon/store_link.h): it stands by until it is the active one, then
    // adopts the store's jobs; null = the only daemon, active from the start.
    StoreLink* store = nullptr;
    std::string advertise_host;  // where the jobs' ports are reached (the store names them)
    std::string store_url;       // given to the jobs' launchers (--store, --store_follow)
    std::string store_cacert, store_cert, store_key;
    // The history the store keeps (README "History"): the newest history_count finished jobs'
    // records (1..kMaxHistoryCount), none older than history_days (0 = no age bound); the
    // rest are deleted at each job's end, when this daemon becomes active, and hourly.
    static constexpr int64_t kMaxHistoryCount = 1000000;
    int64_t history_count = 1000;
    double history_days = 30;
    // Agents' standing (daemon/agent_standing.h): when failures quarantine an agent, and how
    // often a quarantined agent that has a --health_check is probed (seconds).
    AgentStandings::Options standing;
    double probe_interval = 300;
  };

  Daemon(boost::asio::io_context& io, common::Clock& clock, Options options, Configure configure);
  ~Daemon();

  // Agents and submitters, as their streams connect, talk and end.
  int AddAgent(std::shared_ptr<AgentStream::Handle> handle);
  void OnAgentEvent(int agent_id, const v1::AgentEvent& event);
  void OnAgentGone(int agent_id);
  int AddSubmitter(std::shared_ptr<SubmitStream::Handle> handle);
  void OnSubmitEvent(int submit_id, const v1::SubmitEvent& event);
  void OnSubmitterGone(int submit_id);

  v1::DaemonStatusResponse Status() const;
  // OK when this daemon places jobs; a standby's refusal naming the active one otherwise.
  // Thread-safe (the gRPC threads ask it before a stream opens).
  absl::Status Standby() const;
  // This daemon became the active one (daemon/adopt.cc): the store's jobs, as recorded.
  // and every agent's standing (daemon/agent_standing.h).
  void BecomeActive(std::vector<nlohmann::json> jobs, std::vector<nlohmann::json> agents = {});
  // Stops one job ("" = all); returns how many were running or waiting.
  int Stop(const std::string& job_id, int signal, const std::string& reason);
  // `gangrun stacks --job ID` ("" = the only running job): its scheduler answers
  // (Scheduler::RequestStacks).
  void Stacks(const v1::StacksRequest& request, scheduler::Scheduler::StacksDone done);
  // A running job's scheduler ("" = the only running job's), for `gangrun logs` and stacks.
  absl::StatusOr<scheduler::Scheduler*> SchedulerOf(const std::string& job_id);
  // `gangrun logs --job`: a running job's scheduler, or for a job that has ended a reader of
  // its logs on the agents that ran it (daemon/ended_logs.h).
  absl::StatusOr<scheduler::LogsSource*> LogsOf(const std::string& job_id);
  std::string Metrics() const;
  // `gangrun drain NAME` / `gangrun undrain NAME` (daemon/standing.cc): what changed, or why
  // nothing can (no agent of that name is known).
  absl::StatusOr<std::string> Drain(const v1::DrainRequest& request);
  // Stops every job and runs `done` once all of them have ended (their launchers exited).
  void Shutdown(std::function<void()> done);
  bool idle() const { return jobs_.empty(); }

 private:
  struct Agent {
    std::shared_ptr<AgentStream::Handle> handle;
    v1::AgentRegister info;
    bool registered = false;
    int used_slots = 0;
    std::map<std::string, int> jobs;  // job id -> slots
  };
  struct Job {
    std::string id;
    int submit_id = 0;
    v1::SubmitJob spec;
    JobConfig config;                           // from its launcher options, checked when submitted
    std::unique_ptr<common::Timer> wait_timer;  // no free slots within the cluster timeout
    std::string waiting_reported;               // the last "waiting" said to the submitter
    // Once placed:
    std::unique_ptr<scheduler::Telemetry> telemetry;
    std::unique_ptr<scheduler::Scheduler> scheduler;
    std::unique_ptr<scheduler::KvStore> store;
    std::unique_ptr<scheduler::SchedulerServer> server;
    std::unique_ptr<scheduler::TorchStore> torch_store;  // with --agent_store True
    std::vector<std::pair<int, int>> placement;          // (agent id, workers), in node-rank order
    size_t spares = 0;  // the last `spares` of placement: spare launchers (--spare_nodes)
    int launchers_running = 0;
    std::string launcher_failure;  // a launcher that ended before the job did
    std::optional<v1::JobOutcome> outcome;
    bool closing = false;
    uint64_t dropped_output = 0;  // bytes not relayed to a slow submitter since the last that was
    // With a store (daemon/adopt.cc): where it runs by agent name, its last generation, and,
    // adopted from another daemon, the agents not back yet and the wait for its submitter.
    std::vector<std::pair<std::string, int>> placed_on;
    nlohmann::json progress = nlohmann::json::object();  // ProgressOf, and its verdicts
    bool adopted = false;
    std::map<std::string, int> agents_away;  // agent name -> workers
    std::unique_ptr<common::Timer> adoption_timer;
    // Why each generation ended (the scheduler's notes), the last kGenerationEndsKept.
    std::deque<std::string> generation_ends;
    std::set<std::string> blamed;    // the agents it attributed a failure to
    double submitted_unix = 0;       // when it was submitted (kept in its record)
    common::TimePoint submitted_at;  // the same, on the daemon's clock (its ledger's queued)
  };
  static constexpr std::chrono::seconds kHelloTimeout{30};
  static constexpr size_t kGenerationEndsKept = 16;  // a note is at most about 1 KiB
  template <typename Handle>
  void ExpectHello(int id, std::shared_ptr<Handle> handle);
  // Output waiting for one submitter; past this, output is dropped and counted.
  static constexpr size_t kMaxQueuedOutput = 8 << 20;

  // Agents' names are how people and placements tell them apart: one agent per name.
  absl::Status CheckAgentNameFree(const std::string& name) const;
  // The registered agent of that name (agents_.end() if none).
  std::map<int, Agent>::const_iterator AgentNamed(const std::string& name) const;
  void TryPlace();
  void PlacePending();
  void ReportWaiting(Job& job, const std::string& why);
  // Agents and worker counts for `job`, or why it cannot be placed now.
  absl::StatusOr<std::vector<std::pair<int, int>>> Place(const Job& job) const;
  // Up to --spare_nodes spare launchers on agents the placement does not use, each with as
  // many free slots as the placement's largest node (a spare takes a node of its own size).
  std::vector<std::pair<int, int>> PlaceSpares(const Job& job,
                                               const std::vector<std::pair<int, int>>& nodes) const;
  absl::Status StartJob(Job& job, std::vector<std::pair<int, int>> placement);
  void OnLauncherExited(int agent_id, const v1::LauncherExited& exited);
  void MaybeJobDone(Job& job);
  void EndJob(const std::string& job_id, const v1::JobOutcome& outcome);
  void Reply(const Job& job, const v1::SubmitReply& reply);
  void RelayOutput(Job& job, const std::string& data);
  Job* FindJob(const std::string& id);
  // adopt.cc: the store's part.
  void SaveJob(const Job& job, const v1::FinishedJob* ended = nullptr);
  void AdoptJob(const nlohmann::json& record);
  void OnAgentBack(int agent_id, Agent& agent);
  void OnFollow(int submit_id, const std::string& job_id);
  void AdoptionOver(const std::string& job_id);
  absl::Status StartScheduler(Job& job);  // placement.cc

  boost::asio::io_context& io_;
  common::Clock& clock_;
  Options options_;
  Configure configure_;
  scheduler::Telemetry telemetry_;  // the daemon's own events (agents, submissions)
  std::string id_prefix_;
  int next_id_ = 1;
  int64_t jobs_submitted_ = 0;
  std::map<std::string, uint64_t> jobs_finished_;  // by outcome
  std::map<int, Agent> agents_;
  std::map<int, std::shared_ptr<SubmitStream::Handle>> submitters_;
  // Agents that have not registered and submitters that have not sent their job yet: closed
  // when kHelloTimeout passes first (a silent peer holds no stream for ever).
  std::map<int, std::unique_ptr<common::Timer>> hello_timers_;
  std::map<std::string, std::unique_ptr<Job>> jobs_;
  std::deque<std::string> pending_;  // job ids waiting for slots, oldest first
  bool placing_ = false;
  bool place_again_ = false;
  std::function<void()> on_idle_;   // Shutdown's `done`
  std::atomic<bool> active_{true};  // false: a standby (Options::store)
  // Jobs that ended, as the store recorded them: a submit that follows one gets its outcome.
  std::map<std::string, v1::JobOutcome> ended_;
  // Jobs that ended, newest first, for `gangrun status`: at most kMaxFinishedKept (about 1 KiB
  // each) and Options::history_count, also from the store's records when this daemon becomes
  // the active one.
  static constexpr size_t kMaxFinishedKept = 100;
  std::deque<v1::FinishedJob> finished_;
  void KeepFinished(v1::FinishedJob finished);
  // The finished jobs whose records the store holds, by when they ended (unix seconds): at
  // most Options::history_count after each PruneHistory, which deletes the rest (and those
  // past history_days) from the store and from finished_.
  std::multimap<double, std::string> recorded_ended_;
  void PruneHistory();
  std::unique_ptr<common::Timer> history_timer_;  // PruneHistory hourly, while active
  // Where an ended job's logs are (its agents by name, its log directory), for LogsOf: the
  // last kMaxEndedKept jobs that ended here or in the store's records, less those PruneHistory
  // forgot.
  struct EndedPlace {
    std::vector<std::string> agents;
    v1::JobLogPlace place;
    int world_size = 0;
  };
  std::map<std::string, EndedPlace> ended_places_;
  std::deque<std::string> ended_places_order_;  // oldest first
  void KeepEndedPlace(const std::string& job_id, const v1::LaunchSpec& spec,
                      std::vector<std::string> agents, int world_size);
  // The readers of ended jobs' logs, by reader id: the last kMaxLogReaders (a newer one
  // finishes the oldest's streams).
  static constexpr size_t kMaxLogReaders = 16;
  std::map<uint64_t, std::unique_ptr<EndedJobLogs>> log_readers_;
  uint64_t log_readers_opened_ = 0;
  // standing.cc: what the daemon holds against each agent, by name, across jobs.
  AgentStandings standings_;
  std::map<std::string, uint64_t> standing_changes_;  // by the state entered, for /metrics
  std::unique_ptr<common::Timer> probe_timer_;        // ProbeQuarantined's next round
  // A failure `job_id` attributes to the agent named `agent` (its node lost or excluded, or
  // its launcher excluded before it joined).
  void BlameAgent(const std::string& agent, const std::string& job_id, const std::string& why);
  void OnStandingChanged(const AgentStandings::Change& change);
  void SaveStanding(const std::string& agent);
  // Every registered quarantined agent that has a --health_check runs it, Options::
  // probe_interval after the last round (ArmProbes), while any is quarantined.
  void ArmProbes();
  void ProbeQuarantined();
  void OnProbed(const Agent& agent, const v1::AgentProbed& probed);
  // A FinishedJob from what a job's record in the store says.
  static v1::FinishedJob FinishedFromRecord(const nlohmann::json& record);
  common::ThreadAffinity strand_;  // the io_context's thread: every entry point checks it
};

// The daemon's gRPC face: the Daemon service and the health service on one port.
class DaemonServer {
 public:
  static absl::StatusOr<std::unique_ptr<DaemonServer>> Start(
      boost::asio::io_context& io, Daemon& daemon, const std::string& listen_address,
      const std::string& token, std::shared_ptr<grpc::ServerCredentials> credentials);
  ~DaemonServer();
  int port() const { return port_->port(); }
  void ShutdownAsync(boost::asio::io_context& io, std::function<void()> done);

  class Service;

 private:
  DaemonServer() = default;
  std::unique_ptr<Service> service_;
  std::unique_ptr<rpc::Server> server_;  // destroyed before service_: it refers to it
  std::unique_ptr<rpc::Port> port_;      // the listener, in front of server_
};

}  // namespace gangrun::daemon
