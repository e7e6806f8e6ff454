#include <algorithm>
#include <limits>

#include <sluice/window/slice_scheduler.h>

namespace sluice::window {

void SliceScheduler::init(const Slicing& slicing, const WindowCleanup& cleanup, bool visitCleanup) {
  slicing_ = slicing;
  cleanup_ = cleanup;
  visitCleanup_ = visitCleanup;
  slices_.clear();
  toFire_.clear();
  toClean_.clear();
  visited_.clear();
  pass_ = 0;
}

std::vector<uint32_t>& SliceScheduler::keysOf(int64_t slice, int64_t watermark) {
  auto [it, added] = slices_.try_emplace(slice);
  if (added) {
    const WindowId last = slicing_.lastWindowOf(slice);
    for (WindowId w = slicing_.firstWindowOf(slice); w <= last; w += slicing_.windowStep()) {
      if (!slicing_.isWindow(w)) continue;
      const int64_t maxTimestamp = slicing_.maxTimestamp(w);
      // Late (event time), or fired and cleaned up already (processing time).
      if (cleanup_.cleanupTime(maxTimestamp) <= watermark) continue;
      if (maxTimestamp > watermark) toFire_.insert(w);
      if (cleanup_.needsCleanupTimer(maxTimestamp)) toClean_.insert(w);
    }
  }
  return it->second;
}

template <class F>
void SliceScheduler::forEachKeyIn(WindowId window, F&& f) {
  ++pass_;
  const WindowId first = slicing_.firstSliceOf(window);
  const int64_t from = first < std::numeric_limits<int64_t>::min()
                           ? std::numeric_limits<int64_t>::min()
                           : static_cast<int64_t>(first);
  for (auto it = slices_.lower_bound(from); it != slices_.end() && it->first <= window; ++it) {
    for (uint32_t key : it->second) {
      if (key >= visited_.size()) visited_.resize(std::max<size_t>(key + 1, visited_.size() * 2));
      if (visited_[key] == pass_) continue;
      visited_[key] = pass_;
      f(key);
    }
  }
}

void SliceScheduler::advance(int64_t watermark, Listener& listener) {
  for (;;) {
    const bool fire = !toFire_.empty() && slicing_.maxTimestamp(*toFire_.begin()) <= watermark;
    const bool clean = !toClean_.empty() &&
                       cleanup_.cleanupTime(slicing_.maxTimestamp(*toClean_.begin())) <= watermark;
    if (!fire && !clean) return;
    if (fire && (!clean || slicing_.maxTimestamp(*toFire_.begin()) <=
                               cleanup_.cleanupTime(slicing_.maxTimestamp(*toClean_.begin())))) {
      const WindowId w = *toFire_.begin();
      toFire_.erase(toFire_.begin());
      forEachKeyIn(w, [&](uint32_t key) { listener.fireWindow(w, key); });
      continue;
    }
    const WindowId w = *toClean_.begin();
    toClean_.erase(toClean_.begin());
    if (visitCleanup_) forEachKeyIn(w, [&](uint32_t key) { listener.cleanupWindow(w, key); });
    while (!slices_.empty() && slicing_.lastWindowOf(slices_.begin()->first) <= w) {
      auto it = slices_.begin();
      const int64_t slice = it->first;
      const std::vector<uint32_t> keys = std::move(it->second);
      slices_.erase(it);
      for (uint32_t key : keys) listener.dropSlice(slice, key);
    }
  }
}

}  // namespace sluice::window
