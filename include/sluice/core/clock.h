// Clock: where the engine reads processing time (TTL, processing-time timers).
//
// Production code uses SystemClock; tests install a ManualClock and move time
// by hand, so no test waits on wall time. Both are thread-safe: RocksDB's
// compaction filter reads the clock from a background thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace sluice {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch.
  virtual int64_t currentTimeMillis() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t currentTimeMillis() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  // The process-wide instance.
  static SystemClock& instance() {
    static SystemClock clock;
    return clock;
  }
};

// Time that moves only when a test moves it. Tasks waiting for a
// processing-time timer subscribe with onAdvance() and are woken on every
// change, so no test waits on wall time.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t startMillis = 0) : now_(startMillis) {}
  int64_t currentTimeMillis() const override { return now_.load(std::memory_order_acquire); }
  void setCurrentTime(int64_t millis) {
    now_.store(millis, std::memory_order_release);
    notify();
  }
  void advance(int64_t millis) {
    now_.fetch_add(millis, std::memory_order_acq_rel);
    notify();
  }

  // Calls `listener` (on the advancing thread) after every change until
  // removeListener(id). Thread-safe.
  int64_t addListener(std::function<void()> listener) const {
    std::lock_guard lock(mu_);
    listeners_.emplace(++lastId_, std::move(listener));
    return lastId_;
  }
  void removeListener(int64_t id) const {
    std::lock_guard lock(mu_);
    listeners_.erase(id);
  }

 private:
  void notify() {
    std::lock_guard lock(mu_);
    for (auto& [id, l] : listeners_) l();
  }
  std::atomic<int64_t> now_;
  mutable std::mutex mu_;
  mutable std::map<int64_t, std::function<void()>> listeners_;
  mutable int64_t lastId_ = 0;
};

}  // namespace sluice
