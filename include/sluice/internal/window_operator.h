// The window operator (Flink's WindowOperator and EvictingWindowOperator in
// one): assigns each element to windows, keeps each window's contents in
// keyed state with the window as namespace, asks the trigger when to fire and
// purge, and cleans a window's state up once the watermark (or, for
// processing-time windows, the clock) passes its end plus the allowed
// lateness. Merging assigners (sessions) keep a per-key mapping from each
// window to the window whose namespace holds its state, as Flink's
// MergingWindowSet does.
//
// One operator class serves every window function: what a window keeps is a
// run-time strategy (WindowContents: a running reduce, an accumulator, every
// element, or every element with an evictor) and so is what runs on it when
// it fires (InternalWindowFunction), so a job instantiates the operator once
// per (key, input, value, output, window) types, not once per function. The
// rules that do not depend on types (cleanup time, lateness) live in
// window::WindowCleanup, timers in window::TimerQueue (src/window).
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sluice/core/owned.h>
#include <sluice/internal/function_state.h>
#include <sluice/internal/keyed_state_handler.h>
#include <sluice/internal/operators.h>
#include <sluice/internal/timer_service.h>
#include <sluice/window/merging_window_set.h>
#include <sluice/window/sliced_state.h>
#include <sluice/window/slicing.h>
#include <sluice/window/window_cleanup.h>
#include <sluice/windows.h>

namespace sluice::internal {

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

template <class F>
RichFunction* richOf(F& f) {
  if constexpr (std::is_base_of_v<RichFunction, F>) {
    return &f;
  } else {
    (void)f;
    return nullptr;
  }
}

// --- contents: what a window keeps -------------------------------------------

// The state of every window of an operator, as a run-time strategy. `V` is
// what the window function receives.
template <class IN, class V, class W>
class WindowContents {
 public:
  virtual ~WindowContents() = default;
  // A fresh copy for one subtask (the prototype stays in the job graph).
  virtual std::unique_ptr<WindowContents> clone() const = 0;
  virtual void init(KeyedStateBackend& backend) = 0;
  // The user's incremental function (reduce, aggregate), for open/close.
  virtual RichFunction* rich() { return nullptr; }

  virtual void setNamespace(const W& window) = 0;
  virtual void add(const StreamRecord<IN>& record) = 0;
  // The function's input when the window fires; false when it is empty.
  virtual bool get(std::vector<V>& out, const W& window, EvictorContext<W>& ctx) = 0;
  // After the function ran on what get() returned for `window`, whose state
  // is in `stateWindow`'s namespace (evicting contents only: evictAfter, then
  // what is left is written back).
  virtual void afterFire(const W& window, const W& stateWindow, EvictorContext<W>& ctx) {
    (void)window;
    (void)stateWindow;
    (void)ctx;
  }
  virtual void clear() = 0;
  virtual void merge(const W& target, const std::vector<W>& sources) = 0;
};

// reduce(): one running value per window.
template <class T, class W, class F>
class ReduceContents final : public WindowContents<T, T, W> {
 public:
  explicit ReduceContents(F f) : f_(std::move(f)) {}
  std::unique_ptr<WindowContents<T, T, W>> clone() const override {
    return internal::makeOwned<ReduceContents>(f_);
  }
  void init(KeyedStateBackend& backend) override {
    state_ = &getOrCreateReducingState<W>(
        backend, ReducingStateDescriptor<T>("window-contents", [this](const T& a, const T& b) {
          return invokeReduce(f_, a, b);
        }));
  }
  RichFunction* rich() override { return richOf(f_); }
  void setNamespace(const W& w) override { state_->setCurrentNamespace(w); }
  void add(const StreamRecord<T>& r) override { state_->add(r.value); }
  bool get(std::vector<T>& out, const W&, EvictorContext<W>&) override {
    std::optional<T> v = state_->get();
    if (!v) return false;
    out.push_back(std::move(*v));
    return true;
  }
  void clear() override { state_->clear(); }
  void merge(const W& target, const std::vector<W>& sources) override {
    state_->mergeNamespaces(target, sources);
  }

