// The one thing a task thread waits on: new input, a mail, or a deadline.
// Producers, the mailbox and source readers call wake(); the task sleeps in
// waitUntil() only after it found nothing to do, and a wake() that comes in
// between is not lost (the flag stays set).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace sluice::runtime {

class TaskWaker {
 public:
  using Clock = std::chrono::steady_clock;

  void wake() {
    {
      std::lock_guard lock(mu_);
      signaled_ = true;
    }
    cv_.notify_one();
  }

  void waitUntil(Clock::time_point deadline) {
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, deadline, [&] { return signaled_; });
    signaled_ = false;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool signaled_ = false;
};

}  // namespace sluice::runtime
