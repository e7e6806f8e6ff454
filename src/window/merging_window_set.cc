#include <algorithm>

#include <sluice/internal/keyed_state.h>
#include <sluice/window/merging_window_set.h>
#include <sluice/window/sliced_state.h>

namespace sluice::window {
namespace {

bool byWindow(const MergingWindowSet::Entry& a, const MergingWindowSet::Entry& b) {
  return a.first < b.first;
}

}  // namespace

void MergingWindowSet::init(KeyedStateBackend& backend) {
  state_ = &getOrCreateListState<VoidNamespace>(backend,
                                                ListStateDescriptor<Entry>(kMergingWindowSetState));
}

void MergingWindowSet::load() {
  state_->getInto(entries_);
  if (!std::is_sorted(entries_.begin(), entries_.end(), byWindow)) {
    std::sort(entries_.begin(), entries_.end(), byWindow);
  }
  changed_ = false;
}

void MergingWindowSet::persist() {
  if (!changed_) return;
  if (entries_.empty()) {
    state_->clear();
  } else {
    state_->update(entries_);
  }
  changed_ = false;
}

MergingWindowSet::iterator MergingWindowSet::lowerBound(const TimeWindow& w) {
  return std::lower_bound(entries_.begin(), entries_.end(), w,
                          [](const Entry& e, const TimeWindow& x) { return e.first < x; });
}

MergingWindowSet::iterator MergingWindowSet::find(const TimeWindow& w) {
  auto it = lowerBound(w);
  return it != entries_.end() && it->first == w ? it : entries_.end();
}

void MergingWindowSet::erase(const TimeWindow& w) {
  auto it = find(w);
  if (it == entries_.end()) return;
  entries_.erase(it);
  changed_ = true;
}

TimeWindow& MergingWindowSet::at(const TimeWindow& w) {
  auto it = find(w);
  if (it == entries_.end()) throw SluiceException("window not in the merging window set");
  return it->second;
}

TimeWindow& MergingWindowSet::operator[](const TimeWindow& w) {
  auto it = lowerBound(w);
  if (it == entries_.end() || !(it->first == w)) it = entries_.insert(it, Entry{w, w});
  return it->second;
}

const std::vector<TimeWindow>& MergingWindowSet::windowsWith(const TimeWindow& newWindow) {
  scratch_.clear();
  for (auto& [w, s] : entries_) scratch_.push_back(w);
  scratch_.push_back(newWindow);
  return scratch_;
}

TimeWindow MergingWindowSet::add(const TimeWindow& newWindow, std::vector<Merge>& merges,
                                 Listener& listener) {
  TimeWindow resultWindow = newWindow;
  bool mergedNewWindow = false;
  for (auto& [mergeResult, mergedWindows] : merges) {
    auto self = std::find(mergedWindows.begin(), mergedWindows.end(), newWindow);
    if (self != mergedWindows.end()) {
      mergedWindows.erase(self);
      mergedNewWindow = true;
      resultWindow = mergeResult;
    }
    // The state of the first merged window becomes the merged window's.
    TimeWindow mergedStateWindow = at(mergedWindows.front());
    std::vector<TimeWindow> mergedStateWindows;
    for (const TimeWindow& m : mergedWindows) {
      auto it = find(m);
      if (it != entries_.end()) {
        if (!(it->second == mergedStateWindow)) mergedStateWindows.push_back(it->second);
        entries_.erase(it);
      }
    }
    (*this)[mergeResult] = mergedStateWindow;
    changed_ = true;
    const bool onlyItself = mergedWindows.size() == 1 && mergedWindows.front() == mergeResult;
    if (!onlyItself) {
      listener.onMerge(mergeResult, mergedWindows, mergedStateWindow, mergedStateWindows);
    }
  }
  if (merges.empty() || (resultWindow == newWindow && !mergedNewWindow)) {
    (*this)[resultWindow] = resultWindow;
    changed_ = true;
  }
  return resultWindow;
}

}  // namespace sluice::window
