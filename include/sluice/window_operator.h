// The window operator (Flink's WindowOperator and EvictingWindowOperator):
// assigns each element to windows, keeps each window's contents in keyed
// state with the window as namespace, asks the trigger when to fire and
// purge, and cleans a window's state up once the watermark (or, for
// processing-time windows, the clock) passes its end plus the allowed
// lateness. Merging assigners (sessions) keep a per-key mapping from each
// window to the window whose namespace holds its state, as Flink's
// MergingWindowSet does.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sluice/checkpointed_function.h>
#include <sluice/keyed_state_handler.h>
#include <sluice/operators.h>
#include <sluice/timers.h>
#include <sluice/windows.h>

namespace sluice::internal {

// The merging window set of one key (window -> window holding its state):
// a handful of entries, kept as a sorted vector: loading it for every
// element costs the one vector the list state returns (the std::map it
// replaces allocated a node per entry and copied itself out again to be
// persisted). Iterates in window order, as the map did.
template <class W>
class WindowMapping {
 public:
  using Entry = std::pair<W, W>;
  using iterator = typename std::vector<Entry>::iterator;

  // Takes the persisted entries (sorted when this class wrote them).
  void assign(std::vector<Entry> entries) {
    entries_ = std::move(entries);
    if (!std::is_sorted(entries_.begin(), entries_.end(), byWindow)) {
      std::sort(entries_.begin(), entries_.end(), byWindow);
    }
  }
  const std::vector<Entry>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  iterator begin() { return entries_.begin(); }
  iterator end() { return entries_.end(); }
  iterator find(const W& w) {
    auto it = lowerBound(w);
    return it != entries_.end() && it->first == w ? it : entries_.end();
  }
  W& at(const W& w) {
    auto it = find(w);
    if (it == entries_.end()) throw SluiceException("window not in the merging window set");
    return it->second;
  }
  W& operator[](const W& w) {
    auto it = lowerBound(w);
    if (it == entries_.end() || !(it->first == w)) it = entries_.insert(it, Entry{w, w});
    return it->second;
  }
  void erase(iterator it) { entries_.erase(it); }
  void erase(const W& w) {
    auto it = find(w);
    if (it != entries_.end()) entries_.erase(it);
  }

 private:
  static bool byWindow(const Entry& a, const Entry& b) { return a.first < b.first; }
  iterator lowerBound(const W& w) {
    return std::lower_bound(entries_.begin(), entries_.end(), w,
                            [](const Entry& e, const W& x) { return e.first < x; });
  }
  std::vector<Entry> entries_;
};

// Calls a reduce function of any accepted form.
template <class T, class F>
T invokeReduce(F& f, const T& a, const T& b) {
  if constexpr (InPlaceReducer<F, T>) {
    T acc = a;
    if (f.apply(acc, b)) acc = b;
    return acc;
  } else if constexpr (std::is_invocable_v<F&, const T&, const T&>) {
    return f(a, b);
  } else {
    return f.reduce(a, b);
  }
}

// --- contents: what a window keeps, and what its function receives --------

// reduce(): one running value per window.
template <class T, class W, class F>
class ReduceContents {
 public:
  using Value = T;
  explicit ReduceContents(F f) : f_(std::move(f)) {}
  F& function() { return f_; }
  void init(KeyedStateBackend& backend) {
    state_ = &getOrCreateReducingState<W>(
        backend, ReducingStateDescriptor<T>("window-contents", [this](const T& a, const T& b) {
          return invokeReduce(f_, a, b);
        }));
  }
  void setNamespace(const W& w) { state_->setCurrentNamespace(w); }
  void add(const StreamRecord<T>& r) { state_->add(r.value); }
  template <class Ctx>
  bool get(std::vector<T>& out, const W&, Ctx&) {
    std::optional<T> v = state_->get();
    if (!v) return false;
    out.push_back(std::move(*v));
    return true;
  }
  void clear() { state_->clear(); }
  void merge(const W& target, const std::vector<W>& sources) {
    state_->mergeNamespaces(target, sources);
  }

