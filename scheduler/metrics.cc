#include "scheduler/metrics.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <cmath>
#include <deque>
#include <sstream>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/secret.h"
#include "proto/conversions.h"
#include "scheduler/ledger.h"
#include "scheduler/status_page.h"

namespace gangrun::scheduler {
namespace {

namespace http = boost::beast::http;
using boost::asio::ip::tcp;

// Label values escape backslash, double quote and newline.
std::string Escape(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

// Prometheus's text format spells the special values NaN, +Inf and -Inf; every other value is
// the shortest text that reads back as exactly it (268435456, not 2.68435e+08).
std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char text[64];
  auto [end, error] = std::to_chars(text, text + sizeof(text), value);
  return error == std::errc() ? std::string(text, end) : "NaN";
}

namespace {

class Writer {
 public:
  void Family(const std::string& name, const char* type, const char* help) {
    out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  void Sample(const std::string& name, const std::string& labels, double value) {
    out_ << name;
    if (!labels.empty()) out_ << '{' << labels << '}';
    out_ << ' ' << FormatSampleValue(value) << '\n';
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

// The metric families of a set of jobs, one method per group.
class Renderer {
 public:
  explicit Renderer(const std::vector<JobView>& jobs) {
    for (const auto& view : jobs) {
      jobs_.push_back({"job=\"" + Escape(view.telemetry->job_id()) + "\"", view.scheduler->Status(),
                       view.telemetry, view.store});
    }
  }

  std::string Render() {
    Phases();
    States();
    Counters();
    TimeLedger();
    Latencies();
    Progress();
    Store();
    return w_.str();
  }

 private:
  struct Job {
    std::string label;  // job="..."
    v1::GetStatusResponse status;
    const Telemetry* telemetry;
    const KvStore* store;
  };

  void Phases() {
    static const std::vector<v1::JobPhase> kPhases = proto::Values<v1::JobPhase>();
    w_.Family("gangrun_job_phase", "gauge", "1 for the phase the job is in.");
    for (const auto& j : jobs_) {
      for (v1::JobPhase phase : kPhases) {
        w_.Sample("gangrun_job_phase", j.label + ",phase=\"" + proto::Name(phase) + "\"",
                  j.status.phase() == phase);
      }
    }
    w_.Family("gangrun_world_size", "gauge",
              "Workers the job runs with (its maximum when elastic).");
    for (const auto& j : jobs_) w_.Sample("gangrun_world_size", j.label, j.status.world_size());
    w_.Family("gangrun_spare_nodes", "gauge",
              "Launchers beyond the job's size waiting to take a lost or excluded node's place.");
    for (const auto& j : jobs_) w_.Sample("gangrun_spare_nodes", j.label, j.status.spare_nodes());
    w_.Family("gangrun_generation", "gauge", "The current generation (0 before the first).");
    for (const auto& j : jobs_) w_.Sample("gangrun_generation", j.label, j.status.generation());
  }

  void States() {
    static const std::vector<v1::NodeState> kNodeStates = proto::Values<v1::NodeState>();
    static const std::vector<v1::WorkerState> kWorkerStates = proto::Values<v1::WorkerState>();
    w_.Family("gangrun_nodes", "gauge", "Joined nodes by state.");
    for (const auto& j : jobs_) {
      for (v1::NodeState state : kNodeStates) {
        int count = 0;
        for (const auto& node : j.status.nodes()) count += node.state() == state;
        w_.Sample("gangrun_nodes", j.label + ",state=\"" + proto::Name(state) + "\"", count);
      }
    }
    w_.Family("gangrun_workers", "gauge", "Workers of the current generation by state.");
    for (const auto& j : jobs_) {
      for (v1::WorkerState state : kWorkerStates) {
        int count = 0;
        for (const auto& node : j.status.nodes()) {
          for (const auto& worker : node.workers()) count += worker.state() == state;
        }
        w_.Sample("gangrun_workers", j.label + ",state=\"" + proto::Name(state) + "\"", count);
      }
    }
  }

  void Counters() {
    w_.Family("gangrun_generations_total", "counter", "Generations started.");
    for (const auto& j : jobs_) {
      w_.Sample("gangrun_generations_total", j.label, j.telemetry->generations());
    }
    w_.Family("gangrun_restarts_total", "counter", "Restarts after worker failures or lost nodes.");
    for (const auto& j : jobs_) w_.Sample("gangrun_restarts_total", j.label, j.status.restarts());
    w_.Family("gangrun_failures_total", "counter",
              "Failures by cause: worker_exit, heartbeat_timeout, connection_lost, "
              "formation_timeout, hang, health_check, excluded.");
    for (const auto& j : jobs_) {
      for (size_t i = 0; i < static_cast<size_t>(FailureCause::kCount); ++i) {
        const auto cause = static_cast<FailureCause>(i);
        w_.Sample("gangrun_failures_total", j.label + ",cause=\"" + FailureCauseName(cause) + "\"",
                  j.telemetry->failures(cause));
      }
    }
  }

  // Where each job's time went (scheduler/ledger.h): every phase, in the ledger's order.
  void TimeLedger() {
    w_.Family("gangrun_phase_seconds_total", "counter",
              "Seconds of the job's wall time by phase: forming, starting, training, stalled, "
              "detecting, stopping, backoff, reforming.");
    for (const auto& j : jobs_) {
      for (size_t i = 0; i < static_cast<size_t>(LedgerPhase::kCount); ++i) {
        const std::string phase(LedgerPhaseName(static_cast<LedgerPhase>(i)));
        const auto it = j.status.ledger().seconds().find(phase);
        w_.Sample("gangrun_phase_seconds_total", j.label + ",phase=\"" + phase + "\"",
                  it == j.status.ledger().seconds().end() ? 0.0 : it->second);
      }
    }
    w_.Family("gangrun_lost_work_seconds_total", "counter",
              "Training seconds whose steps were done again after restarts (after the last "
              "checkpoint).");
    for (const auto& j : jobs_) {
      w_.Sample("gangrun_lost_work_seconds_total", j.label, j.status.ledger().lost_work_seconds());
    }
    w_.Family("gangrun_ettr", "gauge",
              "Effective training time ratio: training seconds, less those redone after restarts, "
              "over wall seconds so far.");
    for (const auto& j : jobs_) w_.Sample("gangrun_ettr", j.label, j.status.ledger().ettr());
  }

  void Summary(const std::string& name, const char* help,
               const DurationStat& (Telemetry::*stat)() const) {
    w_.Family(name, "summary", help);
    for (const auto& j : jobs_) {
      const DurationStat& d = (j.telemetry->*stat)();
      w_.Sample(name + "_sum", j.label, d.sum_seconds);
      w_.Sample(name + "_count", j.label, d.count);
    }
  }

  void Latencies() {
    Summary("gangrun_rendezvous_seconds",
            "From asking for a generation (start, or after a restart's backoff) to all its "
            "workers running.",
            &Telemetry::rendezvous);
    Summary("gangrun_stop_seconds", "From telling a generation to stop to all its workers gone.",
            &Telemetry::stop);
    w_.Family("gangrun_heartbeat_lag_seconds", "gauge",
              "The longest time since the scheduler last heard of a joined node.");
    for (const auto& j : jobs_) {
      double lag = 0;
      for (const auto& node : j.status.nodes()) lag = std::max(lag, node.heartbeat_age_seconds());
      w_.Sample("gangrun_heartbeat_lag_seconds", j.label, lag);
    }
  }

  // Per rank, for the ranks that report through GANGRUN_PROGRESS (one series per rank).
  void Progress() {
    using Value = double (*)(const v1::WorkerStatus&);
    const std::tuple<const char*, const char*, Value> families[] = {
        {"gangrun_rank_step", "The last step each rank reported.",
         [](const v1::WorkerStatus& w) { return static_cast<double>(w.step()); }},
        {"gangrun_rank_progress_age_seconds", "Seconds since each rank last reported progress.",
         [](const v1::WorkerStatus& w) { return w.progress_age_seconds(); }},
        {"gangrun_rank_step_seconds", "Each rank's recent seconds per step (its last steps' mean).",
         [](const v1::WorkerStatus& w) { return w.step_seconds(); }},
    };
    for (const auto& [name, help, value] : families) {
      w_.Family(name, "gauge", help);
      for (const auto& j : jobs_) {
        for (const auto& node : j.status.nodes()) {
          for (const auto& worker : node.workers()) {
            if (worker.reports() == 0) continue;
            w_.Sample(name, j.label + ",rank=\"" + std::to_string(worker.rank()) + "\"",
                      value(worker));
          }
        }
      }
    }
    w_.Family("gangrun_stragglers", "gauge",
              "Ranks slower per step than the straggler factor times the job's median.");
    for (const auto& j : jobs_) w_.Sample("gangrun_stragglers", j.label, j.status.stragglers());
  }

  void Store() {
    w_.Family("gangrun_kv_bytes", "gauge",
              "Bytes held by the job's key-value store (bounded by --kv_max_bytes).");
    for (const auto& j : jobs_) {
      if (j.store != nullptr) w_.Sample("gangrun_kv_bytes", j.label, j.store->bytes());
    }
    w_.Family("gangrun_kv_pending_waits", "gauge",
              "Gets and barrier arrivals waiting in the key-value store (bounded by "
              "--kv_max_waits).");
    for (const auto& j : jobs_) {
      if (j.store != nullptr) {
        w_.Sample("gangrun_kv_pending_waits", j.label, j.store->pending_waits());
      }
    }
  }

  std::vector<Job> jobs_;
  Writer w_;
};

}  // namespace

std::string RenderMetrics(const std::vector<JobView>& jobs,
                          const std::map<std::string, std::vector<std::string>>& extra) {
  std::string text = Renderer(jobs).Render();
  for (const auto& [name, lines] : extra) {
    const bool counter = name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0;
    text += "# TYPE " + name + (counter ? " counter\n" : " gauge\n");
    for (const auto& line : lines) text += line + "\n";
  }
  return text;
}

// Accepts connections and answers each with one response. Bounded: at most
// kMaxConnections at once (past that, the oldest connection still waiting for its request is
// closed to make room: an idle client cannot lock scrapers out), each closed after
// kRequestTimeout whether or not it asked for anything, and an accept that fails for want of
// descriptors or memory is retried after a pause instead of at once (which would spin the
// loop).
class MetricsServer::Acceptor : public std::enable_shared_from_this<Acceptor> {
 public:
  static constexpr int kMaxConnections = 64;
  static constexpr std::chrono::seconds kRequestTimeout{10};
  static constexpr std::chrono::milliseconds kAcceptBackoff{250};

  Acceptor(boost::asio::io_context& io, std::string secret, Render render, Render status_json)
      : acceptor_(io),
        backoff_(io),
        secret_(std::move(secret)),
        render_(std::move(render)),
        status_json_(std::move(status_json)) {}

  boost::system::error_code Listen(const tcp::endpoint& endpoint) {
    boost::system::error_code ec;
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(64, ec);
    return ec;
  }
  int port() const { return acceptor_.local_endpoint().port(); }
  void Close() {
    render_ = nullptr;  // what it renders may be gone; late scrapes get 503
    status_json_ = nullptr;
    closed_ = true;
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    backoff_.cancel();
  }

  void Accept() {
    if (closed_ || accepting_) return;
    accepting_ = true;
    acceptor_.async_accept(
        [self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
          self->accepting_ = false;
          if (ec == boost::asio::error::operation_aborted || self->closed_) return;
          if (ec == boost::asio::error::no_descriptors || ec == boost::asio::error::no_memory ||
              ec == boost::asio::error::no_buffer_space || ec.value() == ENFILE) {
            self->backoff_.expires_after(kAcceptBackoff);
            self->backoff_.async_wait([self](boost::system::error_code wait_ec) {
              if (!wait_ec) self->Accept();
            });
            return;
          }
          if (!ec) {
            Serve(self, std::move(socket));
            self->EvictIdleOverTheBound();
          }
          self->Accept();
        });
  }

 private:
  struct Connection {
    Connection(tcp::socket s, boost::asio::io_context& io) : socket(std::move(s)), timer(io) {}
    tcp::socket socket;
    boost::asio::steady_timer timer;
    bool requested = false;  // its request has arrived
    boost::beast::flat_buffer buffer{8192};
    http::request<http::empty_body> request;
    http::response<http::string_body> response;
  };

  static void Serve(const std::shared_ptr<Acceptor>& self, tcp::socket socket) {
    auto& io = static_cast<boost::asio::io_context&>(self->acceptor_.get_executor().context());
    auto c = std::make_shared<Connection>(std::move(socket), io);
    ++self->active_;
    self->waiting_.push_back(c);
    c->timer.expires_after(kRequestTimeout);
    c->timer.async_wait([c](boost::system::error_code ec) {
      if (ec) return;
      boost::system::error_code ignored;
      c->socket.close(ignored);  // a silent or slow client: its pending read ends
    });
    http::async_read(c->socket, c->buffer, c->request,
                     [self, c](boost::system::error_code ec, size_t) {
                       if (ec) return Done(self, c);
                       c->requested = true;
                       Respond(self, c);
                     });
  }

  // Closes the oldest connections still waiting for their request while over the bound.
  void EvictIdleOverTheBound() {
    int over = active_ - kMaxConnections;
    while (over > 0 && !waiting_.empty()) {
      std::shared_ptr<Connection> oldest = waiting_.front().lock();
      waiting_.pop_front();
      if (!oldest || oldest->requested || !oldest->socket.is_open()) continue;
      boost::system::error_code ignored;
      oldest->socket.close(ignored);  // its read ends: Done() counts it out
      --over;
    }
  }

  static void Respond(const std::shared_ptr<Acceptor>& self, const std::shared_ptr<Connection>& c) {
    const std::string target(c->request.target().substr(0, c->request.target().find('?')));
    c->response.version(c->request.version());
    c->response.keep_alive(false);
    const bool get = c->request.method() == http::verb::get;
    auto answer = [&c](const char* type, std::string body) {
      c->response.result(http::status::ok);
      c->response.set(http::field::content_type, type);
      c->response.set(http::field::cache_control, "no-store");
      c->response.body() = std::move(body);
    };
    if (!self->render_) {
      c->response.result(http::status::service_unavailable);
    } else if (!self->Allowed(c->request)) {
      c->response.result(http::status::unauthorized);
      c->response.set(http::field::www_authenticate, "Basic realm=\"gangrun\", charset=\"UTF-8\"");
      c->response.set(http::field::content_type, "text/plain");
      c->response.body() =
          "this job has a token: send its page secret (gangrun generate page-secret) as a bearer "
          "token or a basic-auth password\n";
    } else if (get && target == "/metrics") {
      answer("text/plain; version=0.0.4; charset=utf-8", self->render_());
    } else if (get && self->status_json_ && (target == "/" || target == "/index.html")) {
      answer("text/html; charset=utf-8", StatusPageHtml());
    } else if (get && self->status_json_ && target == "/status.json") {
      answer("application/json", self->status_json_());
    } else {
      c->response.result(http::status::not_found);
      c->response.set(http::field::content_type, "text/plain");
      c->response.body() = self->status_json_ ? "GET /, /status.json and /metrics are served here\n"
                                              : "only GET /metrics is served here\n";
    }
    c->response.prepare_payload();
    http::async_write(c->socket, c->response, [self, c](boost::system::error_code, size_t) {
      boost::system::error_code ignored;
      c->socket.shutdown(tcp::socket::shutdown_both, ignored);
      Done(self, c);
    });
  }

  // No secret, or the request carries it (Bearer, or Basic with any user name).
  bool Allowed(const http::request<http::empty_body>& request) const {
    if (secret_.empty()) return true;
    auto it = request.find(http::field::authorization);
    if (it == request.end()) return false;
    absl::string_view value(it->value().data(), it->value().size());
    std::string given;
    if (absl::ConsumePrefix(&value, "Bearer ")) {
      given = std::string(absl::StripAsciiWhitespace(value));
    } else if (absl::ConsumePrefix(&value, "Basic ")) {
      std::string decoded;
      if (!absl::Base64Unescape(absl::StripAsciiWhitespace(value), &decoded)) return false;
      const size_t colon = decoded.find(':');
      if (colon == std::string::npos) return false;
      given = decoded.substr(colon + 1);
    } else {
      return false;
    }
    return common::SecretsEqual(given, secret_);
  }

  static void Done(const std::shared_ptr<Acceptor>& self, const std::shared_ptr<Connection>& c) {
    c->timer.cancel();
    boost::system::error_code ignored;
    c->socket.close(ignored);
    --self->active_;
  }

  tcp::acceptor acceptor_;
  boost::asio::steady_timer backoff_;
  const std::string secret_;  // "" = anyone may look
  Render render_;
  Render status_json_;
  int active_ = 0;
  std::deque<std::weak_ptr<Connection>> waiting_;  // in accept order
  bool accepting_ = false;
  bool closed_ = false;
};

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(boost::asio::io_context& io,
                                                                    const std::string& host,
                                                                    int port, std::string secret,
                                                                    Render render,
                                                                    Render status_json) {
  boost::system::error_code ec;
  auto address = boost::asio::ip::make_address(host, ec);
  if (ec) {
    // A host name (the scheduler's, as given): its first address.
    auto resolved = common::ResolveHost(host);
    if (resolved.ok() && !resolved->empty())
      address = boost::asio::ip::make_address((*resolved)[0], ec);
    if (ec || !resolved.ok() || resolved->empty()) {
      return absl::InvalidArgumentError("--metrics_host: bad address '" + host + "'");
    }
  }
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->acceptor_ =
      std::make_shared<Acceptor>(io, std::move(secret), std::move(render), std::move(status_json));
  ec = server->acceptor_->Listen(tcp::endpoint(address, static_cast<unsigned short>(port)));
  if (ec) {
    return absl::UnavailableError("cannot serve metrics on " + host + ":" + std::to_string(port) +
                                  ": " + ec.message());
  }
  server->port_ = server->acceptor_->port();
  server->acceptor_->Accept();
  common::Logger("scheduler")
      ->info("serving Prometheus metrics on http://{}:{}/metrics", host, server->port_);
  return server;
}

MetricsServer::~MetricsServer() {
  if (acceptor_) acceptor_->Close();
}

}  // namespace gangrun::scheduler
