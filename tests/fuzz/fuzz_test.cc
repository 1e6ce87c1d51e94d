// Bounded randomized tests (a fuzzer that runs in every CI build, sanitizers included): the
// option parser, the session's frame decoder and every message the scheduler, the key-value
// store and the daemon accept from a peer, fed with random and extreme values. Seeded, so a failure
// repeats; the seed and the iteration are in the failure message. Nothing may crash, hang, allocate
// without bound or break an invariant.

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <climits>
#include <random>

#include "common/logging.h"
#include "daemon/daemon.h"
#include "launcher/options.h"
#include "launcher/parse_command_line.h"
#include "rpc/frame_decoder.h"
#include "scheduler/kv_store.h"
#include "scheduler/peer_checks.h"
#include "scheduler/scheduler.h"
#include "scheduler/torch_store_protocol.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/scheduler_fakes.h"

namespace gangrun {
namespace {

using std::chrono::milliseconds;

// Thousands of refusals are expected here; their log lines would only drown the output.
struct Quiet {
  Quiet() { common::SetLogLevel("off"); }
  ~Quiet() { common::SetLogLevel("info"); }
};

class Random {
 public:
  explicit Random(uint32_t seed) : engine_(seed) {}
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(engine_); }
  bool Chance(int percent) { return Int(0, 99) < percent; }
  template <typename T>
  const T& Pick(const std::vector<T>& items) {
    return items[static_cast<size_t>(Int(0, static_cast<int>(items.size()) - 1))];
  }
  // Small, large, negative and boundary numbers.
  int64_t Number() {
    static const std::vector<int64_t> extremes = {
        0,       1,       -1,        2,         7,    65535, 65536, 1 << 20,
        INT_MAX, INT_MIN, INT64_MAX, INT64_MIN, 4096, 4097,  -2,    100000};
    return Chance(60) ? Pick(extremes) : Int(-1000, 1000);
  }
  std::string Text() {
    static const std::vector<std::string> texts = {"",          "a",
                                                   "10.0.0.1",  "::1",
                                                   "127.0.0.1", "host\nname",
                                                   "\x1b[2J",   "node-7",
                                                   "1e308",     "nan",
                                                   "-inf",      "True",
                                                   "False",     "0:4",
                                                   "4:2",       "{\"device0\":[\"0-1\"]}",
                                                   "{",         "[1,2]",
                                                   "1,30",      "256MiB",
                                                   "x:y:z",     "[::1]:80",
                                                   "0.5",       "-0",
                                                   "1e-300",    "18446744073709551616"};
    if (Chance(5)) return std::string(static_cast<size_t>(Int(1000, 20000)), 'x');
    if (Chance(30)) return std::to_string(Number());
    std::string text = Pick(texts);
    if (Chance(10)) text[static_cast<size_t>(Int(0, std::max<int>(0, text.size() - 1)))] ^= 0x40;
    return text;
  }

