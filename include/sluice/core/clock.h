// Clock: where the engine reads processing time (TTL, processing-time timers).
//
// Production code uses SystemClock; tests install a ManualClock and move time
// by hand, so no test waits on wall time. Both are thread-safe: RocksDB's
// compaction filter reads the clock from a background thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

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

class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t startMillis = 0) : now_(startMillis) {}
  int64_t currentTimeMillis() const override { return now_.load(std::memory_order_acquire); }
  void setCurrentTime(int64_t millis) { now_.store(millis, std::memory_order_release); }
  void advance(int64_t millis) { now_.fetch_add(millis, std::memory_order_acq_rel); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace sluice
