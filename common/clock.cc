#include "common/clock.h"

#include <boost/asio/steady_timer.hpp>

namespace gangrun::common {
namespace {

class AsioTimer : public Timer {
 public:
  AsioTimer(const boost::asio::any_io_executor& executor, Duration delay,
            std::function<void()> callback)
      : timer_(executor, delay), alive_(std::make_shared<bool>(true)) {
    timer_.async_wait(
        [alive = alive_, callback = std::move(callback)](const boost::system::error_code& ec) {
          if (!ec && *alive) {
            *alive = false;
            callback();
          }
        });
  }
  ~AsioTimer() override { Cancel(); }
  void Cancel() override {
    *alive_ = false;
    timer_.cancel();
  }

 private:
  boost::asio::steady_timer timer_;
  std::shared_ptr<bool> alive_;
};

}  // namespace

std::unique_ptr<Timer> AsioClock::After(Duration delay, std::function<void()> callback) {
  return std::make_unique<AsioTimer>(executor_, delay, std::move(callback));
}

}  // namespace gangrun::common