 private:
  std::mt19937 engine_;
};

// The session's frame decoder from the first byte: random bytes, random splits, random bounds.
// The decoder never crashes, never hands out a frame over its bound, and never holds more
// than the bytes it was given of one frame.
TEST(FuzzTest, FrameDecoderKeepsItsBoundsOnAnyBytes) {
  std::mt19937 random(1201);
  for (int round = 0; round < 3000; ++round) {
    const uint32_t bound = random() % 2 ? rpc::kMaxHandshakePayload : 1 + random() % 4096;
    rpc::FrameDecoder decoder(bound);
    std::string bytes;
    const size_t size = random() % 256;
    for (size_t i = 0; i < size; ++i) bytes += static_cast<char>(random() & 0xff);
    // Sometimes a valid frame in front, so that the random part starts mid-stream.
    if (random() % 3 == 0) {
      std::string frame;
      rpc::AppendFrame(frame, rpc::FrameType::kEvent, std::string(random() % 64, 'x'));
      bytes = frame + bytes;
    }
    size_t fed = 0;
    while (fed < bytes.size()) {
      const size_t piece = 1 + random() % 17;
      const std::string_view part = std::string_view(bytes).substr(fed, piece);
      fed += part.size();
      absl::Status status = decoder.Feed(part, [&](rpc::FrameType type, std::string_view payload) {
        EXPECT_TRUE(rpc::KnownFrameType(static_cast<uint8_t>(type)));
        EXPECT_LE(payload.size(), bound);
        return true;
      });
      if (!status.ok()) break;
      EXPECT_LE(decoder.buffered(), fed);
      EXPECT_LE(decoder.buffered(), rpc::kFrameHeaderBytes + bound);
    }
  }
}

// torch's store protocol from a connection's first byte: random bytes after a valid or no
// opening, random lengths near the bounds, fed in random pieces as a connection buffers them.
// The decoder never crashes, never consumes more than it was given, never returns a key, value
// or count over its bound, and asks for more only while the query fits the query bound.
TEST(FuzzTest, TorchStoreDecoderKeepsItsBoundsOnAnyBytes) {
  namespace ts = scheduler::torch_store;
  std::mt19937 random(5101);
  auto u64 = [](uint64_t value) { return std::string(reinterpret_cast<const char*>(&value), 8); };
  int decoded_queries = 0;  // the random input must reach past the first byte now and then
  for (int round = 0; round < 3000; ++round) {
    std::string bytes;
    if (random() % 2) {  // 2.x's opening
      bytes += '\0';
      const uint32_t magic = ts::kValidationMagic;
      bytes.append(reinterpret_cast<const char*>(&magic), 4);
    }
    const int queries = 1 + static_cast<int>(random() % 4);
    for (int q = 0; q < queries; ++q) {
      bytes += static_cast<char>(random() % 20);
      // A length: small, at a bound, just past it, or huge.
      const uint64_t lengths[] = {
          random() % 16,          ts::kMaxKeyBytes,         ts::kMaxKeyBytes + 1,
          ts::kMaxValueBytes + 1, ts::kMaxKeysPerQuery + 1, uint64_t{1} << 62};
      bytes += u64(lengths[random() % 6]);
      const size_t tail = random() % 64;
      for (size_t i = 0; i < tail; ++i) bytes += static_cast<char>(random() & 0xff);
    }
    ts::Dialect dialect = ts::Dialect::kUnknown;
    std::string buffer;
    size_t fed = 0;
    bool refused = false;
    while (fed < bytes.size() && !refused) {
      const size_t piece = 1 + random() % 23;
      buffer += bytes.substr(fed, piece);
      fed = std::min(bytes.size(), fed + piece);
      while (true) {
        ts::Decoded decoded = ts::Decode(buffer, dialect);
        ASSERT_LE(decoded.consumed, buffer.size()) << "round " << round;
        if (decoded.kind == ts::Decoded::Kind::kRefused) {
          EXPECT_FALSE(decoded.refusal.empty());
          refused = true;
          break;
        }
        buffer.erase(0, decoded.consumed);
        if (decoded.kind == ts::Decoded::Kind::kNeedMore) {
          EXPECT_LE(buffer.size(), ts::kMaxQueryBytes) << "round " << round;
          break;
        }
        EXPECT_LE(decoded.query.keys.size(), ts::kMaxKeysPerQuery);
        for (const auto& key : decoded.query.keys) EXPECT_LE(key.size(), ts::kMaxKeyBytes);
        for (const auto& value : decoded.query.values) EXPECT_LE(value.size(), ts::kMaxValueBytes);
        EXPECT_NE(decoded.query.op, ts::Op::kValidate);
        ++decoded_queries;
      }
    }
  }
  EXPECT_GT(decoded_queries, 300);
}

TEST(FuzzTest, OptionParserNeverCrashesAndKeepsItsRanges) {
  Quiet quiet;
  static const std::vector<std::string> names = {"worker_num",       "local_worker_num",
                                                 "master_addr",      "master_port",
                                                 "node_rank",        "join",
                                                 "cluster_time_out", "bind_core",
                                                 "sim_level",        "sim_rank_id",
                                                 "tail_worker_log",  "max_restarts",
                                                 "restart_backoff",  "heartbeat_interval",
                                                 "node_timeout",     "grace_period",
                                                 "last_call",        "kv_max_bytes",
                                                 "kv_max_waits",     "metrics_port",
                                                 "health_port",      "log_prefix",
                                                 "nonsense"};
  Random random(20261130);
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
    for (int n = random.Int(0, 6); n > 0; --n) {
      const std::string name = random.Pick(names);
      if (random.Chance(20)) {
        env["GANGRUN_" + name] = random.Text();  // upper-case below
      } else if (random.Chance(50)) {
        args.push_back("--" + name + "=" + random.Text());
      } else {
        args.push_back("--" + name);
        if (random.Chance(90)) args.push_back(random.Text());
      }
    }
    if (random.Chance(80)) args.push_back("t.py");
    std::map<std::string, std::string> upper;
    for (auto& [key, value] : env) {
      std::string k = key;
      for (char& c : k) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      upper[k] = value;
    }
    auto parsed =
        launcher::ParseCommandLine(launcher::Personality::kGangrun, args,
                                   [&upper](const std::string& name) -> std::optional<std::string> {
                                     auto it = upper.find(name);
                                     if (it == upper.end()) return std::nullopt;
                                     return it->second;
                                   });
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << "iteration " << i;
      EXPECT_EQ(parsed.status().message().find('\n'), std::string::npos) << "one line";
      continue;
    }
    const launcher::Options& o = parsed->options;
    ASSERT_GE(o.worker_num, 1) << "iteration " << i;
    ASSERT_LE(o.worker_num, launcher::kMaxWorkers) << "iteration " << i;
    ASSERT_LE(o.local_worker_num, launcher::kMaxLocalWorkers) << "iteration " << i;
    ASSERT_TRUE(o.heartbeat_interval >= 0.01 && o.heartbeat_interval <= 60) << "iteration " << i;
    ASSERT_TRUE(o.grace_period >= 0 && o.grace_period <= 86400) << "iteration " << i;
    ASSERT_TRUE(o.restart_backoff_cap <= 86400) << "iteration " << i;
    ASSERT_GE(o.kv_max_bytes, int64_t{1} << 20) << "iteration " << i;
    (void)launcher::ValidateValues(o);
  }
}

