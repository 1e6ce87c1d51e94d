#include "common/event_loop.h"

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <vector>

namespace gangrun::common {
namespace {

using std::chrono::milliseconds;

TEST(EventLoopTest, WithoutCoalescingItIsRun) {
  boost::asio::io_context io;
  int ran = 0;
  for (int i = 0; i < 3; ++i) boost::asio::post(io, [&] { ++ran; });
  RunEventLoop(io, nullptr);
  EXPECT_EQ(ran, 3);
}

TEST(EventLoopTest, CoalescingRunsEveryHandlerInOrderAndEndsWithTheWork) {
  boost::asio::io_context io;
  std::vector<int> order;
  int asked = 0;
  boost::asio::post(io, [&] {
    order.push_back(1);
    boost::asio::post(io, [&] { order.push_back(3); });
  });
  boost::asio::post(io, [&] { order.push_back(2); });
  boost::asio::steady_timer timer(io, milliseconds(5));
  timer.async_wait([&](const boost::system::error_code&) { order.push_back(4); });
  RunEventLoop(
      io,
      [&] {
        ++asked;
        return true;
      },
      std::chrono::microseconds(100));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_GE(asked, 1) << "each round asks whether to pause";
}

TEST(EventLoopTest, AStoppedLoopEndsAlthoughWorkRemains) {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);  // work that never ends by itself
  int after_stop = 0;
  boost::asio::post(io, [&] {
    io.stop();
    boost::asio::post(io, [&] { ++after_stop; });
  });
  RunEventLoop(io, [] { return true; });
  EXPECT_TRUE(io.stopped());
  EXPECT_EQ(after_stop, 0);
}

}  // namespace
}  // namespace gangrun::common
