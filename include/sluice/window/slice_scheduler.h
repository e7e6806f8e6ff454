// SliceScheduler: which keys have data in which slice, and what the
// watermark fires and cleans up, for the sliced window operator
// (internal/slicing_window_operator.h); the part of it that does not depend
// on the key or accumulator types.
//
// The operator numbers its keys (small integers, reused once a key has no
// slice left) and keeps each key's accumulators itself. The scheduler keeps,
// per slice with data, the numbers of the keys that have data in it, and the
// windows those slices belong to in two ordered sets: the windows the
// watermark has yet to fire (their maxTimestamp is ahead of it) and the ones
// it has yet to clean up (cleanup time = maxTimestamp + allowed lateness,
// window::WindowCleanup). One entry per window for the whole operator, not
// one timer per key and window.
//
// advance(watermark) then does what the general window operator's timers
// would: in order of time, fire every window whose maxTimestamp the
// watermark reached, for every key with data in one of its slices (each key
// once), and clean up every window whose cleanup time it reached, then drop
// the slices whose last window that was. When a firing and a cleanup fall on
// the same time, the firing comes first (a window with no allowed lateness
// fires, then goes). A window whose cleanup time is the maximum timestamp is
// never cleaned up, as the general operator registers no cleanup timer for it.
//
// Task thread only.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include <sluice/window/slicing.h>
#include <sluice/window/window_cleanup.h>

namespace sluice::window {

class SliceScheduler {
 public:
  // What advance() reports; the operator acts on its own per-key data.
  class Listener {
   public:
    virtual ~Listener() = default;
    // `window` fires for `key`, which has data in at least one of its slices.
    virtual void fireWindow(WindowId window, uint32_t key) = 0;
    // `window` is cleaned up for `key` (only with visitCleanup).
    virtual void cleanupWindow(WindowId window, uint32_t key) = 0;
    // The slice is gone: the last window holding it was cleaned up. Called
    // for every key of the slice, in the order the keys were added, and
    // slices in ascending order; a key's slices go in ascending order too.
    virtual void dropSlice(int64_t slice, uint32_t key) = 0;
  };

  // `visitCleanup`: report each (window, key) at cleanup (the operator has a
  // window function whose clear() must run); otherwise only slices are dropped.
  void init(const Slicing& slicing, const WindowCleanup& cleanup, bool visitCleanup);

  // The keys with data in `slice`. A new slice is added, and those of its
  // windows whose cleanup time is ahead of `watermark` (the event-time
  // watermark, or the processing time the windows fired through) are
  // scheduled (firing only those ahead of it). The reference stays valid until the slice is dropped
  // by advance().
  std::vector<uint32_t>& keysOf(int64_t slice, int64_t watermark);

  // Fires and cleans up everything `watermark` reached (see above).
  void advance(int64_t watermark, Listener& listener);

  size_t numSlices() const { return slices_.size(); }
  size_t numWindowsToFire() const { return toFire_.size(); }
  size_t numWindowsToCleanUp() const { return toClean_.size(); }

 private:
  template <class F>
  void forEachKeyIn(WindowId window, F&& f);

  Slicing slicing_;
  WindowCleanup cleanup_;
  bool visitCleanup_ = false;
  std::map<int64_t, std::vector<uint32_t>> slices_;
  std::set<WindowId> toFire_;
  std::set<WindowId> toClean_;
  // Per key: the pass that visited it last, so that a key with data in
  // several slices of a window is reported once.
  std::vector<uint64_t> visited_;
  uint64_t pass_ = 0;
};

}  // namespace sluice::window