using NullLink = testing::FakeNodeLink;

v1::NodeEvent RandomEvent(Random& random, uint64_t generation) {
  v1::NodeEvent event;
  event.set_generation(random.Chance(80) ? generation : static_cast<uint64_t>(random.Number()));
  const int kind = random.Int(0, 99);
  switch (kind < 30 ? 0 : kind < 50 ? 1 : kind < 70 ? 2 : kind < 80 ? 3 : kind < 83 ? 4 : 5) {
    case 0: {
      auto* join = event.mutable_join();
      join->set_node_name(random.Text());
      join->set_host_address(random.Chance(70) ? "10.0.0." + std::to_string(random.Int(1, 9))
                                               : random.Text());
      join->set_node_rank(static_cast<int32_t>(random.Chance(50) ? -1 : random.Number()));
      join->set_local_worker_num(
          static_cast<int32_t>(random.Chance(60) ? random.Int(1, 3) : random.Number()));
      join->set_free_port(static_cast<int32_t>(random.Chance(70) ? 30000 : random.Number()));
      join->set_pid(static_cast<int32_t>(random.Number()));
      join->set_world_size(static_cast<int32_t>(random.Chance(70) ? 0 : random.Number()));
      join->set_run_id(random.Chance(80) ? "" : random.Text());
      break;
    }
    case 1:
      event.mutable_worker_started()->set_rank(static_cast<int32_t>(random.Number()));
      event.mutable_worker_started()->set_pid(static_cast<int32_t>(random.Number()));
      break;
    case 2: {
      auto* exited = event.mutable_worker_exited();
      exited->set_rank(
          static_cast<int32_t>(random.Chance(50) ? random.Int(0, 5) : random.Number()));
      exited->set_pid(static_cast<int32_t>(random.Number()));
      exited->mutable_exit()->set_exit_code(static_cast<int32_t>(random.Number()));
      exited->mutable_exit()->set_signal(
          static_cast<int32_t>(random.Chance(80) ? 0 : random.Number()));
      exited->set_stopped_by_us(random.Chance(30));
      for (int n = random.Int(0, 3); n > 0; --n) exited->add_log_tail(random.Text());
      if (random.Chance(10)) exited->set_log_lost(random.Text());
      break;
    }
    case 3:
      event.mutable_generation_ended();
      break;
    case 4:
      event.mutable_stop_request()->set_signal(static_cast<int32_t>(random.Number()));
      event.mutable_stop_request()->set_reason(random.Text());
      break;
    default:
      event.mutable_heartbeat();
  }
  return event;
}

