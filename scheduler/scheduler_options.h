#pragma once
// What a Scheduler (scheduler/scheduler.h) is given: the job's size, its timeouts, recovery
// and hang rules, and what a store or a daemon adds. Scheduler::Options names it.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gangrun/v1/progress.pb.h"
#include "scheduler/recovery_policy.h"

namespace gangrun::scheduler {

struct SchedulerOptions {
  int world_size = 1;  // the job's size; for an elastic job, its maximum
  // How long formation may take; a negative value waits forever.
  common::Duration cluster_timeout = std::chrono::seconds(600);
  // How long a joined node may be silent (cut off, paused) at no cost: it is lost once its
  // silence exceeds the node timeout plus one heartbeat interval (the heartbeat it owed).
  // Zero or negative disables the check.
  common::Duration node_timeout = std::chrono::seconds(5);
  common::Duration heartbeat_interval = std::chrono::seconds(1);
  // Restarts after worker failures, for the whole job; backoff doubles from initial to cap.
  int max_restarts = 0;
  common::Duration restart_backoff_initial = std::chrono::seconds(1);
  common::Duration restart_backoff_cap = std::chrono::seconds(30);
  // Restarts of the job already forgiven as a node's hardware's (a job taken over or adopted:
  // its record's restarts_forgiven), not counted against max_restarts.
  int restarts_forgiven = 0;
  int min_world_size = 0;  // elastic jobs: the minimum (0 = fixed size)
  // Elastic jobs: once the minimum has joined, how long to wait for more before forming.
  common::Duration last_call = std::chrono::seconds(1);
  // The job's run id, given to every node; a node started with another one is refused.
  std::string run_id;
  std::string personality;  // "gangrun" or "msrun"; a node of the other kind is refused
  // A session not joined within this long is closed (a stray peer holds no connection).
  common::Duration join_timeout = std::chrono::seconds(30);
  // Hang rules, given to every node with each generation (node/progress.h).
  v1::ProgressRules progress_rules;
  // A rank slower per step than this multiple of the job's median is a straggler.
  double straggler_factor = 1.5;
  // Recovery (README "Failures and recovery"): nodes beyond the job's size that wait to take
  // a lost or excluded node's place, and what a failed generation means.
  int spare_nodes = 0;
  // How long a lost node's place is held for a launcher to come back (its host's, started
  // again) before a spare takes it (zero: the spare takes it at once). NVRx waits up to 15 s
  // for the same reason: a node that comes back keeps its ranks (and its data's locality).
  common::Duration rejoin_window = common::Duration::zero();
  // The workers' torch store is the job's (scheduler/torch_store.h), which whoever hosts the
  // scheduler starts and hands it (Scheduler::SetTorchStore).
  bool agent_store = false;
  // A daemon's job: when it was submitted (its ledger's queued phase runs from then until the
  // scheduler starts); unset for a launcher's own.
  std::optional<common::TimePoint> queued_since;
  // Waits there past this long for keys nobody has set name the ranks (zero: never).
  common::Duration store_wait_report = std::chrono::seconds(60);
  // Whether a lost place that no spare takes waits (up to the cluster timeout) for a node to
  // come: a relaunched launcher. A daemon's jobs do not wait: nothing relaunches theirs.
  bool await_replacement = true;
  RecoveryPolicy::Options recovery;
  // The signals a node may ask to pass on to every worker (--signals_to_forward).
  std::vector<int> signals_to_forward;
  // --time_limit (zero: none); the signal every worker gets that much before it (0: none).
  common::Duration time_limit = common::Duration::zero();
  int time_limit_signal = 0;
  common::Duration time_limit_signal_before = common::Duration::zero();
  // A job with a store (store/run_store.h): whether this scheduler may start a generation
  // now (it holds the store's lease; unset: always). Stopping and ending never wait for it:
  // only starting workers could split a job between two schedulers.
  std::function<bool()> may_start;
  // What `gangrun status` says about the store ("" = nothing), e.g. "unreachable".
  std::function<std::string()> store_note;
  // This scheduler takes over a job whose scheduler was lost (the store's record): the
  // generation and restart count go on from there, and a formed job treats the lost host
  // as any lost node (README "A store of record").
  struct Takeover {
    uint64_t generation = 0;
    int restarts_used = 0;
    std::string lost;  // "the scheduler's host H (pid P) was lost"
  };
  std::optional<Takeover> takeover;
  // A daemon's job taken over with its workers running (scheduler/adoption.cc): nodes join
  // with the generation they run (JoinRequest.resume), which goes on; places not back
  // within `adopt_timeout` count as lost nodes. adopt_or_form, for a record saying no
  // generation started (it may lag the nodes): a plain join before any node is back with a
  // generation forms the job afresh.
  std::optional<common::Duration> adopt_timeout;
  bool adopt_or_form = false;
};

}  // namespace gangrun::scheduler