 private:
  F f_;
  InternalReducingState<W, T>* state_ = nullptr;
};

// aggregate(): one accumulator per window.
template <class IN, class ACC, class OUT, class W, class AGG>
class AggregateContents {
 public:
  using Value = OUT;
  explicit AggregateContents(AGG agg) : agg_(std::move(agg)) {}
  AGG& function() { return agg_; }
  void init(KeyedStateBackend& backend) {
    // Non-owning: the operator owns the function.
    std::shared_ptr<AggregateFunction<IN, ACC, OUT>> fn(std::shared_ptr<void>(), &agg_);
    state_ = &getOrCreateAggregatingState<W>(
        backend, AggregatingStateDescriptor<IN, ACC, OUT>("window-contents", fn));
  }
  void setNamespace(const W& w) { state_->setCurrentNamespace(w); }
  void add(const StreamRecord<IN>& r) { state_->add(r.value); }
  template <class Ctx>
  bool get(std::vector<OUT>& out, const W&, Ctx&) {
    std::optional<OUT> v = state_->get();
    if (!v) return false;
    out.push_back(std::move(*v));
    return true;
  }
  void clear() { state_->clear(); }
  void merge(const W& target, const std::vector<W>& sources) {
    state_->mergeNamespaces(target, sources);
  }

 private:
  AGG agg_;
  InternalAggregatingState<W, IN, ACC, OUT>* state_ = nullptr;
};

// process()/apply(): every element.
template <class T, class W>
class ListContents {
 public:
  using Value = T;
  struct NoFunction {};
  NoFunction& function() { return none_; }
  void init(KeyedStateBackend& backend) {
    state_ = &getOrCreateListState<W>(backend, ListStateDescriptor<T>("window-contents"));
  }
  void setNamespace(const W& w) { state_->setCurrentNamespace(w); }
  void add(const StreamRecord<T>& r) { state_->add(r.value); }
  template <class Ctx>
  bool get(std::vector<T>& out, const W&, Ctx&) {
    out = state_->get();
    return !out.empty();
  }
  void clear() { state_->clear(); }
  void merge(const W& target, const std::vector<W>& sources) {
    state_->mergeNamespaces(target, sources);
  }

 private:
  NoFunction none_;
  InternalListState<W, T>* state_ = nullptr;
};

// How an evicting window turns its remaining elements into the function's
// input: all of them, reduced to one, or aggregated to one.
template <class T>
struct IdentityFold {
  using Value = T;
  struct NoFunction {};
  NoFunction& function() { return none_; }
  bool fold(std::vector<T>& values, std::vector<T>& out) {
    out = std::move(values);
    return true;
  }
  NoFunction none_;
};
template <class T, class F>
struct ReduceFold {
  using Value = T;
  F f;
  F& function() { return f; }
  bool fold(std::vector<T>& values, std::vector<T>& out) {
    if (values.empty()) return false;
    T acc = values[0];
    for (size_t i = 1; i < values.size(); ++i) acc = invokeReduce(f, acc, values[i]);
    out.push_back(std::move(acc));
    return true;
  }
};
template <class IN, class ACC, class OUT, class AGG>
struct AggregateFold {
  using Value = OUT;
  AGG agg;
  AGG& function() { return agg; }
  bool fold(std::vector<IN>& values, std::vector<OUT>& out) {
    ACC acc = agg.createAccumulator();
    for (const IN& v : values) acc = agg.add(v, std::move(acc));
    out.push_back(agg.getResult(acc));
    return true;
  }
};

// With an evictor: every element with its timestamp; on firing, evict
// before, fold, (the function runs), evict after, and keep what is left.
template <class T, class W, class Fold>
class EvictingContents {
 public:
  using Value = typename Fold::Value;
  using EvictorFactory = std::function<std::unique_ptr<Evictor<T, W>>()>;
  EvictingContents(Fold fold, EvictorFactory evictor)
      : fold_(std::move(fold)), makeEvictor_(std::move(evictor)) {}
  auto& function() { return fold_.function(); }
  void init(KeyedStateBackend& backend) {
    evictor_ = makeEvictor_();
    state_ = &getOrCreateListState<W>(backend,
                                      ListStateDescriptor<TimestampedValue<T>>("window-contents"));
  }
  void setNamespace(const W& w) { state_->setCurrentNamespace(w); }
  void add(const StreamRecord<T>& r) {
    state_->add(r.hasTimestamp ? TimestampedValue<T>(r.value, r.timestamp)
                               : TimestampedValue<T>(r.value));
  }
  template <class Ctx>
  bool get(std::vector<Value>& out, const W& window, Ctx& ctx) {
    elements_ = state_->get();
    fired_ = !elements_.empty();
    if (!fired_) return false;
    evictor_->evictBefore(elements_, static_cast<int>(elements_.size()), window, ctx);
    std::vector<T> values;
    values.reserve(elements_.size());
    for (const auto& e : elements_) values.push_back(e.getValue());
    return fold_.fold(values, out);
  }
  // Whether the last get() found elements (and afterFire must follow).
  bool fired() const { return fired_; }
  // After the function ran on what get() returned.
  template <class Ctx>
  void afterFire(const W& window, Ctx& ctx) {
    evictor_->evictAfter(elements_, static_cast<int>(elements_.size()), window, ctx);
    state_->update(elements_);
    elements_.clear();
  }
  void clear() { state_->clear(); }
  void merge(const W& target, const std::vector<W>& sources) {
    state_->mergeNamespaces(target, sources);
  }

