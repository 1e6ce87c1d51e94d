#pragma once
// Real etcd members (Debian's etcd-server) on free loopback ports, for the tests of a job's
// store of record: one member or a cluster, with TLS to the clients when asked. Never a mock.

#include <sys/types.h>

#include <string>
#include <vector>

namespace gangrun::testing {

class Hosts;

class EtcdCluster {
 public:
  struct Tls {
    std::string ca, cert, key;  // the members' certificate and key; clients must be signed by ca
  };
  // Starts `members` members with their data under `dir` and waits (30 s at most) until the
  // cluster takes writes through every member. started() says whether it did.
  EtcdCluster(const std::string& dir, int members, const Tls* tls = nullptr);
  // One member inside test host `host` (tests/testing/netns.h), on that host's address, for
  // launchers on other hosts.
  EtcdCluster(const std::string& dir, const Hosts& hosts, int host);
  ~EtcdCluster();  // kills and reaps every member
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  bool started() const { return started_; }
  const std::string& error() const { return error_; }
  // etcd://127.0.0.1:P0,127.0.0.1:P1,... (the host's addresses for a member in a test host,
  // network 0's first)
  std::string Url() const;
  std::string Endpoint(int member) const;  // 127.0.0.1:P
  void Kill(int member);                   // SIGKILL, reaped
  void KillAll();

 private:
  bool WaitWritable(const Tls* tls);
  bool WaitWritableIn(const Hosts& hosts, int host);
  std::string address_ = "127.0.0.1";
  std::vector<std::string> also_;  // the test host's other addresses (one member), for Url()
  std::vector<std::string> client_ports_;
  std::vector<pid_t> pids_;
  std::string dir_;
  bool started_ = false;
  std::string error_;
};

}  // namespace gangrun::testing
