// WatermarkValve (Flink's StatusWatermarkValve): turns the watermarks and idleness of many channels
// into one watermark stream for an input, as Flink does:
//   - each channel keeps the highest watermark it sent;
//   - the input's watermark is the minimum over active, aligned channels, and
//     is forwarded only when it increases;
//   - an idle channel is left out; when every channel is idle the input emits
//     IDLE, first flushing the highest channel watermark if the channel that
//     went idle last was holding the output watermark (Flink's rule);
//   - a channel that becomes active again counts only once its watermark has
//     caught up with what was already forwarded, so nothing goes backwards;
//   - an ended channel no longer holds the minimum back.
#pragma once

#include <cstdint>
#include <vector>

#include <sluice/core/stream_element.h>

namespace sluice {

class WatermarkValve {
 public:
  struct Emit {
    bool watermark = false;
    int64_t watermarkValue = kMinTimestamp;
    bool status = false;
    WatermarkStatus statusValue = WatermarkStatus::kActive;
  };

  explicit WatermarkValve(int numberOfChannels) : channels_(numberOfChannels) {}

  Emit onWatermark(int channel, int64_t watermark) {
    Emit out;
    Channel& c = channels_[channel];
    if (c.ended || c.idle || watermark <= c.watermark) return out;
    c.watermark = watermark;
    if (!c.aligned && c.watermark >= lastOutput_) c.aligned = true;
    findAndOutputMin(out);
    return out;
  }

  Emit onStatus(int channel, WatermarkStatus status) {
    Emit out;
    Channel& c = channels_[channel];
    if (c.ended) return out;
    if (status == WatermarkStatus::kIdle && !c.idle) {
      c.idle = true;
      c.aligned = false;
      if (allIdle()) {
        if (c.watermark == lastOutput_) findAndOutputMax(out);
        if (!outputIdle_) {
          outputIdle_ = true;
          out.status = true;
          out.statusValue = WatermarkStatus::kIdle;
        }
      } else {
        findAndOutputMin(out);
      }
    } else if (status == WatermarkStatus::kActive && c.idle) {
      c.idle = false;
      c.aligned = c.watermark >= lastOutput_;
      if (outputIdle_) {
        outputIdle_ = false;
        out.status = true;
        out.statusValue = WatermarkStatus::kActive;
      }
    }
    return out;
  }

  Emit onEndOfPartition(int channel) {
    Emit out;
    channels_[channel].ended = true;
    findAndOutputMin(out);
    return out;
  }

 private:
  struct Channel {
    int64_t watermark = kMinTimestamp;
    bool idle = false;
    bool aligned = true;
    bool ended = false;
  };

  bool allIdle() const {
    for (const auto& c : channels_)
      if (!c.ended && !c.idle) return false;
    return true;
  }

  void findAndOutputMin(Emit& out) {
    bool any = false;
    int64_t min = kMaxTimestamp;
    for (const auto& c : channels_) {
      if (c.ended || c.idle || !c.aligned) continue;
      any = true;
      if (c.watermark < min) min = c.watermark;
    }
    if (any && min > lastOutput_) {
      lastOutput_ = min;
      out.watermark = true;
      out.watermarkValue = min;
    }
  }

  void findAndOutputMax(Emit& out) {
    int64_t max = kMinTimestamp;
    for (const auto& c : channels_)
      if (!c.ended && c.watermark > max) max = c.watermark;
    if (max > lastOutput_) {
      lastOutput_ = max;
      out.watermark = true;
      out.watermarkValue = max;
    }
  }

  std::vector<Channel> channels_;
  int64_t lastOutput_ = kMinTimestamp;
  bool outputIdle_ = false;
};

}  // namespace sluice
