#pragma once
// The launcher's event loop, which may batch its wake-ups.
//
// A scheduler with thousands of remote nodes gets their heartbeats spread evenly over each
// interval: 12,500 nodes at 1 Hz woke its thread 12,500 times a second, and on a VM a
// wake-up (the switch into and out of epoll_wait) cost as much as the heartbeat's own work.
// While `coalesce()` is true, every round of ready handlers is followed by a pause of
// `pause`, and the next round takes everything that arrived meanwhile in one epoll_wait:
// one wake-up per pause instead of one per arrival, for at most `pause` more latency on
// anything that comes while the loop is busy. An idle loop blocks as before and wakes at
// once for the first arrival.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>

namespace gangrun::common {

inline constexpr std::chrono::milliseconds kCoalescingPause{1};

// Runs `io` until it is stopped or runs out of work.
void RunEventLoop(boost::asio::io_context& io, const std::function<bool()>& coalesce,
                  std::chrono::microseconds pause = kCoalescingPause);

}  // namespace gangrun::common
