#pragma once
// The store's own thread: what the launcher's event loop asks of the store runs here, one
// task after another, so that a slow or unreachable etcd never blocks the loop. A task posts
// its result back to the loop itself (boost::asio::post).

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace gangrun::store {

class Worker {
 public:
  Worker() : thread_([this] { Loop(); }) {}
  ~Worker() {  // runs what was posted, then stops
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      wake_.notify_all();
    }
    thread_.join();
  }
  void Post(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
    // Under the lock: once the task is taken, the poster no longer touches the condition
    // variable, so the worker may be destroyed (ThreadSanitizer saw the other order).
    wake_.notify_one();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      wake_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gangrun::store
