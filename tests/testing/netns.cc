#include "tests/testing/netns.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>

namespace gangrun::testing {
namespace {

std::atomic<int> next_pair{0};

std::vector<std::string> In(const std::string& ns, const std::vector<std::string>& argv) {
  std::vector<std::string> out = {"/usr/bin/env", "ip", "netns", "exec", ns};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

}  // namespace

TwoHosts::TwoHosts() {
  const std::string id = std::to_string(getpid()) + "-" + std::to_string(next_pair++);
  a_ = "gangrun-a-" + id;
  b_ = "gangrun-b-" + id;
  // Interface names have at most 15 characters.
  const std::string short_id = std::to_string(getpid() % 100000) + std::to_string(next_pair % 10);
  veth_a_ = "gra" + short_id;
  veth_b_ = "grb" + short_id;
  if (!Shell("ip netns add " + a_)) return;
  if (!Shell("ip netns add " + b_)) return;
  ok_ = Shell("ip link add " + veth_a_ + " type veth peer name " + veth_b_) &&
        Shell("ip link set " + veth_a_ + " netns " + a_) &&
        Shell("ip link set " + veth_b_ + " netns " + b_) &&
        Shell("ip -n " + a_ + " addr add " + kAddressA + "/24 dev " + veth_a_) &&
        Shell("ip -n " + b_ + " addr add " + kAddressB + "/24 dev " + veth_b_) &&
        Shell("ip -n " + a_ + " link set " + veth_a_ + " up") &&
        Shell("ip -n " + b_ + " link set " + veth_b_ + " up") &&
        Shell("ip -n " + a_ + " link set lo up") && Shell("ip -n " + b_ + " link set lo up");
}

TwoHosts::~TwoHosts() {
  Shell("ip netns del " + a_);
  Shell("ip netns del " + b_);
}

std::vector<std::string> TwoHosts::InA(const std::vector<std::string>& argv) const {
  return In(a_, argv);
}

std::vector<std::string> TwoHosts::InB(const std::vector<std::string>& argv) const {
  return In(b_, argv);
}

bool TwoHosts::Cut() {
  return Shell("ip netns exec " + a_ + " iptables -I INPUT -s " + kAddressB + " -j DROP") &&
         Shell("ip netns exec " + b_ + " iptables -I INPUT -s " + kAddressA + " -j DROP");
}

bool TwoHosts::Heal() {
  return Shell("ip netns exec " + a_ + " iptables -D INPUT -s " + kAddressB + " -j DROP") &&
         Shell("ip netns exec " + b_ + " iptables -D INPUT -s " + kAddressA + " -j DROP");
}

}  // namespace gangrun::testing
