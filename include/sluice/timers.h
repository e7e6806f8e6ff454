// What a keyed process function sees of time (Flink's TimerService): the
// current processing time and watermark, and timers for the current key.
//
// Event-time timers fire when the watermark passes them, processing-time
// timers when the clock does; each fires once, in timestamp order, with its
// key made current. At most one timer exists per (key, timestamp) and domain:
// registering the same timestamp twice keeps one. Timers are checkpointed
// with the operator's keyed state and follow their keys when a job is
// rescaled.
#pragma once

#include <cstdint>

#include <sluice/core/stream_element.h>

namespace sluice {

class TimerService {
 public:
  virtual ~TimerService() = default;
  virtual int64_t currentProcessingTime() const = 0;
  virtual int64_t currentWatermark() const = 0;
  // For the current key. Registering the same timestamp twice keeps one timer.
  virtual void registerProcessingTimeTimer(int64_t time) = 0;
  virtual void registerEventTimeTimer(int64_t time) = 0;
  virtual void deleteProcessingTimeTimer(int64_t time) = 0;
  virtual void deleteEventTimeTimer(int64_t time) = 0;
};

}  // namespace sluice
