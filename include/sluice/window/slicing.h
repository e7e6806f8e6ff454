// Slicing: the arithmetic of aligned windows cut into slices, for
// the sliced window operator (internal/slicing_window_operator.h).
//
// Tumbling, sliding and cumulating windows are aligned: their boundaries are
// fixed points of the time axis, the same for every key. Cut the axis into
// slices of length g at those points and every window is a run of whole
// slices, so keeping one accumulator per key and slice (not per window) and
// merging the slices of a window when it fires gives the window's result:
//
//   tumbling(size)           g = size; a window is one slice.
//   sliding(size, slide)     g = gcd(size, slide); a window is size/g slices,
//                            a new one starts every slide/g slices.
//   cumulating(max, step)    g = step; the windows [start, start + k * step),
//                            k = 1 .. max/step, with start aligned to max (a
//                            Sluice extension mirroring Flink SQL's CUMULATE).
//
// Offsets shift every boundary as Flink's TimeWindow.getWindowStartWithOffset
// does. Slice j is [base + j*g, base + (j+1)*g), base = offset mod g. A window
// is identified by the index of its last slice (its WindowId): tumbling and
// cumulating windows end at every slice, sliding windows at every
// (slide/g)-th. Ids grow with window ends, so ordering windows by id orders
// them by end (and by maxTimestamp and cleanup time). Window ids can leave
// the int64 range near the timestamp limits, so they are 128 bits wide.
//
// Near the int64 limits windows behave as the assigners in windows.h make
// them: a window starting below the minimum timestamp starts at it but keeps
// its true end, an end beyond the maximum saturates at it.
//
// Plain values, any thread.
#pragma once

#include <cstdint>
#include <string>

#include <sluice/core/stream_element.h>
#include <sluice/window/time_window.h>

namespace sluice::window {

// Which aligned windows an assigner makes.
enum class AlignedKind : uint8_t { kTumbling = 0, kSliding = 1, kCumulating = 2 };

// The description of aligned windows that WindowedStream captures from
// TumblingEventTimeWindows, SlidingEventTimeWindows,
// CumulativeEventTimeWindows, TumblingProcessingTimeWindows or
// SlidingProcessingTimeWindows (milliseconds).
// `slide` is the slide of sliding windows, the step of cumulating ones and
// the size of tumbling ones; `size` is the size (cumulating: the maximum
// size).
struct AlignedWindows {
  AlignedKind kind = AlignedKind::kTumbling;
  int64_t size = 1;
  int64_t slide = 1;
  int64_t offset = 0;
  // Processing-time windows (Tumbling/SlidingProcessingTimeWindows): an element's
  // windows are those of the clock's time when it arrives, fired by
  // processing-time timers.
  bool processingTime = false;

  // "tumbling(size=1000 ms, offset=0 ms)" ("processing-time tumbling(...)"),
  // as errors and snapshots name it: a restore must have the same.
  std::string describe() const;
  friend bool operator==(const AlignedWindows&, const AlignedWindows&) = default;
};

using WindowId = __int128;

class Slicing {
 public:
  Slicing() = default;
  // Throws SluiceException for a description no assigner accepts (sizes not
  // positive, a cumulating max size that is no multiple of the step, an
  // offset at least as large as the window).
  explicit Slicing(const AlignedWindows& windows);

  const AlignedWindows& windows() const { return windows_; }
  int64_t sliceLength() const { return g_; }
  int64_t sliceBase() const { return base_; }

  // The slice holding `timestamp`.
  int64_t sliceOf(int64_t timestamp) const {
    const __int128 d = static_cast<__int128>(timestamp) - base_;
    __int128 q = d / g_;
    if (d % g_ < 0) --q;
    return static_cast<int64_t>(q);
  }
  // The first and last timestamp of slice j, within the int64 range.
  int64_t firstTimestamp(int64_t slice) const {
    return TimeWindow::clampToTimestamp(sliceStart(slice));
  }
  int64_t lastTimestamp(int64_t slice) const {
    return TimeWindow::clampToTimestamp(sliceStart(slice) + g_ - 1);
  }

  // The windows that contain slice j: the ids from firstWindowOf(j) to
  // lastWindowOf(j), every windowStep(), for which isWindow() holds.
  WindowId firstWindowOf(int64_t slice) const {
    if (windows_.kind != AlignedKind::kSliding) return slice;
    return static_cast<WindowId>(slice) + mod(static_cast<WindowId>(windowResidue_) - slice, m_);
  }
  WindowId lastWindowOf(int64_t slice) const {
    switch (windows_.kind) {
      case AlignedKind::kTumbling: return slice;
      case AlignedKind::kSliding: {
        const WindowId last = static_cast<WindowId>(slice) + n_ - 1;
        return last - mod(last - windowResidue_, m_);
      }
      case AlignedKind::kCumulating: return firstSliceOf(slice) + n_ - 1;
    }
    return slice;
  }
  int64_t windowStep() const { return windows_.kind == AlignedKind::kSliding ? m_ : 1; }
  // Whether `id` is a window: sliding windows do not end at every slice, and
  // cumulating windows whose ends saturate at the maximum timestamp are all
  // the same window, which the last of them (the whole cycle) stands for.
  bool isWindow(WindowId id) const {
    switch (windows_.kind) {
      case AlignedKind::kTumbling: return true;
      case AlignedKind::kSliding: return mod(id - windowResidue_, m_) == 0;
      case AlignedKind::kCumulating:
        return sliceStart(id + 1) < kMaxTimestamp || id == firstSliceOf(id) + n_ - 1;
    }
    return true;
  }
  // The first slice of window `id`.
  WindowId firstSliceOf(WindowId id) const {
    switch (windows_.kind) {
      case AlignedKind::kTumbling: return id;
      case AlignedKind::kSliding: return id - n_ + 1;
      case AlignedKind::kCumulating: return id - mod(id - cycleResidue_, n_);
    }
    return id;
  }

  // The window `id` as the assigners make it (clamped to the int64 range).
  TimeWindow window(WindowId id) const {
    return TimeWindow(TimeWindow::clampToTimestamp(sliceStart(firstSliceOf(id))),
                      TimeWindow::clampToTimestamp(sliceStart(id + 1)));
  }
  int64_t maxTimestamp(WindowId id) const {
    const int64_t end = TimeWindow::clampToTimestamp(sliceStart(id + 1));
    return end == kMinTimestamp ? kMinTimestamp : end - 1;
  }
  // The id of `w`, or false when `w` is not one of these windows.
  bool idOf(const TimeWindow& w, WindowId& id) const;

 private:
  __int128 sliceStart(WindowId slice) const { return base_ + slice * g_; }
  static int64_t mod(WindowId a, int64_t m) {
    const int64_t r = static_cast<int64_t>(a % m);
    return r < 0 ? r + m : r;
  }

  AlignedWindows windows_;
  int64_t g_ = 1;     // slice length
  int64_t base_ = 0;  // offset mod g
  int64_t n_ = 1;     // slices per window (cumulating: per cycle)
  int64_t m_ = 1;     // sliding: slices per slide
  // Sliding: ids of windows are = windowResidue_ (mod m_). Cumulating: the
  // first slice of a cycle is = cycleResidue_ (mod n_).
  int64_t windowResidue_ = 0;
  int64_t cycleResidue_ = 0;
};

}  // namespace sluice::window
