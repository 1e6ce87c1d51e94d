// gangrun-bench store --store etcd://HOST:PORT [--requests N]
//
// What a job's store costs per request through the client gangrun uses (store/etcd_client.h:
// etcd's v3 API over gRPC): N reads of the scheduler key, N fenced record writes (the
// transaction a scheduler sends at each generation), N lease keep-alives, one after another
// from one thread. The last line printed is JSON. A benchmark, not a test; compare it with
// etcd's JSON gateway (bench/README.md, "A store of record").

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/sim_cluster.h"
#include "store/run_store.h"

namespace gangrun::bench {
namespace {

using Clock = std::chrono::steady_clock;

double MicrosPer(Clock::time_point start, int n) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / n;
}

}  // namespace

int StoreMain(const std::vector<std::string>& args) {
  std::string url;
  int requests = 1000;
  const Flags flags = {
      {"--store",
       [&url](const std::string& v) {
         url = v;
         return "";
       }},
      {"--requests", IntFlag(requests, 1)},
  };
  if (auto code = ParseFlags(args,
                             "usage: gangrun-bench store --store etcd://HOST:PORT "
                             "[--requests N]\n",
                             flags)) {
    return *code;
  }
  auto config = store::ParseStoreUrl(url);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  auto client = store::EtcdClient::Connect(*config);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", std::string(client.status().message()).c_str());
    return 2;
  }
  store::RunStore run(std::move(*client), "bench-store-" + std::to_string(getpid()));
  auto lease = run.client().GrantLease(10);
  if (!lease.ok()) {
    std::fprintf(stderr, "%s\n", std::string(lease.status().message()).c_str());
    return 1;
  }
  store::SchedulerInfo me;
  me.host = "bench";
  me.address = "127.0.0.1:1";
  me.pid = static_cast<int>(getpid());
  auto campaign = run.Run(me, *lease);
  if (!campaign.ok() || !campaign->won) return 1;
  const int64_t term = campaign->scheduler.term;
  auto start = Clock::now();
  for (int i = 0; i < requests; ++i) (void)run.Scheduler();
  const double read_us = MicrosPer(start, requests);
  store::Record record;
  record.value = {{"generation", 0}, {"restarts_used", 0}, {"members", nlohmann::json::array()}};
  start = Clock::now();
  for (int i = 0; i < requests; ++i) {
    record.value["generation"] = i;
    auto written = run.WriteRecord(term, record);
    if (!written.ok() || !*written) return 1;
  }
  const double write_us = MicrosPer(start, requests);
  start = Clock::now();
  for (int i = 0; i < requests; ++i) (void)run.client().KeepAlive(*lease);
  const double keepalive_us = MicrosPer(start, requests);
  (void)run.client().Delete(run.record_key());
  run.GiveUp(term, *lease);
  std::printf(
      "{\"requests\": %d, \"read_us\": %.1f, \"fenced_write_us\": %.1f, "
      "\"keepalive_us\": %.1f}\n",
      requests, read_us, write_us, keepalive_us);
  return 0;
}

}  // namespace gangrun::bench
