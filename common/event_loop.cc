#include "common/event_loop.h"

#include <thread>

namespace gangrun::common {

void RunEventLoop(boost::asio::io_context& io, const std::function<bool()>& coalesce,
                  std::chrono::microseconds pause) {
  if (!coalesce) {
    io.run();
    return;
  }
  while (!io.stopped()) {
    if (io.run_one() == 0) return;  // blocks until a handler ran; 0: no work left
    io.poll();                      // and whatever else is ready now
    if (!io.stopped() && coalesce()) std::this_thread::sleep_for(pause);
  }
}

}  // namespace gangrun::common
