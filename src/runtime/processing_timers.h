// The processing-time timers of one task's operators: registered through
// OperatorContext::registerProcessingTimer, fired on the task thread between
// elements, in timestamp order (registration order among equal ones).
// Task thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include <sluice/core/clock.h>

#include "runtime/task_waker.h"

namespace sluice::runtime {

class ProcessingTimers {
 public:
  // `manualClock`: time moves only when a test moves it, so the task needs
  // no wall-clock deadline (the clock wakes it).
  ProcessingTimers(const Clock& clock, bool manualClock) : clock_(clock), manual_(manualClock) {}

  void add(int64_t timestamp, std::function<void(int64_t)> callback) {
    timers_.push(Timer{timestamp, sequence_++, std::move(callback)});
  }

  // Fires the timers that are due, stopping early when `stop()` says so.
  // Returns the steady-clock time at which the next one is due (max() when
  // none is, or when a manual clock drives time).
  template <class Stop>
  TaskWaker::Clock::time_point fireDue(Stop stop) {
    if (timers_.empty()) return TaskWaker::Clock::time_point::max();
    int64_t now = clock_.currentTimeMillis();
    while (!timers_.empty() && timers_.top().timestamp <= now) {
      Timer t = timers_.top();
      timers_.pop();
      t.callback(t.timestamp);
      if (stop()) break;
      now = clock_.currentTimeMillis();
    }
    if (timers_.empty() || manual_) return TaskWaker::Clock::time_point::max();
    return TaskWaker::Clock::now() + std::chrono::milliseconds(timers_.top().timestamp - now);
  }

  // Timers still pending at the end do not fire (Flink's behaviour).
  void clear() { timers_ = {}; }

 private:
  struct Timer {
    int64_t timestamp;
    uint64_t sequence;
    std::function<void(int64_t)> callback;
    bool operator>(const Timer& o) const {
      return timestamp != o.timestamp ? timestamp > o.timestamp : sequence > o.sequence;
    }
  };
  const Clock& clock_;
  const bool manual_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
  uint64_t sequence_ = 0;
};

}  // namespace sluice::runtime
