#pragma once
// Two test hosts in network namespaces the test makes itself, joined by a private veth link
// (10.201.0.1 and 10.201.0.2: nothing leaves this machine), and cuts between them: iptables
// drops what each side receives from the other, as a switch that loses every packet would.

#include <string>
#include <vector>

#include "tests/testing/test_util.h"  // Shell

namespace gangrun::testing {

class TwoHosts {
 public:
  static constexpr char kAddressA[] = "10.201.0.1";
  static constexpr char kAddressB[] = "10.201.0.2";

  TwoHosts();
  ~TwoHosts();
  TwoHosts(const TwoHosts&) = delete;
  TwoHosts& operator=(const TwoHosts&) = delete;

  // False when the namespaces could not be made (not root, no iproute2) or wired.
  bool ok() const { return ok_; }
  // `argv` run inside host a or b.
  std::vector<std::string> InA(const std::vector<std::string>& argv) const;
  std::vector<std::string> InB(const std::vector<std::string>& argv) const;
  // Cuts the link both ways (every packet lost), or heals it; true when iptables did.
  bool Cut();
  bool Heal();

 private:
  std::string a_, b_, veth_a_, veth_b_;
  bool ok_ = false;
};

}  // namespace gangrun::testing
