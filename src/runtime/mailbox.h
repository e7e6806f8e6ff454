// Mailbox: actions other threads hand to a task thread (split assignments,
// cancellation, later timers and checkpoint triggers). The task runs them
// between elements, so operator code never needs a lock.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <mutex>

#include "runtime/task_waker.h"

namespace sluice::runtime {

class Mailbox {
 public:
  explicit Mailbox(TaskWaker& waker) : waker_(waker) {}

  // Any thread.
  void post(std::function<void()> mail) {
    {
      std::lock_guard lock(mu_);
      mails_.push_back(std::move(mail));
      hasMail_.store(true, std::memory_order_release);
    }
    waker_.wake();
  }

  // Task thread: cheap check, no lock.
  bool hasMail() const { return hasMail_.load(std::memory_order_acquire); }

  // Task thread: runs every queued mail, including ones posted meanwhile.
  void runAll() {
    for (;;) {
      std::deque<std::function<void()>> batch;
      {
        std::lock_guard lock(mu_);
        if (mails_.empty()) {
          hasMail_.store(false, std::memory_order_release);
          return;
        }
        batch.swap(mails_);
      }
      for (auto& m : batch) m();
    }
  }

  void clear() {
    std::lock_guard lock(mu_);
    mails_.clear();
    hasMail_.store(false, std::memory_order_release);
  }

 private:
  TaskWaker& waker_;
  std::mutex mu_;
  std::deque<std::function<void()>> mails_;
  std::atomic<bool> hasMail_{false};
};

}  // namespace sluice::runtime
