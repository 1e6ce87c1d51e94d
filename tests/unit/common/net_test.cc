// common/net.h: which of a host's advertised addresses a client keeps.

#include "common/net.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace gangrun::common {
namespace {

using std::chrono::milliseconds;

// A listener on a free loopback port, closed at the end.
class Listener {
 public:
  Listener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(address);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), len) == 0 && listen(fd_, 8) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &len) == 0) {
      port_ = ntohs(address.sin_port);
    }
  }
  ~Listener() { close(fd_); }
  std::string Address() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A loopback port nobody listens on (it refuses at once).
std::string Refusing() {
  Listener gone;
  return gone.Address();  // closed when `gone` goes
}

TEST(FirstThatAnswersTest, KeepsTheFirstInOrderThatAccepts) {
  Listener first, second;
  ASSERT_NE(first.port(), 0);
  ASSERT_NE(second.port(), 0);
  EXPECT_EQ(FirstThatAnswers({first.Address(), second.Address()}, milliseconds(2000)),
            first.Address());
  EXPECT_EQ(FirstThatAnswers({second.Address(), first.Address()}, milliseconds(2000)),
            second.Address());
}

TEST(FirstThatAnswersTest, PassesOverAddressesThatRefuseOrAreNotAddresses) {
  Listener listening;
  ASSERT_NE(listening.port(), 0);
  EXPECT_EQ(FirstThatAnswers({Refusing(), "not-an-address:1", "10.0.0.1", listening.Address()},
                             milliseconds(2000)),
            listening.Address());
}

TEST(FirstThatAnswersTest, NoneAnsweringIsEmpty) {
  EXPECT_EQ(FirstThatAnswers({Refusing(), Refusing()}, milliseconds(2000)), "");
  EXPECT_EQ(FirstThatAnswers({}, milliseconds(2000)), "");
}

TEST(FirstThatAnswersTest, TriesAtMostItsBound) {
  Listener listening;
  ASSERT_NE(listening.port(), 0);
  std::vector<std::string> candidates(kMaxCandidates, Refusing());
  candidates.push_back(listening.Address());  // one past the bound: never dialled
  EXPECT_EQ(FirstThatAnswers(candidates, milliseconds(2000)), "");
}

TEST(FirstRoutableTest, LoopbackIsRoutedAndGarbageIsNot) {
  EXPECT_EQ(FirstRoutable({"not an address", "127.0.0.1"}), "127.0.0.1");
  EXPECT_EQ(FirstRoutable({"not an address"}), "");
}

}  // namespace
}  // namespace gangrun::common
