#include "cli/service.h"

#include <boost/asio/signal_set.hpp>
#include <csignal>

#include "common/exit_status.h"
#include "common/logging.h"
#include "common/service.h"

namespace gangrun::cli {

void AddServiceOptions(CLI::App& app, ServiceOptions& o, bool server) {
  app.add_option("--token", o.access.token,
                 "shared secret (visible in ps: prefer --token_file or GANGRUN_TOKEN)")
      ->envname("GANGRUN_TOKEN");
  app.add_option("--token_file", o.access.token_file, "file holding the shared secret")
      ->envname("GANGRUN_TOKEN_FILE");
  app.add_option("--tls_cert", o.access.tls_cert, "TLS certificate (PEM)")
      ->envname("GANGRUN_TLS_CERT");
  app.add_option("--tls_key", o.access.tls_key, "TLS private key (PEM)")
      ->envname("GANGRUN_TLS_KEY");
  app.add_option("--tls_ca", o.access.tls_ca, "TLS CA bundle (PEM)")->envname("GANGRUN_TLS_CA");
  if (!server) return;
  app.add_option("--metrics_port", o.metrics_port,
                 "serve Prometheus metrics on http://0.0.0.0:PORT/metrics (-1: off)")
      ->envname("GANGRUN_METRICS_PORT")
      ->check(CLI::Range(-1, 65535));
  app.add_option("--event_log", o.event_log, "append a JSON line per event to this file")
      ->envname("GANGRUN_EVENT_LOG");
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
