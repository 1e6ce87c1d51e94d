#pragma once
// What the long-lived commands (gangrun scheduler, gangrun agent) share: their access options
// (token, TLS; from flags or GANGRUN_*), and running an event loop until SIGINT, SIGTERM or
// SIGHUP asks them to stop.

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <string>

#include "rpc/credentials.h"

namespace gangrun::cli {

struct ServiceOptions {
  rpc::Access access;
  int metrics_port = -1;     // the daemon's /metrics
  std::string metrics_host;  // where it listens; "" = the daemon's own listening address
  std::string event_log;     // the daemon's event log
};

// --token, --token_file and the TLS files; with `server`, also --metrics_port and --event_log.
void AddServiceOptions(CLI::App& app, ServiceOptions& options, bool server);

// Runs `io` until it stops. The first SIGINT/SIGTERM/SIGHUP calls `stop` (which stops `io`
// when the service is done); a second one calls `stop` again when `repeat_stop`, else stops
// `io` at once.
void RunUntilStopped(boost::asio::io_context& io, const std::string& logger,
                     const std::string& what_stop_does, std::function<void()> stop,
                     bool repeat_stop);

}  // namespace gangrun::cli
