#pragma once
// Test hosts in network namespaces the test makes itself, so that a test that passes here
// would pass on separate machines: each host has its own loopback (no host reaches another's
// 127.0.0.1), its own address on one bridge (10.231.0.1, .2, ... in a namespace of its own,
// the switch: nothing leaves this machine and nothing is added to the machine's own
// namespace), its own host name (a UTS namespace per command) and its own /etc/hosts
// (/etc/netns/<namespace>/hosts, which `ip netns exec` mounts over /etc/hosts), naming every
// host. Cuts between two hosts drop what each receives from the other (iptables), as a switch
// that loses every packet would; a host can vanish (its link down) and come back.

#include <string>
#include <vector>

#include "tests/testing/test_util.h"  // Shell

namespace gangrun::testing {

class Hosts {
 public:
  // How host names resolve in each host's /etc/hosts.
  enum class Name {
    kResolves,         // every h<i> -> its bridge address, everywhere
    kResolvesNowhere,  // no h<i> resolves anywhere (give addresses)
    kLoopback,         // on host i, h<i> -> 127.0.1.1 (Debian's installer writes that line);
                       // the other hosts resolve it to its bridge address
  };
  explicit Hosts(int count, Name name = Name::kResolves);
  ~Hosts();  // deletes the namespaces and the /etc/netns files
  Hosts(const Hosts&) = delete;
  Hosts& operator=(const Hosts&) = delete;

  // False when the namespaces could not be made (not root, no iproute2) or wired.
  bool ok() const { return ok_; }
  int size() const { return static_cast<int>(names_.size()); }
  // Host i's address on network `network`: 10.<231 + network>.0.<i + 1>.
  std::string Address(int i, int network = 0) const;
  // The addresses host i has now, network 0's first.
  std::vector<std::string> Addresses(int i) const;
  // A second network (a bridge of its own in the switch namespace) with every host on it, as
  // a cluster's data network beside its management one; returns its number, -1 on failure.
  int AddNetwork();
  // Host i leaves `network` for good: its link there is deleted, with its address and route.
  bool Leave(int i, int network);
  // h<i>: the host name inside host i, and the name other hosts know it by.
  std::string Name(int i) const { return "h" + std::to_string(i); }
  // `argv` (argv[0] a path) run inside host i, with its host name set.
  std::vector<std::string> In(int i, const std::vector<std::string>& argv) const;
  // Every packet between hosts i and j lost, or delivered again; true when iptables did.
  bool Cut(int i, int j);
  bool Heal(int i, int j);
  // Host i's link down (it vanishes: no reset, no answer), or up again.
  bool Vanish(int i);
  bool Return(int i);

 private:
  bool Wire(int i, int network);  // host i's link and address on `network`
  // The name of host i's link on `network`: its host's end ('h') or the switch's ('s').
  std::string LinkEnd(char side, int i, int network) const;
  std::string Bridge(int network) const;  // the switch's bridge of `network`

  std::string switch_, short_id_;
  std::vector<std::string> names_;
  int networks_ = 0;
  std::vector<std::vector<bool>> on_;  // on_[i][network]: host i is on that network
  bool ok_ = false;
};

}  // namespace gangrun::testing