 private:
  Fold fold_;
  EvictorFactory makeEvictor_;
  std::shared_ptr<Evictor<T, W>> evictor_;
  InternalListState<W, TimestampedValue<T>>* state_ = nullptr;
  std::vector<TimestampedValue<T>> elements_;
  bool fired_ = false;
};

// --- emitters: how a fired window's values reach the output ----------------

// reduce/aggregate without a window function: each value as is.
template <class V>
struct PassThroughEmitter {
  struct NoFunction {};
  NoFunction& function() { return none_; }
  template <class K, class W, class Ctx>
  void emit(const K&, const W&, Ctx&, const std::vector<V>& values, Collector<V>& out) {
    for (const V& v : values) out.collect(v);
  }
  template <class Ctx>
  void clear(Ctx&) {}
  NoFunction none_;
};

template <class F>
struct ProcessWindowEmitter {
  F f;
  F& function() { return f; }
  template <class K, class W, class Ctx, class V, class OUT>
  void emit(const K& key, const W&, Ctx& ctx, const std::vector<V>& values, Collector<OUT>& out) {
    f.process(key, ctx, values, out);
  }
  template <class Ctx>
  void clear(Ctx& ctx) {
    f.clear(ctx);
  }
};

template <class F>
struct WindowFunctionEmitter {
  F f;
  F& function() { return f; }
  template <class K, class W, class Ctx, class V, class OUT>
  void emit(const K& key, const W& window, Ctx&, const std::vector<V>& values,
            Collector<OUT>& out) {
    f.apply(key, window, values, out);
  }
  template <class Ctx>
  void clear(Ctx&) {}
};

template <class F>
struct ProcessAllWindowEmitter {
  F f;
  F& function() { return f; }
  template <class K, class W, class Ctx, class V, class OUT>
  void emit(const K&, const W&, Ctx& ctx, const std::vector<V>& values, Collector<OUT>& out) {
    f.process(ctx, values, out);
  }
  template <class Ctx>
  void clear(Ctx& ctx) {
    f.clear(ctx);
  }
};

template <class F>
struct AllWindowFunctionEmitter {
  F f;
  F& function() { return f; }
  template <class K, class W, class Ctx, class V, class OUT>
  void emit(const K&, const W& window, Ctx&, const std::vector<V>& values, Collector<OUT>& out) {
    f.apply(window, values, out);
  }
  template <class Ctx>
  void clear(Ctx&) {}
};

// What the API passes to the operator besides contents and emitter.
template <class IN, class W>
struct WindowSpec {
  std::function<std::unique_ptr<WindowAssigner<IN, W>>()> assigner;
  std::function<std::unique_ptr<Trigger<IN, W>>()> trigger;  // null: the assigner's default
  int64_t allowedLateness = 0;
  std::string lateDataTag;  // empty: late elements are dropped and counted
};

template <class K, class IN, class OUT, class W, class Contents, class Emitter, class KeySelector>
class WindowOperator final : public OneInputOperator<IN, OUT> {
  using Value = typename Contents::Value;
  using Timer = TimerData<K, W>;

