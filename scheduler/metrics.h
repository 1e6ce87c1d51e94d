#pragma once
// Prometheus metrics over HTTP (--metrics_port): GET /metrics answers the text exposition
// format (version 0.0.4), rendered on the io_context from the schedulers' live state and
// their Telemetry counters. Anything else gets 404. Served by Boost.Beast on the scheduler's
// own io_context: one short connection per scrape, no extra thread.

#include <boost/asio/io_context.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/kv_store.h"
#include "scheduler/scheduler.h"
#include "scheduler/telemetry.h"

namespace gangrun::scheduler {

struct JobView {
  const Scheduler* scheduler;
  const Telemetry* telemetry;
  const KvStore* store = nullptr;  // its key-value store, when there is one
};

// One sample's value as the text exposition format writes it.
std::string FormatSampleValue(double value);

// The exposition text for these jobs, plus `extra` gauges given as full sample lines keyed
// by metric name ("gangrun_agents" -> {"gangrun_agents 2"}), each with its TYPE line.
std::string RenderMetrics(const std::vector<JobView>& jobs,
                          const std::map<std::string, std::vector<std::string>>& extra = {});

class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  // Listens on host:port (port 0 = any). `render` runs on `io` for every GET /metrics;
  // `status_json`, when given, for every GET /status.json, and GET / is then the status page
  // (scheduler/status_page.h). With a `secret` (rpc::PageSecret of the job's token) every
  // request must carry it, as Prometheus sends it: "Authorization: Bearer SECRET" (a scrape
  // config's `authorization: {credentials_file: ...}`) or basic auth with SECRET as the
  // password (`basic_auth`, and a browser, which the 401 asks); others get 401.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(boost::asio::io_context& io,
                                                              const std::string& host, int port,
                                                              std::string secret, Render render,
                                                              Render status_json = nullptr);
  ~MetricsServer();
  int port() const { return port_; }

  class Acceptor;

 private:
  MetricsServer() = default;
  std::shared_ptr<Acceptor> acceptor_;
  int port_ = 0;
};

}  // namespace gangrun::scheduler