TEST(FuzzTest, SchedulerSurvivesAnyPeerMessage) {
  Quiet quiet;
  Random random(7);
  int formed = 0, restarted = 0;
  for (int job = 0; job < 1000; ++job) {
    testing::FakeClock clock;
    scheduler::Scheduler::Options options;
    options.world_size = random.Int(1, 6);
    options.min_world_size = random.Chance(30) ? random.Int(1, options.world_size) : 0;
    options.max_restarts = random.Int(0, 3);
    options.restart_backoff_initial = milliseconds(100);
    options.run_id = "job";
    scheduler::Scheduler scheduler(clock, options);
    bool finished = false;
    scheduler.SetOnFinished([&](const v1::JobOutcome& outcome) {
      EXPECT_TRUE(v1::JobOutcome::Kind_IsValid(outcome.kind()));
      finished = true;
    });
    scheduler.Start();
    std::vector<std::unique_ptr<NullLink>> links;
    std::vector<int> ids;
    for (int step = 0; step < 400 && !finished; ++step) {
      const int action = random.Int(0, 99);
      if ((action < 5 && ids.size() < 8) || ids.empty()) {
        links.push_back(std::make_unique<NullLink>());
        ids.push_back(scheduler.AddNode(links.back().get()));
      } else if (action < 7) {
        scheduler.OnNodeDisconnected(ids[static_cast<size_t>(random.Int(0, ids.size() - 1))]);
      } else if (action < 22) {
        clock.Advance(milliseconds(random.Int(0, 3000)));
      } else if (action < 24) {
        (void)scheduler.Scale(static_cast<int>(random.Number()));
      } else {
        const int id = ids[static_cast<size_t>(random.Int(0, ids.size() - 1))];
        scheduler.OnNodeEvent(id, RandomEvent(random, scheduler.generation()));
      }
      auto status = scheduler.Status();
      ASSERT_LE(status.nodes_size(), static_cast<int>(ids.size())) << "job " << job;
      for (const auto& node : status.nodes()) {
        ASSERT_LE(node.workers_size(), options.world_size) << "job " << job << " step " << step;
      }
    }
    formed += scheduler.generation() >= 1;
    restarted += scheduler.generation() >= 2;
    clock.Advance(std::chrono::hours(1));  // every timer ends
  }
  // The messages are random, not hopeless: many jobs got as far as running, some restarted.
  EXPECT_GT(formed, 100);
  EXPECT_GT(restarted, 3);
}