 private:
  F f_;
  InternalReducingState<W, T>* state_ = nullptr;
};

// aggregate(): one accumulator per window.
template <class IN, class ACC, class OUT, class W, class AGG>
class AggregateContents final : public WindowContents<IN, OUT, W> {
 public:
  explicit AggregateContents(AGG agg) : agg_(std::move(agg)) {}
  std::unique_ptr<WindowContents<IN, OUT, W>> clone() const override {
    return internal::makeOwned<AggregateContents>(agg_);
  }
  void init(KeyedStateBackend& backend) override {
    // Non-owning: the operator owns the function.
    std::shared_ptr<AggregateFunction<IN, ACC, OUT>> fn(std::shared_ptr<void>(), &agg_);
    state_ = &getOrCreateAggregatingState<W>(
        backend, AggregatingStateDescriptor<IN, ACC, OUT>("window-contents", fn));
  }
  RichFunction* rich() override { return richOf(agg_); }
  void setNamespace(const W& w) override { state_->setCurrentNamespace(w); }
  void add(const StreamRecord<IN>& r) override { state_->add(r.value); }
  bool get(std::vector<OUT>& out, const W&, EvictorContext<W>&) override {
    std::optional<OUT> v = state_->get();
    if (!v) return false;
    out.push_back(std::move(*v));
    return true;
  }
  void clear() override { state_->clear(); }
  void merge(const W& target, const std::vector<W>& sources) override {
    state_->mergeNamespaces(target, sources);
  }

 private:
  AGG agg_;
  InternalAggregatingState<W, IN, ACC, OUT>* state_ = nullptr;
};

// process()/apply(): every element.
template <class T, class W>
class ListContents final : public WindowContents<T, T, W> {
 public:
  std::unique_ptr<WindowContents<T, T, W>> clone() const override {
    return internal::makeOwned<ListContents>();
  }
  void init(KeyedStateBackend& backend) override {
    state_ = &getOrCreateListState<W>(backend, ListStateDescriptor<T>("window-contents"));
  }
  void setNamespace(const W& w) override { state_->setCurrentNamespace(w); }
  void add(const StreamRecord<T>& r) override { state_->add(r.value); }
  bool get(std::vector<T>& out, const W&, EvictorContext<W>&) override {
    out = state_->get();
    return !out.empty();
  }
  void clear() override { state_->clear(); }
  void merge(const W& target, const std::vector<W>& sources) override {
    state_->mergeNamespaces(target, sources);
  }

 private:
  InternalListState<W, T>* state_ = nullptr;
};

// How an evicting window turns its remaining elements into the function's
// input: all of them, reduced to one, or aggregated to one.
template <class T>
struct IdentityFold {
  using Value = T;
  RichFunction* rich() { return nullptr; }
  bool fold(std::vector<T>& values, std::vector<T>& out) {
    out = std::move(values);
    return true;
  }
};
template <class T, class F>
struct ReduceFold {
  using Value = T;
  F f;
  RichFunction* rich() { return richOf(f); }
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
  RichFunction* rich() { return richOf(agg); }
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
class EvictingContents final : public WindowContents<T, typename Fold::Value, W> {
 public:
  using Value = typename Fold::Value;
  using EvictorFactory = std::function<std::unique_ptr<Evictor<T, W>>()>;
  EvictingContents(Fold fold, EvictorFactory evictor)
      : fold_(std::move(fold)), makeEvictor_(std::move(evictor)) {}
  std::unique_ptr<WindowContents<T, Value, W>> clone() const override {
    return internal::makeOwned<EvictingContents>(fold_, makeEvictor_);
  }
  void init(KeyedStateBackend& backend) override {
    evictor_ = makeEvictor_();
    state_ = &getOrCreateListState<W>(backend,
                                      ListStateDescriptor<TimestampedValue<T>>("window-contents"));
  }
  RichFunction* rich() override { return fold_.rich(); }
  void setNamespace(const W& w) override { state_->setCurrentNamespace(w); }
  void add(const StreamRecord<T>& r) override {
    state_->add(r.hasTimestamp ? TimestampedValue<T>(r.value, r.timestamp)
                               : TimestampedValue<T>(r.value));
  }
  bool get(std::vector<Value>& out, const W& window, EvictorContext<W>& ctx) override {
    elements_ = state_->get();
    fired_ = !elements_.empty();
    if (!fired_) return false;
    evictor_->evictBefore(elements_, static_cast<int>(elements_.size()), window, ctx);
    std::vector<T> values;
    values.reserve(elements_.size());
    for (const auto& e : elements_) values.push_back(e.getValue());
    return fold_.fold(values, out);
  }
  // Even when evictBefore left nothing to reduce: what is left is written
  // back and evictAfter runs, as in Flink.
  void afterFire(const W& window, const W& stateWindow, EvictorContext<W>& ctx) override {
    if (!fired_) return;
    fired_ = false;
    state_->setCurrentNamespace(stateWindow);
    evictor_->evictAfter(elements_, static_cast<int>(elements_.size()), window, ctx);
    state_->update(elements_);
    elements_.clear();
  }
  void clear() override { state_->clear(); }
  void merge(const W& target, const std::vector<W>& sources) override {
    state_->mergeNamespaces(target, sources);
  }

