#include <sluice/core/status.h>
#include <sluice/window/window_cleanup.h>

namespace sluice::window {

void WindowCleanup::failMergeResult(int64_t watermark, int64_t processingTime,
                                    const std::string& window) const {
  if (eventTime_) {
    throw SluiceException(
        "The end timestamp of an event-time window cannot become earlier than the current "
        "watermark by merging. Current watermark: " +
        std::to_string(watermark) + " window: " + window);
  }
  throw SluiceException(
      "The end timestamp of a processing-time window cannot become earlier than the current "
      "processing time by merging. Current processing time: " +
      std::to_string(processingTime) + " window: " + window);
}

}  // namespace sluice::window