 public:
  WindowOperator(WindowSpec<IN, W> spec, Contents contents, Emitter emitter, KeySelector key)
      : spec_(std::move(spec)),
        contents_(std::move(contents)),
        emitter_(std::move(emitter)),
        key_(std::move(key)) {}

  void initializeState(const OperatorStateRestore* restore) override {
    keyed_.initialize(this->context(), restore);
    KeyedStateBackend& backend = keyed_.backend();
    this->streamingContext().setKeyedStateBackend(&backend);
    functionState_.initialize(this->context(), restore, emitter_.function(), &backend);
    contents_.init(backend);
    timers_.initForOperator(
        this->context(), [this](const Timer& t) { onTimer(t, true); },
        [this](const Timer& t) { onTimer(t, false); }, restore);
  }
  OperatorStateSnapshot snapshotState(int64_t checkpointId) override {
    OperatorStateSnapshot s;
    s.keyedState = keyed_.snapshot(checkpointId);
    s.operatorState = functionState_.snapshot(emitter_.function(), checkpointId);
    s.timers = timers_.snapshot();
    return s;
  }

  void open() override {
    assigner_ = spec_.assigner();
    trigger_ = spec_.trigger ? spec_.trigger() : assigner_->getDefaultTrigger();
    merging_ = dynamic_cast<MergingWindowAssigner<IN, W>*>(assigner_.get());
    eventTime_ = assigner_->isEventTime();
    const std::string& name = this->context().runtimeContext().getOperatorName();
    if (merging_ != nullptr && !trigger_->canMerge()) {
      throw SluiceException("operator '" + name + "': the merging window assigner " +
                            assigner_->toString() + " needs a trigger that supports merging; " +
                            trigger_->toString() + " does not");
    }
    if (merging_ != nullptr) {
      mergingSetState_ = &getOrCreateListState<VoidNamespace>(
          keyed_.backend(), ListStateDescriptor<std::pair<W, W>>("merging-window-set"));
    }
    if (!spec_.lateDataTag.empty()) {
      lateOutput_ = static_cast<Output<IN>*>(this->context().sideOutput(spec_.lateDataTag));
    }
    triggerCtx_.op = this;
    processCtx_.op = this;
    assignerCtx_.op = this;
    evictorCtx_.op = this;
    sideOutputs_.setContext(&this->context());
    processCtx_.setSideOutputs(&sideOutputs_);
    windowStore_ = ScopedStateStore<W>(&keyed_.backend(), &processCtx_.window_);
    globalStore_ = ScopedStateStore<VoidNamespace>(&keyed_.backend(), &kVoid_);
    collector_.setOutput(&this->output());
    openFunction(contents_.function(), this->streamingContext());
    openFunction(emitter_.function(), this->streamingContext());
  }
  void close() override {
    closeFunction(emitter_.function());
    closeFunction(contents_.function());
    keyed_.dispose();
  }

  void processElement(const StreamRecord<IN>& r) override {
    currentKey_ = key_(r.value);
    keyed_.setCurrentKey(currentKey_);
    windows_.clear();
    assigner_->assignWindows(r.value, r.hasTimestamp ? r.timestamp : kMinTimestamp, assignerCtx_,
                             windows_);
    bool skipped = true;
    if (merging_ != nullptr) {
      loadMergingSet();
      for (const W& window : windows_) {
        // As Flink: merge first, then judge lateness on the merged window, so
        // an element whose own window is late still joins a live session.
        W actual = addToMergingSet(window);
        if (isWindowLate(actual)) {
          mapping_.erase(actual);
          mappingChanged_ = true;
          continue;
        }
        skipped = false;
        auto state = mapping_.find(actual);
        if (state == mapping_.end()) {
          throw SluiceException("window " + describe(actual) + " is not in the merging window set");
        }
        const W stateWindow = state->second;  // a copy: firing may change mapping_
        onElementInWindow(r, actual, stateWindow);
      }
      persistMergingSet();
    } else {
      for (const W& window : windows_) {
        if (isWindowLate(window)) continue;
        skipped = false;
        onElementInWindow(r, window, window);
      }
    }
    if (skipped && isElementLate(r)) {
      if (lateOutput_ != nullptr) {
        lateOutput_->collect(r);
      } else {
        this->context().incrementCounter("numLateRecordsDropped", 1);
        this->context().countDroppedRecord();
      }
    }
  }

