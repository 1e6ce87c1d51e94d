#pragma once
// Runs an io_context until a condition holds or a deadline passes: how a unit test waits for
// what its loop delivers (nothing sleeps to synchronise).

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>

namespace gangrun::testing {

// True when `done()` held before `timeout`.
inline bool RunUntil(boost::asio::io_context& io, const std::function<bool()>& done,
                     std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_one_for(std::chrono::milliseconds(100));
  }
  return done();
}

}  // namespace gangrun::testing
