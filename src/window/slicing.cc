#include <cstdlib>
#include <numeric>
#include <string>

#include <sluice/core/status.h>
#include <sluice/window/slicing.h>

namespace sluice::window {

std::string AlignedWindows::describe() const {
  auto ms = [](int64_t v) { return std::to_string(v) + " ms"; };
  switch (kind) {
    case AlignedKind::kTumbling:
      return std::string(processingTime ? "processing-time " : "") + "tumbling(size=" + ms(size) +
             ", offset=" + ms(offset) + ")";
    case AlignedKind::kSliding:
      return std::string(processingTime ? "processing-time " : "") + "sliding(size=" + ms(size) +
             ", slide=" + ms(slide) + ", offset=" + ms(offset) + ")";
    case AlignedKind::kCumulating:
      return "cumulating(maxSize=" + ms(size) + ", step=" + ms(slide) + ", offset=" + ms(offset) +
             ")";
  }
  return "aligned windows";
}

Slicing::Slicing(const AlignedWindows& windows) : windows_(windows) {
  if (windows.size <= 0 || windows.slide <= 0) {
    throw SluiceException("aligned windows " + windows.describe() +
                          ": the size and the slide (step) must be positive");
  }
  switch (windows.kind) {
    case AlignedKind::kTumbling:
      if (windows.slide != windows.size) {
        throw SluiceException("tumbling windows " + windows.describe() +
                              " must slide by their size, got slide " +
                              std::to_string(windows.slide) + " ms");
      }
      g_ = windows.size;
      break;
    case AlignedKind::kSliding: g_ = std::gcd(windows.size, windows.slide); break;
    case AlignedKind::kCumulating:
      if (windows.size % windows.slide != 0) {
        throw SluiceException("cumulating windows " + windows.describe() +
                              ": the max size must be a multiple of the step");
      }
      g_ = windows.slide;
      break;
  }
  const int64_t window = windows.kind == AlignedKind::kSliding ? windows.slide : windows.size;
  if (std::abs(windows.offset) >= window) {
    throw SluiceException("aligned windows " + windows.describe() + ": the offset must satisfy " +
                          "abs(offset) < " +
                          (windows.kind == AlignedKind::kSliding ? "slide" : "size"));
  }
  base_ = ((windows.offset % g_) + g_) % g_;
  n_ = windows.size / g_;
  m_ = windows.kind == AlignedKind::kSliding ? windows.slide / g_ : 1;
  // The slice at which the window (sliding) or cycle (cumulating) starting at
  // `offset` begins; every other start is a whole number of slides or
  // cycles away. (offset - base_) is a multiple of g_.
  const int64_t startSlice = (windows.offset - base_) / g_;
  if (windows.kind == AlignedKind::kSliding) {
    windowResidue_ = mod(static_cast<WindowId>(startSlice) + n_ - 1, m_);
  } else if (windows.kind == AlignedKind::kCumulating) {
    cycleResidue_ = mod(startSlice, n_);
  }
}

bool Slicing::idOf(const TimeWindow& w, WindowId& id) const {
  // The end identifies the window unless it saturated at the maximum; then
  // the start does (a window cannot be clamped at both ends).
  WindowId candidate;
  if (w.getEnd() != kMaxTimestamp) {
    if (w.getEnd() == kMinTimestamp) return false;
    candidate = static_cast<WindowId>(sliceOf(w.getEnd() - 1));
  } else if (w.getStart() != kMinTimestamp) {
    const WindowId first = sliceOf(w.getStart());
    switch (windows_.kind) {
      case AlignedKind::kTumbling: candidate = first; break;
      case AlignedKind::kSliding: candidate = first + n_ - 1; break;
      case AlignedKind::kCumulating:
        // Every window of the cycle whose end saturated is the same window:
        // the whole cycle's (isWindow).
        candidate = first + n_ - 1;
        break;
    }
  } else {
    return false;
  }
  if (!isWindow(candidate) || !(window(candidate) == w)) return false;
  id = candidate;
  return true;
}

}  // namespace sluice::window