  void processWatermark(int input, Watermark watermark) override {
    timers_.advanceWatermark(watermark.timestamp);
    OneInputOperator<IN, OUT>::processWatermark(input, watermark);
  }

  // For tests and snapshots.
  InternalTimerService<K, W>& timerService() { return timers_; }

 private:
  // --- contexts -------------------------------------------------------------
  struct TriggerCtxImpl final : OnMergeContext<W> {
    WindowOperator* op = nullptr;
    W window{};
    const std::vector<W>* merged = nullptr;
    int64_t getCurrentProcessingTime() const override {
      return op->timers_.currentProcessingTime();
    }
    int64_t getCurrentWatermark() const override { return op->timers_.currentWatermark(); }
    void registerProcessingTimeTimer(int64_t time) override {
      op->timers_.registerProcessingTimeTimer(op->currentKey_, window, time);
    }
    void registerEventTimeTimer(int64_t time) override {
      op->timers_.registerEventTimeTimer(op->currentKey_, window, time);
    }
    void deleteProcessingTimeTimer(int64_t time) override {
      op->timers_.deleteProcessingTimeTimer(op->currentKey_, window, time);
    }
    void deleteEventTimeTimer(int64_t time) override {
      op->timers_.deleteEventTimeTimer(op->currentKey_, window, time);
    }
    KeyedStateBackend& stateBackend() override { return op->keyed_.backend(); }
    const W& currentWindow() const override { return window; }
    const std::vector<W>& mergedWindows() const override { return *merged; }
  };
  struct AssignerCtxImpl final : WindowAssignerContext {
    WindowOperator* op = nullptr;
    int64_t getCurrentProcessingTime() const override {
      return op->context().clock().currentTimeMillis();
    }
  };
  struct EvictorCtxImpl final : EvictorContext<W> {
    WindowOperator* op = nullptr;
    int64_t getCurrentProcessingTime() const override {
      return op->timers_.currentProcessingTime();
    }
    int64_t getCurrentWatermark() const override { return op->timers_.currentWatermark(); }
  };
  using PwfContext = typename ProcessWindowFunction<Value, OUT, K, W>::Context;
  struct ProcessCtxImpl final : PwfContext {
    WindowOperator* op = nullptr;
    W window_{};
    const W& window() const override { return window_; }
    int64_t currentProcessingTime() const override { return op->timers_.currentProcessingTime(); }
    int64_t currentWatermark() const override { return op->timers_.currentWatermark(); }
    ScopedStateStore<W>& windowState() override { return op->windowStore_; }
    ScopedStateStore<VoidNamespace>& globalState() override { return op->globalStore_; }

    void setSideOutputs(SideOutputs* side) { this->sideOutputs_ = side; }
  };

  // --- element path ---------------------------------------------------------
  void onElementInWindow(const StreamRecord<IN>& r, const W& window, const W& stateWindow) {
    contents_.setNamespace(stateWindow);
    contents_.add(r);
    triggerCtx_.window = window;
    TriggerResult result = trigger_->onElement(
        r.value, r.hasTimestamp ? r.timestamp : kMinTimestamp, window, triggerCtx_);
    if (isFire(result)) emitWindowContents(window, stateWindow);
    if (isPurge(result)) {
      contents_.setNamespace(stateWindow);
      contents_.clear();
    }
    registerCleanupTimer(window);
  }

  void onTimer(const Timer& t, bool eventTimeTimer) {
    currentKey_ = t.key;
    keyed_.setCurrentKey(currentKey_);
    triggerCtx_.window = t.ns;
    W stateWindow = t.ns;
    if (merging_ != nullptr) {
      loadMergingSet();
      auto it = mapping_.find(t.ns);
      // A timer of a window that merged away: the trigger failed to delete it.
      if (it == mapping_.end()) return;
      stateWindow = it->second;
    }
    TriggerResult result = eventTimeTimer
                               ? trigger_->onEventTime(t.timestamp, t.ns, triggerCtx_)
                               : trigger_->onProcessingTime(t.timestamp, t.ns, triggerCtx_);
    if (isFire(result)) emitWindowContents(t.ns, stateWindow);
    if (isPurge(result)) {
      contents_.setNamespace(stateWindow);
      contents_.clear();
    }
    if (eventTimeTimer == eventTime_ && t.timestamp == cleanupTime(t.ns)) {
      clearAllState(t.ns, stateWindow);
    }
    if (merging_ != nullptr) persistMergingSet();
  }