TEST(FuzzTest, KeyValueStoreStaysWithinItsBounds) {
  Quiet quiet;
  Random random(11);
  testing::FakeClock clock;
  scheduler::KvLimits limits;
  limits.max_bytes = 1 << 20;
  limits.max_pending_waits = 64;
  scheduler::KvStore store(clock, limits);
  std::vector<scheduler::KvStore::WaitId> waits;
  for (int i = 0; i < 20000; ++i) {
    const std::string key =
        random.Chance(80) ? "k" + std::to_string(random.Int(0, 50)) : random.Text();
    switch (random.Int(0, 6)) {
      case 0:
        (void)store.Put(key, std::string(static_cast<size_t>(random.Int(0, 100000)), 'v'));
        break;
      case 1:
        waits.push_back(
            store.Get(key, milliseconds(random.Int(-1, 500)), [](absl::StatusOr<std::string>) {}));
        break;
      case 2:
        (void)store.Add(key, random.Number());
        break;
      case 3:
        store.Delete(key);
        break;
      case 4:
        waits.push_back(store.Barrier(key, static_cast<int>(random.Number()),
                                      milliseconds(random.Int(-1, 500)), [](absl::Status) {}));
        break;
      case 5:
        if (!waits.empty()) store.CancelWait(random.Pick(waits));
        break;
      default:
        clock.Advance(milliseconds(random.Int(0, 300)));
    }
    ASSERT_LE(store.bytes(), limits.max_bytes) << "iteration " << i;
    ASSERT_LE(store.pending_waits(), limits.max_pending_waits) << "iteration " << i;
  }
  store.CancelAll();
}

TEST(FuzzTest, DaemonSurvivesAnyAgentOrSubmitterMessage) {
  Quiet quiet;
  Random random(3);
  boost::asio::io_context io;
  testing::FakeClock clock;
  // Jobs are never placed here (their configuration is refused), so no server starts.
  daemon::Daemon::Options options;
  options.listen_host = "127.0.0.1";
  daemon::Daemon daemon(io, clock, options,
                        [](const v1::SubmitJob&) -> absl::StatusOr<daemon::Daemon::JobConfig> {
                          return absl::InvalidArgumentError("refused by the test");
                        });
  std::vector<int> agents, submitters;
  for (int i = 0; i < 5000; ++i) {
    switch (random.Int(0, 5)) {
      case 0:
        agents.push_back(daemon.AddAgent(std::make_shared<daemon::Daemon::AgentStream::Handle>()));
        break;
      case 1:
        submitters.push_back(
            daemon.AddSubmitter(std::make_shared<daemon::Daemon::SubmitStream::Handle>()));
        break;
      case 2:
        if (!agents.empty()) {
          v1::AgentEvent event;
          auto* reg = event.mutable_register_();
          reg->set_name(random.Text());
          reg->set_address(random.Chance(50) ? "10.0.0.2" : random.Text());
          reg->set_slots(static_cast<int32_t>(random.Number()));
          reg->set_pid(static_cast<int32_t>(random.Number()));
          if (random.Chance(30)) {
            event.mutable_exited()->set_job_id(random.Text());
          } else if (random.Chance(20)) {
            event.mutable_output()->set_job_id(random.Text());
            event.mutable_output()->set_data(random.Text());
          }
          daemon.OnAgentEvent(random.Pick(agents), event);
        }
        break;
      case 3:
        if (!submitters.empty()) {
          v1::SubmitEvent event;
          if (random.Chance(20)) {
            event.mutable_stop()->set_signal(static_cast<int32_t>(random.Number()));
            event.mutable_stop()->set_reason(random.Text());
          } else {
            auto* job = event.mutable_job();
            auto* spec = job->mutable_spec();
            for (const char* name : {"worker_num", "local_worker_num", "cluster_time_out",
                                     "bind_core", "heartbeat_interval"}) {
              if (random.Chance(70)) (*spec->mutable_options())[name] = random.Text();
            }
            if (random.Chance(20)) (*spec->mutable_options())[random.Text()] = random.Text();
            job->set_local_worker_num_given(random.Chance(50));
            spec->set_task_script(random.Text());
            for (int n = random.Int(0, 3); n > 0; --n) spec->add_task_args(random.Text());
          }
          daemon.OnSubmitEvent(random.Pick(submitters), event);
        }
        break;
      case 4:
        if (!agents.empty()) daemon.OnAgentGone(random.Pick(agents));
        if (!submitters.empty()) daemon.OnSubmitterGone(random.Pick(submitters));
        break;
      default:
        clock.Advance(milliseconds(random.Int(0, 40000)));
    }
    (void)daemon.Status();
  }
  EXPECT_TRUE(daemon.idle());
}

}  // namespace
}  // namespace gangrun
