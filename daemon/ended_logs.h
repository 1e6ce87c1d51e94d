#pragma once
// `gangrun logs --job ID` of a daemon's job that has ended: its launchers are gone, so the
// agents that ran it read the ranks' logs they keep (agent/job_logs.h). The same LogsPump that
// reads a running job's nodes reads them here, through a NodeDirectory of the job's agents:
// first every connected agent of the job is asked which ranks' logs it holds (the first to
// name a rank reads it); streams opened meanwhile wait for the answers, at most
// kFindTimeout. On the daemon's strand.

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gangrun/v1/daemon.pb.h"
#include "scheduler/logs.h"
#include "scheduler/node_directory.h"

namespace gangrun::daemon {

class EndedJobLogs : public scheduler::LogsSource, private scheduler::NodeDirectory {
 public:
  // Agents that have not answered which ranks they hold by then are passed over.
  static constexpr std::chrono::seconds kFindTimeout{5};

  struct Agent {
    int id = 0;  // the daemon's agent id (the pump's node id)
    std::string name;
  };
  struct Daemon {
    std::function<void(int agent_id, v1::AgentCommand command)> send;
    std::function<bool(int agent_id)> connected;
  };
  // `agents`: the job's agents that are connected now; `missing`: the names of those that
  // are not (said when a rank has no log). Asks each agent at once.
  EndedJobLogs(common::Clock& clock, v1::JobLogPlace place, int world_size,
               std::vector<Agent> agents, std::vector<std::string> missing, Daemon daemon);
  // Streams still open (or waiting) are finished ("the job's logs are read no more").
  ~EndedJobLogs() override;
  EndedJobLogs(const EndedJobLogs&) = delete;
  EndedJobLogs& operator=(const EndedJobLogs&) = delete;

  absl::StatusOr<uint64_t> OpenLogs(const v1::LogsRequest& request,
                                    std::shared_ptr<scheduler::LogsSink> sink) override;
  void LogsWritten(uint64_t id) override;
  void CloseLogs(uint64_t id) override;

  // An agent's answers (the daemon routes them by job id).
  void OnFound(int agent_id, const v1::JobLogsFound& found);
  void OnLogRead(int agent_id, const v1::LogRead& read) { pump_.OnLogRead(agent_id, read); }

 private:
  // NodeDirectory, for the pump: the ranks' agents, as they answered.
  std::map<int, Place> RankPlaces() const override { return places_; }
  std::string HostOf(int node_id) const override;
  bool Reachable(int node_id) const override { return daemon_.connected(node_id); }
  void Send(int node_id, v1::NodeCommand command) override;
  uint64_t generation() const override { return 0; }
  scheduler::JobState state() const override { return scheduler::JobState::kFinished; }
  int world_size() const override { return world_size_; }
  void Record(scheduler::Event, nlohmann::json) override {}

  // Every asked agent answered, or kFindTimeout passed: the waiting streams open.
  void Found();
  // Why the request's ranks have no log here ("" = they have): one clear line.
  std::string Missing(const v1::LogsRequest& request) const;

  v1::JobLogPlace place_;
  int world_size_;
  std::map<int, std::string> agents_;  // by id: the names of those asked
  std::vector<std::string> missing_;   // not connected when asked
  std::map<int, std::string> errors_;  // an agent's answer that it could not look
  Daemon daemon_;
  std::set<int> answered_;  // the agents asked that have answered (once each)
  bool found_ = false;
  std::map<int, Place> places_;  // by rank
  std::unique_ptr<common::Timer> find_timer_;
  struct Pending {
    v1::LogsRequest request;
    std::shared_ptr<scheduler::LogsSink> sink;
  };
  std::map<uint64_t, Pending> pending_;   // streams opened before Found
  std::map<uint64_t, uint64_t> streams_;  // this reader's stream id -> the pump's
  uint64_t opened_ = 0;
  scheduler::LogsPump pump_;  // last: destroyed first, finishing its streams
};

}  // namespace gangrun::daemon