 private:
  Fold fold_;
  EvictorFactory makeEvictor_;
  std::unique_ptr<Evictor<T, W>> evictor_;
  InternalListState<W, TimestampedValue<T>>* state_ = nullptr;
  std::vector<TimestampedValue<T>> elements_;
  bool fired_ = false;
};

// --- functions: what runs on a fired window -----------------------------------

template <class V, class OUT, class K, class W>
class InternalWindowFunction {
 public:
  using Context = typename ProcessWindowFunction<V, OUT, K, W>::Context;
  virtual ~InternalWindowFunction() = default;
  virtual std::unique_ptr<InternalWindowFunction> clone() const = 0;
  virtual void process(const K& key, const W& window, Context& ctx, const std::vector<V>& values,
                       Collector<OUT>& out) = 0;
  // The window is purged for good (ProcessWindowFunction::clear).
  virtual void clear(Context& ctx) { (void)ctx; }
  // The user's function object, for its lifecycle and operator state; null
  // when there is none or it is not of that kind.
  virtual RichFunction* rich() { return nullptr; }
  virtual CheckpointedFunction* checkpointed() { return nullptr; }
};

// The ProcessWindowFunction context the window operators give: the window
// being fired, the clocks and the state stores. `Op` (which befriends its
// instantiation) says what its clocks read with processingTimeForContext()
// and watermarkForContext().
template <class Base, class W, class Op>
struct WindowProcessContext final : Base {
  Op* op = nullptr;
  W window_{};
  const W& window() const override { return window_; }
  int64_t currentProcessingTime() const override { return op->processingTimeForContext(); }
  int64_t currentWatermark() const override { return op->watermarkForContext(); }
  ScopedStateStore<W>& windowState() override { return op->windowStore_; }
  ScopedStateStore<VoidNamespace>& globalState() override { return op->globalStore_; }
  void setSideOutputs(SideOutputs* side) { this->sideOutputs_ = side; }
};

// A record too late for any window: to the late-data side output when the
// job reads it (`late` non-null), else dropped and counted in
// numLateRecordsDropped, so that nothing is lost silently.
template <class IN>
void emitLateRecord(Output<IN>* late, OperatorContext& context, const StreamRecord<IN>& r) {
  if (late != nullptr) {
    late->collect(r);
  } else {
    context.incrementCounter("numLateRecordsDropped", 1);
    context.countDroppedRecord();
  }
}

// Opens a window operator's user function with the operator's runtime
// context when it is a RichFunction (null: it is not); closeRich closes it
// and takes the context back.
inline void openRich(RichFunction* f, StreamingRuntimeContext& context) {
  if (f == nullptr) return;
  f->setRuntimeContext(&context);
  f->open();
}
inline void closeRich(RichFunction* f) {
  if (f == nullptr) return;
  f->close();
  f->setRuntimeContext(nullptr);
}

// reduce/aggregate without a window function: each value as is.
template <class V, class K, class W>
class PassThroughWindowFunction final : public InternalWindowFunction<V, V, K, W> {
 public:
  using Context = typename InternalWindowFunction<V, V, K, W>::Context;
  std::unique_ptr<InternalWindowFunction<V, V, K, W>> clone() const override {
    return internal::makeOwned<PassThroughWindowFunction>();
  }
  void process(const K&, const W&, Context&, const std::vector<V>& values,
               Collector<V>& out) override {
    for (const V& v : values) out.collect(v);
  }
};

// A user window function of any of the four kinds.
template <class V, class OUT, class K, class W, class F>
class UserWindowFunction final : public InternalWindowFunction<V, OUT, K, W> {
 public:
  using Context = typename InternalWindowFunction<V, OUT, K, W>::Context;
  explicit UserWindowFunction(F f) : f_(std::move(f)) {}
  std::unique_ptr<InternalWindowFunction<V, OUT, K, W>> clone() const override {
    return internal::makeOwned<UserWindowFunction>(f_);
  }
  void process(const K& key, const W& window, Context& ctx, const std::vector<V>& values,
               Collector<OUT>& out) override {
    if constexpr (std::is_base_of_v<ProcessWindowFunction<V, OUT, K, W>, F>) {
      f_.process(key, ctx, values, out);
    } else if constexpr (std::is_base_of_v<WindowFunction<V, OUT, K, W>, F>) {
      f_.apply(key, window, values, out);
    } else if constexpr (std::is_base_of_v<ProcessAllWindowFunction<V, OUT, W>, F>) {
      (void)key;
      f_.process(ctx, values, out);
    } else {
      (void)key;
      (void)ctx;
      f_.apply(window, values, out);
    }
  }
  void clear(Context& ctx) override {
    if constexpr (requires { f_.clear(ctx); }) {
      f_.clear(ctx);
    } else {
      (void)ctx;
    }
  }
  RichFunction* rich() override { return richOf(f_); }
  CheckpointedFunction* checkpointed() override {
    if constexpr (std::is_base_of_v<CheckpointedFunction, F>) {
      return &f_;
    } else {
      return nullptr;
    }
  }

