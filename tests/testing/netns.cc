#include "tests/testing/netns.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>

namespace gangrun::testing {
namespace {

std::atomic<int> next_set{0};

}  // namespace

Hosts::Hosts(int count, enum Name name) {
  const int set = next_set++;
  const std::string id = std::to_string(getpid()) + "-" + std::to_string(set);
  short_id_ = std::to_string(getpid() % 100000) + std::to_string(set % 10);
  switch_ = "gangrun-sw-" + id;
  if (!Shell("ip netns add " + switch_) || AddNetwork() != 0) return;
  for (int i = 0; i < count; ++i) {
    const std::string ns = "gangrun-h" + std::to_string(i) + "-" + id;
    names_.push_back(ns);
    on_.emplace_back();
    if (!Shell("ip netns add " + ns) || !Shell("ip -n " + ns + " link set lo up") || !Wire(i, 0)) {
      return;
    }
    // `ip netns exec` mounts /etc/netns/<ns>/<file> over /etc/<file>.
    const std::string etc = "/etc/netns/" + ns;
    mkdir("/etc/netns", 0755);
    mkdir(etc.c_str(), 0755);
    // Every other host by its name; this host's own name as `name` says.
    std::ofstream hosts_file(etc + "/hosts");
    hosts_file << "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n";
    for (int j = 0; j < count; ++j) {
      if (j != i && name != Name::kResolvesNowhere) {
        hosts_file << Address(j) << " " << this->Name(j) << "\n";
      }
    }
    if (name == Name::kResolves) hosts_file << Address(i) << " " << this->Name(i) << "\n";
    if (name == Name::kLoopback) hosts_file << "127.0.1.1 " << this->Name(i) << "\n";
  }
  ok_ = true;
}

int Hosts::AddNetwork() {
  const int network = networks_;
  const std::string bridge = Bridge(network);
  if (!Shell("ip -n " + switch_ + " link add " + bridge + " type bridge") ||
      !Shell("ip -n " + switch_ + " link set " + bridge + " up")) {
    return -1;
  }
  ++networks_;
  for (int i = 0; i < size(); ++i) {
    if (!Wire(i, network)) return -1;
  }
  return network;
}

bool Hosts::Wire(int i, int network) {
  const std::string host_end = LinkEnd('h', i, network);
  const std::string switch_end = LinkEnd('s', i, network);
  const std::string bridge = Bridge(network);
  const std::string& ns = names_[i];
  if (!Shell("ip link add " + host_end + " type veth peer name " + switch_end) ||
      !Shell("ip link set " + host_end + " netns " + ns) ||
      !Shell("ip link set " + switch_end + " netns " + switch_) ||
      !Shell("ip -n " + switch_ + " link set " + switch_end + " master " + bridge) ||
      !Shell("ip -n " + switch_ + " link set " + switch_end + " up") ||
      !Shell("ip -n " + ns + " addr add " + Address(i, network) + "/24 dev " + host_end) ||
      !Shell("ip -n " + ns + " link set " + host_end + " up")) {
    return false;
  }
  on_[i].resize(network + 1, false);
  on_[i][network] = true;
  return true;
}

bool Hosts::Leave(int i, int network) {
  if (!Shell("ip -n " + names_[i] + " link del " + LinkEnd('h', i, network))) return false;
  on_[i][network] = false;
  return true;
}

// Interface names have at most 15 characters: "g<pid mod 10^5><set mod 10>[hs]<i>[n<k>]".
std::string Hosts::LinkEnd(char side, int i, int network) const {
  return "g" + short_id_ + side + std::to_string(i) +
         (network ? "n" + std::to_string(network) : "");
}

std::string Hosts::Bridge(int network) const {
  return "gbr" + short_id_ + "n" + std::to_string(network);
}

std::vector<std::string> Hosts::Addresses(int i) const {
  std::vector<std::string> out;
  for (int network = 0; network < static_cast<int>(on_[i].size()); ++network) {
    if (on_[i][network]) out.push_back(Address(i, network));
  }
  return out;
}

Hosts::~Hosts() {
  for (const auto& ns : names_) {
    Shell("ip netns del " + ns);
    std::remove(("/etc/netns/" + ns + "/hosts").c_str());
    rmdir(("/etc/netns/" + ns).c_str());
  }
  Shell("ip netns del " + switch_);
}

std::string Hosts::Address(int i, int network) const {
  return "10." + std::to_string(231 + network) + ".0." + std::to_string(i + 1);
}

std::vector<std::string> Hosts::In(int i, const std::vector<std::string>& argv) const {
  // A UTS namespace of its own, so that the host name is this host's.
  std::vector<std::string> out = {"/usr/bin/env",
                                  "ip",
                                  "netns",
                                  "exec",
                                  names_[i],
                                  "unshare",
                                  "--uts",
                                  "--",
                                  "/bin/sh",
                                  "-c",
                                  "hostname \"$0\" && exec \"$@\"",
                                  Name(i)};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

bool Hosts::Cut(int i, int j) {
  return Shell("ip netns exec " + names_[i] + " iptables -I INPUT -s " + Address(j) + " -j DROP") &&
         Shell("ip netns exec " + names_[j] + " iptables -I INPUT -s " + Address(i) + " -j DROP");
}

bool Hosts::Heal(int i, int j) {
  return Shell("ip netns exec " + names_[i] + " iptables -D INPUT -s " + Address(j) + " -j DROP") &&
         Shell("ip netns exec " + names_[j] + " iptables -D INPUT -s " + Address(i) + " -j DROP");
}

// The switch's end of the host's link: the host's own processes see nothing happen (their
// packets leave and are lost), as when its cable or its switch port dies.
bool Hosts::Vanish(int i) {
  return Shell("ip -n " + switch_ + " link set " + LinkEnd('s', i, 0) + " down");
}

bool Hosts::Return(int i) {
  return Shell("ip -n " + switch_ + " link set " + LinkEnd('s', i, 0) + " up");
}

}  // namespace gangrun::testing