  void emitWindowContents(const W& window, const W& stateWindow) {
    contents_.setNamespace(stateWindow);
    values_.clear();
    if (contents_.get(values_, window, evictorCtx_)) {
      processCtx_.window_ = window;
      collector_.setTimestampFrom(true, window.maxTimestamp());
      emitter_.emit(currentKey_, window, processCtx_, values_, collector_);
    }
    if constexpr (requires { contents_.afterFire(window, evictorCtx_); }) {
      // Even when evictBefore left nothing to reduce: what is left is
      // written back and evictAfter runs, as in Flink.
      if (contents_.fired()) {
        contents_.setNamespace(stateWindow);
        contents_.afterFire(window, evictorCtx_);
      }
    }
  }

  void clearAllState(const W& window, const W& stateWindow) {
    contents_.setNamespace(stateWindow);
    contents_.clear();
    triggerCtx_.window = window;
    trigger_->clear(window, triggerCtx_);
    processCtx_.window_ = window;
    emitter_.clear(processCtx_);
    if (merging_ != nullptr) {
      mapping_.erase(window);
      mappingChanged_ = true;
    }
  }

  // --- lateness -------------------------------------------------------------
  int64_t cleanupTime(const W& window) const {
    if (!eventTime_) return window.maxTimestamp();
    return saturatingAdd(window.maxTimestamp(), spec_.allowedLateness);
  }
  bool isWindowLate(const W& window) const {
    return eventTime_ && cleanupTime(window) <= timers_.currentWatermark();
  }
  bool isElementLate(const StreamRecord<IN>& r) const {
    return eventTime_ &&
           saturatingAdd(r.timestamp, spec_.allowedLateness) <= timers_.currentWatermark();
  }
  void registerCleanupTimer(const W& window) {
    int64_t t = cleanupTime(window);
    if (t == kMaxTimestamp) return;  // the end of time needs no cleanup
    if (eventTime_) {
      timers_.registerEventTimeTimer(currentKey_, window, t);
    } else {
      timers_.registerProcessingTimeTimer(currentKey_, window, t);
    }
  }
  void deleteCleanupTimer(const W& window) {
    int64_t t = cleanupTime(window);
    if (t == kMaxTimestamp) return;
    if (eventTime_) {
      timers_.deleteEventTimeTimer(currentKey_, window, t);
    } else {
      timers_.deleteProcessingTimeTimer(currentKey_, window, t);
    }
  }

  // --- merging windows (Flink's MergingWindowSet) ------------------------------
  void loadMergingSet() {
    mapping_.assign(mergingSetState_->get());
    mappingChanged_ = false;
  }
  void persistMergingSet() {
    if (!mappingChanged_) return;
    if (mapping_.empty()) {
      mergingSetState_->clear();
    } else {
      mergingSetState_->update(mapping_.entries());
    }
    mappingChanged_ = false;
  }

  struct CollectMerges final : MergingWindowAssigner<IN, W>::MergeCallback {
    std::vector<std::pair<W, std::vector<W>>> merges;
    void merge(const std::vector<W>& toBeMerged, const W& mergeResult) override {
      merges.emplace_back(mergeResult, toBeMerged);
    }
  };

