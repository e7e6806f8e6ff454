// TwoStacks: a FIFO aggregator ("pairs of stacks", as in Tangwongsan et
// al., "In-Order Sliding-Window Aggregation in Worst-Case Constant Time"):
// the sliced window operator keeps one per key to combine the slices of
// consecutive sliding windows without merging every slice for every window.
//
// Items are (id, value) pushed in ascending id order; evictBefore(id) drops
// the oldest ones; query() is the merge of all items, oldest first, so the
// merge need only be associative (not commutative). The back stack keeps its
// items and their running merge; when the front stack runs empty, the back
// items move to it, each with the merge of itself and every newer item
// there (one merge per item). So a push costs one merge, an eviction
// amortized one, a query at most one. Evicting every item is a clear, with
// no merge at all (the cumulating windows' restart).
//
// `Merge` is callable as merge(ACC& earlier, const ACC& later), leaving
// earlier ⊕ later in `earlier`. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace sluice::window {

template <class ACC>
class TwoStacks {
 public:
  bool empty() const { return front_.empty() && back_.empty(); }
  size_t size() const { return front_.size() + back_.size(); }
  // The id of the newest item; call only when not empty.
  int64_t newestId() const { return back_.empty() ? front_.front().first : back_.back().first; }

  template <class Merge>
  void push(int64_t id, const ACC& value, Merge&& merge) {
    if (back_.empty()) {
      backMerged_ = value;
    } else {
      merge(backMerged_, value);
    }
    back_.emplace_back(id, value);
  }

  // Drops every item with an id below `id`.
  template <class Merge>
  void evictBefore(int64_t id, Merge&& merge) {
    if (empty()) return;
    if (newestId() < id) {
      clear();
      return;
    }
    while (!empty() && oldestId() < id) {
      if (front_.empty()) flip(merge);
      front_.pop_back();
    }
  }

  // The merge of every item, oldest first; nullopt when empty.
  template <class Merge>
  std::optional<ACC> query(Merge&& merge) const {
    if (front_.empty()) {
      if (back_.empty()) return std::nullopt;
      return backMerged_;
    }
    ACC result = front_.back().second;
    if (!back_.empty()) merge(result, backMerged_);
    return result;
  }

  void clear() {
    front_.clear();
    back_.clear();
  }

 private:
  int64_t oldestId() const { return front_.empty() ? back_.front().first : front_.back().first; }

  // Moves the back items to the front: front_.back() becomes the oldest,
  // each carrying the merge of itself and every newer item.
  template <class Merge>
  void flip(Merge& merge) {
    front_.reserve(back_.size());
    for (size_t i = back_.size(); i-- > 0;) {
      auto& item = back_[i];
      if (!front_.empty()) merge(item.second, front_.back().second);
      front_.emplace_back(item.first, std::move(item.second));
    }
    back_.clear();
  }

  // Front: (id, merge of this item and all newer front items), newest first.
  std::vector<std::pair<int64_t, ACC>> front_;
  std::vector<std::pair<int64_t, ACC>> back_;
  ACC backMerged_{};
};

}  // namespace sluice::window
