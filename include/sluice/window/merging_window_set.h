// MergingWindowSet: for merging window assigners (sessions), which window
// of the current key holds the state of which window (Flink's
// MergingWindowSet).
//
// When windows merge, their state is merged into the state of one of them
// (the first merged window's) instead of being moved, so the set maps each
// live window to the window whose namespace holds its state. A key has a
// handful of entries: a sorted vector, persisted in the operator's keyed list
// state "merging-window-set" (load() for the current key, persist() after a
// change). Merging assigners produce TimeWindows (Flink's session windows),
// so the set is compiled once, for TimeWindow.
//
// Task thread only; the backend's current key selects the set.
#pragma once

#include <utility>
#include <vector>

#include <sluice/window/time_window.h>

namespace sluice {
class KeyedStateBackend;
struct VoidNamespace;
template <class N, class T>
class InternalListState;
}  // namespace sluice

namespace sluice::window {

class MergingWindowSet {
 public:
  using Entry = std::pair<TimeWindow, TimeWindow>;  // window -> window holding its state
  using iterator = std::vector<Entry>::iterator;

  // One merge the assigner asked for: `merged` become `result`.
  struct Merge {
    TimeWindow result;
    std::vector<TimeWindow> merged;
  };
  // Told of every merge of more than the new window alone, before the set
  // forgets the merged windows.
  class Listener {
   public:
    virtual void onMerge(const TimeWindow& result, const std::vector<TimeWindow>& merged,
                         const TimeWindow& stateResult,
                         const std::vector<TimeWindow>& mergedStateWindows) = 0;

   protected:
    ~Listener() = default;
  };

  void init(KeyedStateBackend& backend);
  // The current key's set.
  void load();
  void persist();

  bool empty() const { return entries_.empty(); }
  iterator begin() { return entries_.begin(); }
  iterator end() { return entries_.end(); }
  iterator find(const TimeWindow& w);
  void erase(const TimeWindow& w);

  // The windows an assigner's mergeWindows() looks at to add `newWindow`:
  // the set's windows, then `newWindow`. Valid until the next call.
  const std::vector<TimeWindow>& windowsWith(const TimeWindow& newWindow);
  // Adds `newWindow`, applying the `merges` its assigner asked for, and
  // returns the window the new element belongs to now.
  TimeWindow add(const TimeWindow& newWindow, std::vector<Merge>& merges, Listener& listener);

 private:
  iterator lowerBound(const TimeWindow& w);
  TimeWindow& at(const TimeWindow& w);
  TimeWindow& operator[](const TimeWindow& w);

  InternalListState<VoidNamespace, Entry>* state_ = nullptr;
  std::vector<Entry> entries_;
  std::vector<TimeWindow> scratch_;
  bool changed_ = false;
};

}  // namespace sluice::window