  // Adds `newWindow`, merging it and existing windows as the assigner says;
  // returns the window the new element belongs to now.
  W addToMergingSet(const W& newWindow) {
    std::vector<W>& windows = mergeScratch_;
    windows.clear();
    for (auto& [w, s] : mapping_) windows.push_back(w);
    windows.push_back(newWindow);
    CollectMerges collect;
    merging_->mergeWindows(windows, collect);

    W resultWindow = newWindow;
    bool mergedNewWindow = false;
    for (auto& [mergeResult, mergedWindows] : collect.merges) {
      auto self = std::find(mergedWindows.begin(), mergedWindows.end(), newWindow);
      if (self != mergedWindows.end()) {
        mergedWindows.erase(self);
        mergedNewWindow = true;
        resultWindow = mergeResult;
      }
      // The state of the first merged window becomes the merged window's.
      W mergedStateWindow = mapping_.at(mergedWindows.front());
      std::vector<W> mergedStateWindows;
      for (const W& m : mergedWindows) {
        auto it = mapping_.find(m);
        if (it != mapping_.end()) {
          if (!(it->second == mergedStateWindow)) mergedStateWindows.push_back(it->second);
          mapping_.erase(it);
        }
      }
      mapping_[mergeResult] = mergedStateWindow;
      mappingChanged_ = true;
      bool onlyItself = mergedWindows.size() == 1 && mergedWindows.front() == mergeResult;
      if (!onlyItself) {
        onMerge(mergeResult, mergedWindows, mergedStateWindow, mergedStateWindows);
      }
    }
    if (collect.merges.empty() || (resultWindow == newWindow && !mergedNewWindow)) {
      mapping_[resultWindow] = resultWindow;
      mappingChanged_ = true;
    }
    return resultWindow;
  }

  void onMerge(const W& mergeResult, const std::vector<W>& mergedWindows,
               const W& stateWindowResult, const std::vector<W>& mergedStateWindows) {
    if (eventTime_ && cleanupTime(mergeResult) <= timers_.currentWatermark()) {
      throw SluiceException(
          "The end timestamp of an event-time window cannot become earlier than the current "
          "watermark by merging. Current watermark: " +
          std::to_string(timers_.currentWatermark()) + " window: " + describe(mergeResult));
    }
    if (!eventTime_ && mergeResult.maxTimestamp() <= timers_.currentProcessingTime()) {
      throw SluiceException(
          "The end timestamp of a processing-time window cannot become earlier than the current "
          "processing time by merging. Current processing time: " +
          std::to_string(timers_.currentProcessingTime()) + " window: " + describe(mergeResult));
    }
    triggerCtx_.window = mergeResult;
    triggerCtx_.merged = &mergedWindows;
    trigger_->onMerge(mergeResult, triggerCtx_);
    for (const W& m : mergedWindows) {
      triggerCtx_.window = m;
      trigger_->clear(m, triggerCtx_);
      deleteCleanupTimer(m);
    }
    triggerCtx_.merged = nullptr;
    if (!mergedStateWindows.empty()) contents_.merge(stateWindowResult, mergedStateWindows);
  }

  static std::string describe(const W& w) {
    if constexpr (requires { w.toString(); }) {
      return w.toString();
    } else {
      return "(window)";
    }
  }

  WindowSpec<IN, W> spec_;
  Contents contents_;
  Emitter emitter_;
  KeySelector key_;
  KeyedStateHandler<K> keyed_;
  FunctionStateHandler functionState_;
  InternalTimerService<K, W> timers_;
  std::unique_ptr<WindowAssigner<IN, W>> assigner_;
  std::unique_ptr<Trigger<IN, W>> trigger_;
  MergingWindowAssigner<IN, W>* merging_ = nullptr;
  bool eventTime_ = false;
  Output<IN>* lateOutput_ = nullptr;
  InternalListState<VoidNamespace, std::pair<W, W>>* mergingSetState_ = nullptr;
  WindowMapping<W> mapping_;
  std::vector<W> mergeScratch_;  // addToMergingSet's window list, reused
  bool mappingChanged_ = false;

  K currentKey_{};
  std::vector<W> windows_;
  std::vector<Value> values_;
  TriggerCtxImpl triggerCtx_;
  AssignerCtxImpl assignerCtx_;
  EvictorCtxImpl evictorCtx_;
  SideOutputs sideOutputs_;
  ProcessCtxImpl processCtx_;
  ScopedStateStore<W> windowStore_;
  ScopedStateStore<VoidNamespace> globalStore_;
  const VoidNamespace kVoid_{};
  TimestampedCollector<OUT> collector_;
};

}  // namespace sluice::internal
