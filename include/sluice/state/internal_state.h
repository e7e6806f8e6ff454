// The engine's view of keyed state: the user primitives plus a namespace.
//
// Every keyed state entry is addressed by (current key, namespace). User
// functions see VoidNamespace states; window operators set the window as the
// namespace before each access and merge namespaces when session windows
// merge. Backends implement the three storage primitives (value, list, map);
// reducing and aggregating state, and time-to-live, are built on them in
// keyed_state.h, the same way for every backend.
#pragma once

#include <optional>
#include <vector>

#include <sluice/state/state.h>

namespace sluice {

template <class N, class V>
class InternalValueState : public ValueState<V> {
 public:
  virtual void setCurrentNamespace(const N& ns) = 0;
};

template <class N, class E>
class InternalListState : public ListState<E> {
 public:
  virtual void setCurrentNamespace(const N& ns) = 0;
  // get() into `out`, reusing its capacity (engine code reading a list per
  // element).
  virtual void getInto(std::vector<E>& out) { out = this->get(); }
  // Appends the lists of `sources` to the list of `target` (for the current
  // key) and clears the sources. Leaves the current namespace unspecified.
  virtual void mergeNamespaces(const N& target, const std::vector<N>& sources) {
    std::vector<E> merged;
    for (const N& s : sources) {
      setCurrentNamespace(s);
      std::vector<E> part = this->get();
      if (part.empty()) continue;
      merged.insert(merged.end(), std::make_move_iterator(part.begin()),
                    std::make_move_iterator(part.end()));
      this->clear();
    }
    setCurrentNamespace(target);
    if (!merged.empty()) this->addAll(merged);
  }
};

template <class N, class UK, class UV>
class InternalMapState : public MapState<UK, UV> {
 public:
  virtual void setCurrentNamespace(const N& ns) = 0;
};

template <class N, class T>
class InternalReducingState : public ReducingState<T> {
 public:
  virtual void setCurrentNamespace(const N& ns) = 0;
  // Reduces the values of `sources` into `target` and clears the sources.
  virtual void mergeNamespaces(const N& target, const std::vector<N>& sources) = 0;
};

template <class N, class IN, class ACC, class OUT>
class InternalAggregatingState : public AggregatingState<IN, OUT> {
 public:
  virtual void setCurrentNamespace(const N& ns) = 0;
  // Merges the accumulators of `sources` into `target` and clears the sources.
  virtual void mergeNamespaces(const N& target, const std::vector<N>& sources) = 0;
  virtual std::optional<ACC> getInternal() = 0;
  virtual void updateInternal(const ACC& accumulator) = 0;
};

}  // namespace sluice
