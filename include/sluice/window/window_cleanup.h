// When a window's state is cleaned up and what counts as late, as Flink's
// WindowOperator decides it, for any window type: only the window's
// maxTimestamp() matters.
//
//   cleanup time   event time: maxTimestamp + allowedLateness (saturating at
//                  the maximum timestamp); processing time: maxTimestamp
//   late window    event time only: cleanup time <= watermark
//   late element   event time only: timestamp + allowedLateness <= watermark
//
// A window whose cleanup time is the maximum timestamp needs no cleanup timer
// (the end of time never comes). Plain values; any thread.
#pragma once

#include <cstdint>
#include <string>

#include <sluice/core/stream_element.h>

namespace sluice::window {

class WindowCleanup {
 public:
  WindowCleanup() = default;
  WindowCleanup(bool eventTime, int64_t allowedLateness)
      : eventTime_(eventTime), allowedLateness_(allowedLateness) {}

  bool eventTime() const { return eventTime_; }
  int64_t allowedLateness() const { return allowedLateness_; }

  int64_t cleanupTime(int64_t maxTimestamp) const {
    return eventTime_ ? internal::saturatingAdd(maxTimestamp, allowedLateness_) : maxTimestamp;
  }
  bool needsCleanupTimer(int64_t maxTimestamp) const {
    return cleanupTime(maxTimestamp) != kMaxTimestamp;
  }
  bool isWindowLate(int64_t maxTimestamp, int64_t watermark) const {
    return eventTime_ && cleanupTime(maxTimestamp) <= watermark;
  }
  bool isElementLate(int64_t timestamp, int64_t watermark) const {
    return eventTime_ && internal::saturatingAdd(timestamp, allowedLateness_) <= watermark;
  }

  // Whether merging gave a window an end before the current watermark
  // (event time) or processing time: its state would never be cleaned up.
  // `processingTime` is read for processing-time windows only.
  bool isMergeResultLate(int64_t maxTimestamp, int64_t watermark, int64_t processingTime) const {
    return eventTime_ ? cleanupTime(maxTimestamp) <= watermark : maxTimestamp <= processingTime;
  }
  // Throws, with Flink's message, for such a window (described by `window`).
  [[noreturn]] void failMergeResult(int64_t watermark, int64_t processingTime,
                                    const std::string& window) const;

 private:
  bool eventTime_ = true;
  int64_t allowedLateness_ = 0;
};

}  // namespace sluice::window
