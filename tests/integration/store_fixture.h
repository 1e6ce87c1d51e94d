#pragma once
// A job with a store of record, against real etcd members on loopback ports: the fixture of
// store_test.cc and store_pause_test.cc (one suite, so not in an anonymous namespace).

#include <signal.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "store/run_store.h"
#include "tests/integration/launcher_fixture.h"
#include "tests/testing/etcd_cluster.h"

namespace gangrun::testing {

class StoreTest : public LauncherTest {
 protected:
  void TearDown() override {
    etcd_.reset();  // its members are our children too
    LauncherTest::TearDown();
  }

  // Starts the store; the test fails loudly when etcd cannot start.
  void StartStore(int members, const EtcdCluster::Tls* tls = nullptr) {
    etcd_ = std::make_unique<EtcdCluster>(dir_.File("etcd"), members, tls);
    ASSERT_TRUE(etcd_->started()) << etcd_->error();
  }

  std::vector<std::string> Job(const std::string& workers, int local,
                               std::vector<std::string> more = {}) {
    std::vector<std::string> args = {
        "--store",       etcd_->Url(), "--run_id",           run_,
        "--worker_num",  workers,      "--local_worker_num", std::to_string(local),
        "--master_port", port_,        "--node_timeout",     "2"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }
  std::vector<std::string> Worker() { return {"--wait-file", go_}; }
  void Go() { std::ofstream(go_) << "go\n"; }

  std::unique_ptr<store::RunStore> Store() {
    auto config = store::ParseStoreUrl(etcd_->Url());
    EXPECT_TRUE(config.ok());
    auto client = store::EtcdClient::Connect(*config);
    EXPECT_TRUE(client.ok());
    return std::make_unique<store::RunStore>(std::move(*client), run_);
  }
  // The scheduler the store names, once it names one whose term is not `old_term`.
  store::SchedulerInfo WaitScheduler(int64_t old_term = 0) {
    auto run = Store();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      auto holder = run->Scheduler();
      if (holder.ok() && holder->has_value() && (*holder)->term != old_term) return **holder;
    }
    ADD_FAILURE() << "the store names no (new) scheduler";
    return {};
  }
  // Two launchers of a fixed job of 4 workers, once they run: the one whose scheduler the
  // store names, the other one, and that scheduler.
  struct Pair {
    Launched coordinating;
    Launched other;
    store::SchedulerInfo scheduler;
  };
  Pair StartFixedPair(const std::vector<std::string>& more = {}) {
    Launched a = Start(Job("4", 2, more), Worker());
    Launched b = Start(Job("4", 2, more), Worker());
    WaitReady(4);
    const store::SchedulerInfo scheduler = WaitScheduler();
    if (scheduler.pid == a.pid) return {a, b, scheduler};
    return {b, a, scheduler};
  }
  // Every version the record had, oldest first: (term that wrote it, generation).
  std::vector<std::pair<int64_t, uint64_t>> RecordHistory() {
    auto run = Store();
    std::vector<std::pair<int64_t, uint64_t>> history;
    auto latest = run->client().Get(run->record_key());
    if (!latest.ok() || !latest->has_value()) return history;
    std::vector<mvccpb::KeyValue> versions = {**latest};
    // Walk back: the version before each one is the key as of its revision - 1.
    while (versions.back().version() > 1) {
      auto before = run->client().Get(run->record_key(), versions.back().mod_revision() - 1);
      if (!before.ok() || !before->has_value()) break;
      versions.push_back(**before);
    }
    for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
      auto value = nlohmann::json::parse(it->value());
      history.emplace_back(value.value("term", int64_t{0}), value.value("generation", uint64_t{0}));
    }
    return history;
  }

  std::unique_ptr<EtcdCluster> etcd_;
  const std::string port_ = FreePort();
  const std::string run_ = "store-test-" + port_;
  const std::string go_ = dir_.File("go");
};

}  // namespace gangrun::testing
