#pragma once
// The scheduler side of a launcher: the launcher whose --master_addr is this host (the first
// on this host to bind the scheduler port) hosts the job's scheduler, its key-value store, its
// gRPC server, its metrics and event log, and reaches it over an in-process link.

#include <boost/asio/io_context.hpp>
#include <memory>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "launcher/local_link.h"
#include "launcher/options.h"
#include "launcher/worker_plan.h"
#include "scheduler/grpc_server.h"
#include "scheduler/kv_store.h"
#include "scheduler/metrics.h"
#include "scheduler/scheduler.h"
#include "scheduler/telemetry.h"
#include "scheduler/torch_store.h"

namespace gangrun::launcher {

// Destroyed in reverse: the servers first (they refer to the scheduler and the store).
struct SchedulerRole {
  std::unique_ptr<scheduler::EventLog> event_log;  // with --event_log
  std::unique_ptr<scheduler::Telemetry> telemetry;
  std::unique_ptr<scheduler::Scheduler> scheduler;
  std::unique_ptr<scheduler::KvStore> store;
  std::unique_ptr<scheduler::SchedulerServer> server;  // null when simulating
  std::unique_ptr<scheduler::TorchStore> torch_store;  // with --agent_store True
  std::unique_ptr<scheduler::MetricsServer> metrics;   // with --metrics_port
  std::unique_ptr<LocalLink> link;
};

// Starts the scheduler if this host should run it (facts.scheduler_port becomes the port it
// listens on). Returns an empty role when another launcher on this host already listens on
// the scheduler port (this one then joins it), or when a daemon hosts the job's scheduler.
absl::StatusOr<SchedulerRole> MaybeHostScheduler(boost::asio::io_context& io, common::Clock& clock,
                                                 const Options& options, HostFacts& facts);

// A job with a store (store_role.h): the scheduler with its server on `listen_address`, and
// no in-process link (this launcher's node joins it over the network, as every node does, so
// that it can follow the scheduler to another host).
absl::StatusOr<SchedulerRole> HostSchedulerAt(boost::asio::io_context& io, common::Clock& clock,
                                              const Options& options, const HostFacts& facts,
                                              scheduler::Scheduler::Options scheduler_options,
                                              const std::string& listen_address);

// The scheduler's settings from the launcher's options (world size, timeouts, restarts), or why
// they cannot be (a --restart_rules file that cannot be read or parsed).
absl::StatusOr<scheduler::Scheduler::Options> SchedulerOptionsFor(const Options& options);
// The key-value store's bounds from the launcher's options.
scheduler::KvLimits KvLimitsFor(const Options& options);

}  // namespace gangrun::launcher
