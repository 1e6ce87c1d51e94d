// The budget of opened sessions that have not joined (scheduler/session_port.h): each may hold
// a partial frame of up to 64 KiB, so their number is bounded per port; at the bound the one
// that has waited longest is closed, and a node, whose join leaves with its opening, still
// joins.

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <future>

#include "node/session_link.h"
#include "node/tcp_link.h"
#include "rpc/frame_format.h"
#include "scheduler/session_port.h"
#include "tests/testing/scheduler_server_fixture.h"
#include "tests/testing/session_client.h"

namespace gangrun::scheduler {
namespace {

using std::chrono::seconds;
using testing::SessionClient;
using testing::TestJoin;

class SessionBudgetTest : public testing::SchedulerServerFixture {
 protected:
  size_t MaxUnjoined() const override { return 3; }
  void SetUp() override {
    SchedulerServerFixture::SetUp();
    before_shutdown_ = [this] { links_.clear(); };
  }

  // A node's link, made on the io_context, that sends `join`; its first command.
  std::future<v1::NodeCommand> Join(const v1::NodeEvent& join) {
    auto first = std::make_shared<std::promise<v1::NodeCommand>>();
    auto future = first->get_future();
    boost::asio::post(io_, [this, join, first] {
      auto link = NodeLink(Token());
      auto commands = std::make_shared<int>(0);
      link->Connect(
          [first, commands](const v1::NodeCommand& command) {
            if ((*commands)++ == 0) first->set_value(command);
          },
          [](const std::string&, bool) {});
      link->Send(join);
      links_.push_back(std::move(link));
    });
    return future;
  }
  // Whether the scheduler still holds the connection: nothing to read, and no end.
  static bool StillOpen(int fd) {
    char byte;
    return recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN;
  }

  std::vector<std::unique_ptr<node::SessionLink>> links_;  // on the io_context
};

TEST_F(SessionBudgetTest, AtTheBoundTheLongestWaitingUnjoinedSessionIsClosed) {
  // Node 0 joins by hand; the pong that acknowledges its join says the scheduler read it.
  SessionClient joined(server_->port());
  ASSERT_TRUE(joined.Open(Token()).accepted);
  ASSERT_TRUE(joined.SendEvent(TestJoin(0)));
  ASSERT_TRUE(joined.SendPing(0));
  ASSERT_EQ(joined.ReadSealed().first, static_cast<int>(rpc::FrameType::kPong));
  // Three sessions open and say nothing more; a fourth closes the first, which has waited
  // longest, and no session that joined.
  std::vector<std::unique_ptr<SessionClient>> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(std::make_unique<SessionClient>(server_->port()));
    ASSERT_TRUE(idle.back()->Open(Token()).accepted) << "session " << i;
  }
  EXPECT_TRUE(testing::ClosedByPeer(idle[0]->fd()));
  EXPECT_TRUE(StillOpen(joined.fd()));
  // Node 1 opens (closing the next idle session) and joins in the same write: the job forms.
  auto started = Join(TestJoin(1));
  ASSERT_EQ(started.wait_for(seconds(20)), std::future_status::ready);
  EXPECT_TRUE(started.get().has_start());
  auto command = joined.ReadCommand();
  ASSERT_TRUE(command.has_value());
  EXPECT_TRUE(command->has_start()) << command->DebugString();
  EXPECT_TRUE(testing::ClosedByPeer(idle[1]->fd()));
  EXPECT_TRUE(StillOpen(idle[2]->fd()));
  EXPECT_TRUE(StillOpen(idle[3]->fd()));
}

}  // namespace
}  // namespace gangrun::scheduler
