// The windows of the built-in assigners: TimeWindow [start, end) of the
// time-based assigners (tumbling, sliding, session) and the one GlobalWindow,
// with their serializers (a window is the namespace of its state and timers).
// Flink's TimeWindow and GlobalWindow; the window module and the API share
// them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include <sluice/core/serializer.h>
#include <sluice/core/stream_element.h>

namespace sluice {

class TimeWindow {
 public:
  TimeWindow() = default;
  TimeWindow(int64_t start, int64_t end) : start_(start), end_(end) {}
  int64_t getStart() const { return start_; }
  int64_t getEnd() const { return end_; }
  // The largest timestamp that belongs to the window.
  int64_t maxTimestamp() const { return end_ - 1; }
  // Touching windows intersect too (sessions one gap apart merge).
  bool intersects(const TimeWindow& other) const {
    return start_ <= other.end_ && end_ >= other.start_;
  }
  TimeWindow cover(const TimeWindow& other) const {
    return TimeWindow(std::min(start_, other.start_), std::max(end_, other.end_));
  }
  friend bool operator==(const TimeWindow&, const TimeWindow&) = default;
  friend auto operator<=>(const TimeWindow&, const TimeWindow&) = default;
  std::string toString() const {
    return "TimeWindow{start=" + std::to_string(start_) + ", end=" + std::to_string(end_) + "}";
  }

  // Flink's TimeWindow.getWindowStartWithOffset, without overflow: a start
  // below the minimum timestamp is clamped to it.
  static int64_t getWindowStartWithOffset(int64_t timestamp, int64_t offset, int64_t windowSize) {
    return clampToTimestamp(unclampedWindowStart(timestamp, offset, windowSize));
  }
  // The same in 128 bits, where it cannot overflow. Window ends are computed
  // from this start, so that a window clamped at the minimum keeps its true
  // end and does not overlap the next one.
  static __int128 unclampedWindowStart(int64_t timestamp, int64_t offset, int64_t windowSize) {
    const __int128 ts = timestamp;
    __int128 remainder = (ts - offset) % windowSize;
    return remainder < 0 ? ts - (remainder + windowSize) : ts - remainder;
  }
  static int64_t clampToTimestamp(__int128 t) {
    if (t < kMinTimestamp) return kMinTimestamp;
    if (t > kMaxTimestamp) return kMaxTimestamp;
    return static_cast<int64_t>(t);
  }

 private:
  int64_t start_ = 0;
  int64_t end_ = 0;
};

template <>
struct TypeSerializer<TimeWindow> {
  static constexpr size_t kMinEncodedSize = 16;
  static void serialize(const TimeWindow& w, DataOutputView& out) {
    out.writeI64(w.getStart());
    out.writeI64(w.getEnd());
  }
  static void deserialize(TimeWindow& w, DataInputView& in) {
    int64_t s = in.readI64();
    int64_t e = in.readI64();
    w = TimeWindow(s, e);
  }
  static std::string schema() { return "TimeWindow{start:int64,end:int64}"; }
};

// The one window of GlobalWindows: everything, forever.
class GlobalWindow {
 public:
  static GlobalWindow get() { return GlobalWindow(); }
  int64_t maxTimestamp() const { return kMaxTimestamp; }
  friend bool operator==(const GlobalWindow&, const GlobalWindow&) { return true; }
  friend bool operator<(const GlobalWindow&, const GlobalWindow&) { return false; }
  std::string toString() const { return "GlobalWindow"; }
};

template <>
struct TypeSerializer<GlobalWindow> {
  static constexpr size_t kMinEncodedSize = 0;
  static void serialize(const GlobalWindow&, DataOutputView&) {}
  static void deserialize(GlobalWindow&, DataInputView&) {}
  static std::string schema() { return "GlobalWindow"; }
};

}  // namespace sluice
