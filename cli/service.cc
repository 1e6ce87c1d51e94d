#include "cli/service.h"

#include <boost/asio/signal_set.hpp>
#include <csignal>

#include "common/env_names.h"
#include "common/exit_status.h"
#include "common/logging.h"
#include "common/service.h"

namespace gangrun::cli {

void AddServiceOptions(CLI::App& app, ServiceOptions& o, bool server) {
  for (const rpc::AccessOption& option : rpc::AccessOptions()) {
    app.add_option(std::string("--") + option.name, o.access.*option.field, option.help)
        ->envname(option.variable());
  }
  if (!server) return;
  app.add_option("--metrics_port", o.metrics_port,
                 "serve Prometheus metrics on http://HOST:PORT/metrics and the status page on / "
                 "(-1: off); with a token they ask for its page secret (gangrun generate "
                 "page-secret)")
      ->envname(env::kMetricsPort)
      ->check(CLI::Range(-1, 65535));
  app.add_option("--metrics_host", o.metrics_host,
                 "the address --metrics_port listens on (default: the daemon's own, --listen's "
                 "host; 0.0.0.0 for every interface)")
      ->envname(env::kMetricsHost);
  app.add_option("--event_log", o.event_log, "append a JSON line per event to this file")
      ->envname(env::kEventLog);
}

void RunUntilStopped(boost::asio::io_context& io, const std::string& logger,
                     const std::string& what_stop_does, std::function<void()> stop,
                     bool repeat_stop) {
  auto log = common::Logger(logger);
  bool stopping = false;
  boost::asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        if (stopping && !repeat_stop) {
          log->warn("second {}: leaving now", common::SignalName(sig));
          io.stop();
          return;
        }
        stopping = true;
        log->info("received {}: {}", common::SignalName(sig), what_stop_does);
        common::SdNotify("STOPPING=1");
        stop();
        signals.async_wait(on_signal);
      };
  signals.async_wait(on_signal);
  io.run();
}

}  // namespace gangrun::cli