 private:
  F f_;
};

// --- the operator ------------------------------------------------------------------

// What WindowedStream collects before a window function is chosen.
template <class IN, class W>
struct WindowSettings {
  std::function<std::unique_ptr<WindowAssigner<IN, W>>()> assigner;
  // Set when the assigner makes aligned windows the sliced window operator
  // can run: event-time tumbling, sliding or cumulating, or processing-time
  // tumbling or sliding (AlignedWindows::processingTime).
  std::optional<window::AlignedWindows> aligned;
  // Set (to the gap) when the assigner makes event-time sessions with a
  // static gap (EventTimeSessionWindows::withGap), which the session window
  // operator can run.
  std::optional<int64_t> sessionGap;
  std::function<std::unique_ptr<Trigger<IN, W>>()> trigger;  // null: the assigner's default
  int64_t allowedLateness = 0;
  std::string lateDataTag;  // empty: late elements are dropped and counted
};

// What the API passes to the operator.
template <class K, class IN, class V, class OUT, class W>
struct WindowSpec : WindowSettings<IN, W> {
  std::function<K(const IN&)> key;
  std::shared_ptr<const WindowContents<IN, V, W>> contents;
  std::shared_ptr<const InternalWindowFunction<V, OUT, K, W>> function;
};

template <class K, class IN, class V, class OUT, class W>
class WindowOperator final : public OneInputOperator<IN, OUT>,
                             private window::MergingWindowSet::Listener {
  using Timer = TimerData<K, W>;
  using Function = InternalWindowFunction<V, OUT, K, W>;
  // Merging assigners (sessions) produce TimeWindows; the merging window set
  // is compiled for those only.
  static constexpr bool kCanMerge = std::is_same_v<W, TimeWindow>;

 public:
  explicit WindowOperator(WindowSpec<K, IN, V, OUT, W> spec)
      : spec_(std::move(spec)),
        contents_(spec_.contents->clone()),
        function_(spec_.function->clone()) {}

  void initializeState(const OperatorStateRestore* restore) override {
    keyed_.initialize(this->context(), restore);
    KeyedStateBackend& backend = keyed_.backend();
    if (restore != nullptr) window::checkNoSlicedState(backend, this->operatorName());
    this->streamingContext().setKeyedStateBackend(&backend);
    functionState_.initializeBackend(this->context(), restore);
    functionState_.initializeCheckpointed(function_->checkpointed(), &backend);
    contents_->init(backend);
    timers_.initForOperator(
        this->context(), [this](const Timer& t) { onTimer(t, true); },
        [this](const Timer& t) { onTimer(t, false); }, restore);
  }
  OperatorStateSnapshot snapshotState(int64_t checkpointId) override {
    OperatorStateSnapshot s;
    s.keyedState = keyed_.snapshot(checkpointId);
    s.operatorState = functionState_.snapshotCheckpointed(function_->checkpointed(), checkpointId);
    s.writeTimers = timers_.snapshotLater();
    return s;
  }

  void open() override {
    assigner_ = spec_.assigner();
    trigger_ = spec_.trigger ? spec_.trigger() : assigner_->getDefaultTrigger();
    mergingAssigner_ = dynamic_cast<MergingWindowAssigner<IN, W>*>(assigner_.get());
    cleanup_ = window::WindowCleanup(assigner_->isEventTime(), spec_.allowedLateness);
    const std::string& name = this->context().runtimeContext().getOperatorName();
    if (mergingAssigner_ != nullptr && !trigger_->canMerge()) {
      throw SluiceException("operator '" + name + "': the merging window assigner " +
                            assigner_->toString() + " needs a trigger that supports merging; " +
                            trigger_->toString() + " does not");
    }
    if (mergingAssigner_ != nullptr) {
      if constexpr (kCanMerge) {
        merging_ = std::make_unique<window::MergingWindowSet>();
        merging_->init(keyed_.backend());
      } else {
        throw SluiceException("operator '" + name + "': the merging window assigner " +
                              assigner_->toString() +
                              " must assign TimeWindows; merging is supported for TimeWindow only");
      }
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
    openRich(contents_->rich(), this->streamingContext());
    openRich(function_->rich(), this->streamingContext());
  }
  void close() override {
    closeRich(function_->rich());
    closeRich(contents_->rich());
    keyed_.dispose();
  }

  void processElement(const StreamRecord<IN>& r) override {
    currentKey_ = spec_.key(r.value);
    keyed_.setCurrentKey(currentKey_);
    windows_.clear();
    assigner_->assignWindows(r.value, r.hasTimestamp ? r.timestamp : kMinTimestamp, assignerCtx_,
                             windows_);
    const bool skipped = merging_ ? addToMergingWindows(r) : addToWindows(r);
    if (skipped && cleanup_.isElementLate(r.timestamp, timers_.currentWatermark())) {
      emitLateRecord(lateOutput_, this->context(), r);
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
  using ProcessCtxImpl = WindowProcessContext<typename Function::Context, W, WindowOperator>;
  friend ProcessCtxImpl;
  int64_t processingTimeForContext() const { return timers_.currentProcessingTime(); }
  int64_t watermarkForContext() const { return timers_.currentWatermark(); }

  // --- element path ---------------------------------------------------------
  // Returns whether every window of the element was late.
  bool addToWindows(const StreamRecord<IN>& r) {
    bool skipped = true;
    for (const W& window : windows_) {
      if (cleanup_.isWindowLate(window.maxTimestamp(), timers_.currentWatermark())) continue;
      skipped = false;
      onElementInWindow(r, window, window);
    }
    return skipped;
  }

  bool addToMergingWindows(const StreamRecord<IN>& r) {
    if constexpr (kCanMerge) {
      struct Collect final : MergingWindowAssigner<IN, W>::MergeCallback {
        std::vector<window::MergingWindowSet::Merge>* merges = nullptr;
        void merge(const std::vector<W>& toBeMerged, const W& mergeResult) override {
          merges->push_back({mergeResult, toBeMerged});
        }
      } collect;
      collect.merges = &merges_;
      bool skipped = true;
      merging_->load();
      for (const W& window : windows_) {
        // As Flink: merge first, then judge lateness on the merged window, so
        // an element whose own window is late still joins a live session.
        merges_.clear();
        mergingAssigner_->mergeWindows(merging_->windowsWith(window), collect);
        W actual = merging_->add(window, merges_, *this);
        if (cleanup_.isWindowLate(actual.maxTimestamp(), timers_.currentWatermark())) {
          merging_->erase(actual);
          continue;
        }
        skipped = false;
        auto state = merging_->find(actual);
        if (state == merging_->end()) {
          throw SluiceException("window " + describe(actual) + " is not in the merging window set");
        }
        const W stateWindow = state->second;  // a copy: firing may change the set
        onElementInWindow(r, actual, stateWindow);
      }
      merging_->persist();
      return skipped;
    } else {
      (void)r;
      return false;
    }
  }

  void onElementInWindow(const StreamRecord<IN>& r, const W& window, const W& stateWindow) {
    contents_->setNamespace(stateWindow);
    contents_->add(r);
    triggerCtx_.window = window;
    TriggerResult result = trigger_->onElement(
        r.value, r.hasTimestamp ? r.timestamp : kMinTimestamp, window, triggerCtx_);
    if (isFire(result)) emitWindowContents(window, stateWindow);
    if (isPurge(result)) {
      contents_->setNamespace(stateWindow);
      contents_->clear();
    }
    registerCleanupTimer(window);
  }

  void onTimer(const Timer& t, bool eventTimeTimer) {
    currentKey_ = t.key;
    keyed_.setCurrentKey(currentKey_);
    triggerCtx_.window = t.ns;
    W stateWindow = t.ns;
    if constexpr (kCanMerge) {
      if (merging_) {
        merging_->load();
        auto it = merging_->find(t.ns);
        // A timer of a window that merged away: the trigger failed to delete it.
        if (it == merging_->end()) return;
        stateWindow = it->second;
      }
    }
    TriggerResult result = eventTimeTimer
                               ? trigger_->onEventTime(t.timestamp, t.ns, triggerCtx_)
                               : trigger_->onProcessingTime(t.timestamp, t.ns, triggerCtx_);
    if (isFire(result)) emitWindowContents(t.ns, stateWindow);
    if (isPurge(result)) {
      contents_->setNamespace(stateWindow);
      contents_->clear();
    }
    if (eventTimeTimer == cleanup_.eventTime() &&
        t.timestamp == cleanup_.cleanupTime(t.ns.maxTimestamp())) {
      clearAllState(t.ns, stateWindow);
    }
    if (merging_) merging_->persist();
  }

  void emitWindowContents(const W& window, const W& stateWindow) {
    contents_->setNamespace(stateWindow);
    values_.clear();
    if (contents_->get(values_, window, evictorCtx_)) {
      processCtx_.window_ = window;
      collector_.setTimestampFrom(true, window.maxTimestamp());
      function_->process(currentKey_, window, processCtx_, values_, collector_);
    }
    contents_->afterFire(window, stateWindow, evictorCtx_);
  }

  void clearAllState(const W& window, const W& stateWindow) {
    contents_->setNamespace(stateWindow);
    contents_->clear();
    triggerCtx_.window = window;
    trigger_->clear(window, triggerCtx_);
    processCtx_.window_ = window;
    function_->clear(processCtx_);
    if constexpr (kCanMerge) {
      if (merging_) merging_->erase(window);
    }
  }

  void registerCleanupTimer(const W& window) {
    if (!cleanup_.needsCleanupTimer(window.maxTimestamp())) return;  // the end of time
    const int64_t t = cleanup_.cleanupTime(window.maxTimestamp());
    if (cleanup_.eventTime()) {
      timers_.registerEventTimeTimer(currentKey_, window, t);
    } else {
      timers_.registerProcessingTimeTimer(currentKey_, window, t);
    }
  }
  void deleteCleanupTimer(const W& window) {
    if (!cleanup_.needsCleanupTimer(window.maxTimestamp())) return;
    const int64_t t = cleanup_.cleanupTime(window.maxTimestamp());
    if (cleanup_.eventTime()) {
      timers_.deleteEventTimeTimer(currentKey_, window, t);
    } else {
      timers_.deleteProcessingTimeTimer(currentKey_, window, t);
    }
  }

  // MergingWindowSet::Listener (W is TimeWindow whenever it is called).
  void onMerge(const TimeWindow& result, const std::vector<TimeWindow>& merged,
               const TimeWindow& stateResult, const std::vector<TimeWindow>& mergedState) override {
    if constexpr (kCanMerge) mergeWindows(result, merged, stateResult, mergedState);
  }
  void mergeWindows(const W& mergeResult, const std::vector<W>& mergedWindows,
                    const W& stateWindowResult, const std::vector<W>& mergedStateWindows) {
    // The window is described, and the clock read, only when they matter.
    const int64_t watermark = timers_.currentWatermark();
    const int64_t now = cleanup_.eventTime() ? kMinTimestamp : timers_.currentProcessingTime();
    if (cleanup_.isMergeResultLate(mergeResult.maxTimestamp(), watermark, now)) [[unlikely]] {
      cleanup_.failMergeResult(watermark, now, describe(mergeResult));
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
    if (!mergedStateWindows.empty()) contents_->merge(stateWindowResult, mergedStateWindows);
  }

  static std::string describe(const W& w) {
    if constexpr (requires { w.toString(); }) {
      return w.toString();
    } else {
      return "(window)";
    }
  }

  WindowSpec<K, IN, V, OUT, W> spec_;
  std::unique_ptr<WindowContents<IN, V, W>> contents_;
  std::unique_ptr<Function> function_;
  KeyedStateHandler<K> keyed_;
  FunctionStateHandler functionState_;
  InternalTimerService<K, W> timers_;
  std::unique_ptr<WindowAssigner<IN, W>> assigner_;
  std::unique_ptr<Trigger<IN, W>> trigger_;
  MergingWindowAssigner<IN, W>* mergingAssigner_ = nullptr;
  std::unique_ptr<window::MergingWindowSet> merging_;
  std::vector<window::MergingWindowSet::Merge> merges_;
  window::WindowCleanup cleanup_;
  Output<IN>* lateOutput_ = nullptr;

  K currentKey_{};
  std::vector<W> windows_;
  std::vector<V> values_;
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
