#include "tests/testing/etcd_cluster.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include "store/etcd_client.h"
#include "tests/testing/netns.h"
#include "tests/testing/test_util.h"

namespace gangrun::testing {
namespace {

constexpr char kEtcd[] = "/usr/bin/etcd";

}  // namespace

EtcdCluster::EtcdCluster(const std::string& dir, int members, const Tls* tls) : dir_(dir) {
  mkdir(dir.c_str(), 0700);
  if (access(kEtcd, X_OK) != 0) {
    error_ = std::string(kEtcd) + " is missing: deploy/install-deps.sh installs etcd-server";
    return;
  }
  std::vector<std::string> peer_ports;
  std::string cluster;
  for (int i = 0; i < members; ++i) {
    client_ports_.push_back(FreePort());
    peer_ports.push_back(FreePort());
    cluster += (i ? "," : "") + std::string("m") + std::to_string(i) +
               "=http://127.0.0.1:" + peer_ports.back();
  }
  const std::string scheme = tls ? "https" : "http";
  for (int i = 0; i < members; ++i) {
    const std::string name = "m" + std::to_string(i);
    const std::string client = scheme + "://127.0.0.1:" + client_ports_[i];
    const std::string peer = "http://127.0.0.1:" + peer_ports[i];
    std::vector<std::string> argv = {kEtcd,
                                     "--name=" + name,
                                     "--data-dir=" + dir + "/" + name,
                                     "--listen-client-urls=" + client,
                                     "--advertise-client-urls=" + client,
                                     "--listen-peer-urls=" + peer,
                                     "--initial-advertise-peer-urls=" + peer,
                                     "--initial-cluster=" + cluster,
                                     "--initial-cluster-state=new",
                                     "--initial-cluster-token=gangrun-test",
                                     "--heartbeat-interval=50",
                                     "--election-timeout=500",
                                     "--log-level=warn",
                                     "--logger=zap"};
    if (tls) {
      argv.push_back("--cert-file=" + tls->cert);
      argv.push_back("--key-file=" + tls->key);
      argv.push_back("--trusted-ca-file=" + tls->ca);
      argv.push_back("--client-cert-auth");
    }
    pids_.push_back(Launch(argv, {}, dir, dir).pid);
  }
  started_ = WaitWritable(tls);
}

EtcdCluster::EtcdCluster(const std::string& dir, const Hosts& hosts, int host) : dir_(dir) {
  mkdir(dir.c_str(), 0700);
  if (access(kEtcd, X_OK) != 0) {
    error_ = std::string(kEtcd) + " is missing: deploy/install-deps.sh installs etcd-server";
    return;
  }
  address_ = hosts.Address(host);
  client_ports_.push_back(FreePort());
  // Every address the host has (a host on two networks is reached on both).
  std::string client;
  for (const auto& address : hosts.Addresses(host)) {
    if (address != address_) also_.push_back(address);
    client +=
        (client.empty() ? "" : ",") + std::string("http://") + address + ":" + client_ports_[0];
  }
  const std::string peer = "http://" + address_ + ":" + FreePort();
  pids_.push_back(
      Launch(hosts.In(host, {kEtcd, "--name=m0", "--data-dir=" + dir + "/m0",
                             "--listen-client-urls=" + client, "--advertise-client-urls=" + client,
                             "--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
                             "--initial-cluster=m0=" + peer, "--initial-cluster-state=new",
                             "--log-level=warn", "--logger=zap"}),
             {}, dir, dir)
          .pid);
  started_ = WaitWritableIn(hosts, host);
}

bool EtcdCluster::WaitWritableIn(const Hosts& hosts, int host) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    // etcd's own client, from the member's host (the test's namespace cannot reach it).
    auto put = Launch(hosts.In(host, {"/usr/bin/etcdctl", "--endpoints=http://" + Endpoint(0),
                                      "--dial-timeout=1s", "put", "/gangrun-test/ready", "1"}),
                      {"ETCDCTL_API=3"}, dir_, dir_);
    auto status = WaitExit(put.pid, std::chrono::seconds(10));
    if (status && status->code == 0) return true;
    if (std::chrono::steady_clock::now() > deadline) {
      error_ = "etcd in test host " + std::to_string(host) + " takes no writes: " + put.Stderr();
      return false;
    }
  }
}

EtcdCluster::~EtcdCluster() { KillAll(); }

bool EtcdCluster::WaitWritable(const Tls* tls) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (size_t i = 0; i < client_ports_.size(); ++i) {
    auto config =
        store::ParseStoreUrl("etcd://" + Endpoint(static_cast<int>(i)), tls ? tls->ca : "",
                             tls ? tls->cert : "", tls ? tls->key : "");
    if (!config.ok()) return (error_ = std::string(config.status().message())), false;
    auto client = store::EtcdClient::Connect(*config);
    if (!client.ok()) return (error_ = std::string(client.status().message())), false;
    for (;;) {
      auto put = (*client)->Put("/gangrun-test/ready", "1");
      if (put.ok()) break;
      if (std::chrono::steady_clock::now() > deadline) {
        error_ = "etcd member " + std::to_string(i) +
                 " takes no writes: " + std::string(put.status().message());
        return false;
      }
    }
  }
  return true;
}

std::string EtcdCluster::Url() const {
  std::string url = "etcd://";
  for (size_t i = 0; i < client_ports_.size(); ++i) {
    url += (i ? "," : "") + Endpoint(static_cast<int>(i));
  }
  for (const auto& address : also_) url += "," + address + ":" + client_ports_[0];
  return url;
}

std::string EtcdCluster::Endpoint(int member) const {
  return address_ + ":" + client_ports_.at(member);
}

void EtcdCluster::Kill(int member) {
  pid_t& pid = pids_.at(member);
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  (void)WaitExit(pid, std::chrono::seconds(10));
  pid = -1;
}

void EtcdCluster::KillAll() {
  for (size_t i = 0; i < pids_.size(); ++i) Kill(static_cast<int>(i));
}

}  // namespace gangrun::testing
