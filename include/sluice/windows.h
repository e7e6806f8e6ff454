// Windows: the window types, assigners, triggers, evictors and window
// functions of Flink's DataStream API, with Flink's semantics:
//   - a time window is [start, end); start = ts - ((ts - offset) mod size),
//     correct for negative timestamps too; an element at `end` belongs to the
//     next window; maxTimestamp() = end - 1;
//   - an event-time window fires when the watermark reaches end - 1;
//   - a sliding assigner puts an element into every window [start, start +
//     size) that contains it, starts aligned to the slide (and offset);
//   - a cumulating assigner (CumulativeEventTimeWindows, a Sluice extension)
//     into every window [start, start + k * step) that contains it, start
//     aligned to the max size (and offset);
//   - sessions whose elements are exactly one gap apart merge.
// Near the int64 limits, window ends and cleanup times saturate at the
// maximum timestamp instead of overflowing (Flink's long arithmetic wraps),
// and a window that would start below the minimum timestamp starts at it but
// keeps its true end.
//
//   keyed.window(TumblingEventTimeWindows::of(std::chrono::seconds(5)))
//        .allowedLateness(std::chrono::seconds(1))
//        .sideOutputLateData(lateTag)
//        .reduce([](const Sale& a, const Sale& b) { ... });
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <sluice/core/owned.h>
#include <sluice/core/serializer.h>
#include <sluice/core/status.h>
#include <sluice/core/stream_element.h>
#include <sluice/functions.h>
#include <sluice/internal/keyed_state.h>
#include <sluice/state/keyed_state_backend.h>
#include <sluice/state/state.h>
#include <sluice/window/time_window.h>

namespace sluice {

namespace internal {
template <class Rep, class Period>
int64_t toMillis(std::chrono::duration<Rep, Period> d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}
}  // namespace internal

// ---------------------------------------------------------------------------
// Timestamped values (TimeWindow and GlobalWindow: <sluice/window/time_window.h>)

// An element with its timestamp, as evictors see it.
template <class T>
class TimestampedValue {
 public:
  TimestampedValue() = default;
  explicit TimestampedValue(T value) : value_(std::move(value)) {}
  TimestampedValue(T value, int64_t timestamp)
      : value_(std::move(value)), timestamp_(timestamp), hasTimestamp_(true) {}
  const T& getValue() const { return value_; }
  T& getValue() { return value_; }
  int64_t getTimestamp() const { return timestamp_; }
  bool hasTimestamp() const { return hasTimestamp_; }

 private:
  T value_{};
  int64_t timestamp_ = kMinTimestamp;
  bool hasTimestamp_ = false;
};

template <class T>
struct TypeSerializer<TimestampedValue<T>> {
  static constexpr size_t kMinEncodedSize = 9;
  static void serialize(const TimestampedValue<T>& v, DataOutputView& out) {
    out.writeBool(v.hasTimestamp());
    out.writeI64(v.getTimestamp());
    TypeSerializer<T>::serialize(v.getValue(), out);
  }
  static void deserialize(TimestampedValue<T>& v, DataInputView& in) {
    bool has = in.readBool();
    int64_t ts = in.readI64();
    T value{};
    TypeSerializer<T>::deserialize(value, in);
    v = has ? TimestampedValue<T>(std::move(value), ts) : TimestampedValue<T>(std::move(value));
  }
  static std::string schema() { return "TimestampedValue<" + TypeSerializer<T>::schema() + ">"; }
};

// ---------------------------------------------------------------------------
// Triggers

enum class TriggerResult : uint8_t { CONTINUE, FIRE_AND_PURGE, FIRE, PURGE };
inline bool isFire(TriggerResult r) {
  return r == TriggerResult::FIRE || r == TriggerResult::FIRE_AND_PURGE;
}
inline bool isPurge(TriggerResult r) {
  return r == TriggerResult::PURGE || r == TriggerResult::FIRE_AND_PURGE;
}

// What a trigger may do for the current key and window: read time, set and
// delete timers, and keep state scoped to the window.
template <class W>
class TriggerContext {
 public:
  virtual ~TriggerContext() = default;
  virtual int64_t getCurrentProcessingTime() const = 0;
  virtual int64_t getCurrentWatermark() const = 0;
  virtual void registerProcessingTimeTimer(int64_t time) = 0;
  virtual void registerEventTimeTimer(int64_t time) = 0;
  virtual void deleteProcessingTimeTimer(int64_t time) = 0;
  virtual void deleteEventTimeTimer(int64_t time) = 0;

  template <class V>
  ValueState<V>& getPartitionedState(const ValueStateDescriptor<V>& d) {
    return scoped(getOrCreateValueState<W>(stateBackend(), d));
  }
  template <class V>
  ListState<V>& getPartitionedState(const ListStateDescriptor<V>& d) {
    return scoped(getOrCreateListState<W>(stateBackend(), d));
  }
  template <class UK, class UV>
  MapState<UK, UV>& getPartitionedState(const MapStateDescriptor<UK, UV>& d) {
    return scoped(getOrCreateMapState<W>(stateBackend(), d));
  }
  template <class V>
  ReducingState<V>& getPartitionedState(const ReducingStateDescriptor<V>& d) {
    return scoped(getOrCreateReducingState<W>(stateBackend(), d));
  }
  template <class IN, class ACC, class OUT>
  AggregatingState<IN, OUT>& getPartitionedState(
      const AggregatingStateDescriptor<IN, ACC, OUT>& d) {
    return scoped(getOrCreateAggregatingState<W>(stateBackend(), d));
  }

 protected:
  virtual KeyedStateBackend& stateBackend() = 0;
  virtual const W& currentWindow() const = 0;
  template <class S>
  S& scoped(S& s) {
    s.setCurrentNamespace(currentWindow());
    return s;
  }
};

// During onMerge: the state of the merged windows can be merged into the
// new window's (reducing, aggregating and list state).
template <class W>
class OnMergeContext : public TriggerContext<W> {
 public:
  template <class V>
  void mergePartitionedState(const ReducingStateDescriptor<V>& d) {
    getOrCreateReducingState<W>(this->stateBackend(), d)
        .mergeNamespaces(this->currentWindow(), mergedWindows());
  }
  template <class IN, class ACC, class OUT>
  void mergePartitionedState(const AggregatingStateDescriptor<IN, ACC, OUT>& d) {
    getOrCreateAggregatingState<W>(this->stateBackend(), d)
        .mergeNamespaces(this->currentWindow(), mergedWindows());
  }
  template <class V>
  void mergePartitionedState(const ListStateDescriptor<V>& d) {
    getOrCreateListState<W>(this->stateBackend(), d)
        .mergeNamespaces(this->currentWindow(), mergedWindows());
  }

 protected:
  virtual const std::vector<W>& mergedWindows() const = 0;
};

// Decides when a window fires and when its contents are purged. One
// instance per window operator subtask; per-window data goes in partitioned
// state, not in members.
template <class T, class W>
class Trigger {
 public:
  using ElementType = T;
  using WindowType = W;
  virtual ~Trigger() = default;
  virtual TriggerResult onElement(const T& element, int64_t timestamp, const W& window,
                                  TriggerContext<W>& ctx) = 0;
  virtual TriggerResult onProcessingTime(int64_t time, const W& window, TriggerContext<W>& ctx) = 0;
  virtual TriggerResult onEventTime(int64_t time, const W& window, TriggerContext<W>& ctx) = 0;
  // Whether onMerge is supported (needed with merging assigners).
  virtual bool canMerge() const { return false; }
  virtual void onMerge(const W& window, OnMergeContext<W>& ctx) {
    (void)window;
    (void)ctx;
    throw SluiceException("this trigger does not support merging windows");
  }
  // Removes the trigger's timers and state for `window`.
  virtual void clear(const W& window, TriggerContext<W>& ctx) = 0;
  virtual std::string toString() const { return "Trigger"; }
};

namespace internal {
template <class>
inline constexpr bool kAlwaysFalseTrigger = false;

// A Trigger<T, W> from a spec (built-in triggers) or a user trigger object.
template <class T, class W, class S>
std::unique_ptr<Trigger<T, W>> buildTrigger(const S& s) {
  if constexpr (std::is_base_of_v<Trigger<T, W>, S>) {
    return internal::makeOwned<S>(s);
  } else if constexpr (requires { s.template build<T, W>(); }) {
    return s.template build<T, W>();
  } else {
    static_assert(kAlwaysFalseTrigger<S>,
                  "trigger(t): t must be a built-in trigger (EventTimeTrigger::create(), "
                  "CountTrigger::of(n), ...) or an object of a class derived from "
                  "sluice::Trigger<T, W> with the stream's element and window types");
    return nullptr;
  }
}
}  // namespace internal

template <class T, class W>
class EventTimeTriggerImpl final : public Trigger<T, W> {
 public:
  TriggerResult onElement(const T&, int64_t, const W& window, TriggerContext<W>& ctx) override {
    if (window.maxTimestamp() <= ctx.getCurrentWatermark()) return TriggerResult::FIRE;
    ctx.registerEventTimeTimer(window.maxTimestamp());
    return TriggerResult::CONTINUE;
  }
  TriggerResult onEventTime(int64_t time, const W& window, TriggerContext<W>&) override {
    return time == window.maxTimestamp() ? TriggerResult::FIRE : TriggerResult::CONTINUE;
  }
  TriggerResult onProcessingTime(int64_t, const W&, TriggerContext<W>&) override {
    return TriggerResult::CONTINUE;
  }
  bool canMerge() const override { return true; }
  void onMerge(const W& window, OnMergeContext<W>& ctx) override {
    // Only when the watermark has not passed the merged window's end yet;
    // otherwise the element that caused the merge fires it.
    if (window.maxTimestamp() > ctx.getCurrentWatermark()) {
      ctx.registerEventTimeTimer(window.maxTimestamp());
    }
  }
  void clear(const W& window, TriggerContext<W>& ctx) override {
    ctx.deleteEventTimeTimer(window.maxTimestamp());
  }
  std::string toString() const override { return "EventTimeTrigger()"; }
};

// Fires once the watermark passes the window's end (the default of event-time
// assigners).
struct EventTimeTrigger {
  static EventTimeTrigger create() { return {}; }
  template <class T, class W>
  std::unique_ptr<Trigger<T, W>> build() const {
    return internal::makeOwned<EventTimeTriggerImpl<T, W>>();
  }
};

template <class T, class W>
class ProcessingTimeTriggerImpl final : public Trigger<T, W> {
 public:
  TriggerResult onElement(const T&, int64_t, const W& window, TriggerContext<W>& ctx) override {
    ctx.registerProcessingTimeTimer(window.maxTimestamp());
    return TriggerResult::CONTINUE;
  }
  TriggerResult onEventTime(int64_t, const W&, TriggerContext<W>&) override {
    return TriggerResult::CONTINUE;
  }
  TriggerResult onProcessingTime(int64_t, const W&, TriggerContext<W>&) override {
    return TriggerResult::FIRE;
  }
  bool canMerge() const override { return true; }
  void onMerge(const W& window, OnMergeContext<W>& ctx) override {
    if (window.maxTimestamp() > ctx.getCurrentProcessingTime()) {
      ctx.registerProcessingTimeTimer(window.maxTimestamp());
    }
  }
  void clear(const W& window, TriggerContext<W>& ctx) override {
    ctx.deleteProcessingTimeTimer(window.maxTimestamp());
  }
  std::string toString() const override { return "ProcessingTimeTrigger()"; }
};

// Fires when processing time passes the window's end.
struct ProcessingTimeTrigger {
  static ProcessingTimeTrigger create() { return {}; }
  template <class T, class W>
  std::unique_ptr<Trigger<T, W>> build() const {
    return internal::makeOwned<ProcessingTimeTriggerImpl<T, W>>();
  }
};

namespace internal {
inline int64_t sumLongs(const int64_t& a, const int64_t& b) { return a + b; }
inline int64_t minLongs(const int64_t& a, const int64_t& b) { return std::min(a, b); }
}  // namespace internal

template <class T, class W>
class CountTriggerImpl final : public Trigger<T, W> {
 public:
  explicit CountTriggerImpl(int64_t maxCount) : maxCount_(maxCount) {}
  TriggerResult onElement(const T&, int64_t, const W&, TriggerContext<W>& ctx) override {
    ReducingState<int64_t>& count = ctx.getPartitionedState(desc_);
    count.add(1);
    if (count.get().value_or(0) >= maxCount_) {
      count.clear();
      return TriggerResult::FIRE;
    }
    return TriggerResult::CONTINUE;
  }
  TriggerResult onEventTime(int64_t, const W&, TriggerContext<W>&) override {
    return TriggerResult::CONTINUE;
  }
  TriggerResult onProcessingTime(int64_t, const W&, TriggerContext<W>&) override {
    return TriggerResult::CONTINUE;
  }
  bool canMerge() const override { return true; }
  void onMerge(const W&, OnMergeContext<W>& ctx) override { ctx.mergePartitionedState(desc_); }
  void clear(const W&, TriggerContext<W>& ctx) override { ctx.getPartitionedState(desc_).clear(); }
  std::string toString() const override {
    return "CountTrigger(" + std::to_string(maxCount_) + ")";
  }

 private:
  int64_t maxCount_;
  ReducingStateDescriptor<int64_t> desc_{"count", &internal::sumLongs};
};

// Fires on every maxCount-th element of a window.
struct CountTrigger {
  static CountTrigger of(int64_t maxCount) {
    if (maxCount < 1) {
      throw SluiceException("CountTrigger::of: the count must be at least 1, got " +
                            std::to_string(maxCount));
    }
    return CountTrigger{maxCount};
  }
  template <class T, class W>
  std::unique_ptr<Trigger<T, W>> build() const {
    return internal::makeOwned<CountTriggerImpl<T, W>>(maxCount);
  }
  int64_t maxCount = 1;
};

template <class T, class W>
class PurgingTriggerImpl final : public Trigger<T, W> {
 public:
  explicit PurgingTriggerImpl(std::unique_ptr<Trigger<T, W>> nested) : nested_(std::move(nested)) {}
  TriggerResult onElement(const T& e, int64_t ts, const W& w, TriggerContext<W>& ctx) override {
    return purge(nested_->onElement(e, ts, w, ctx));
  }
  TriggerResult onEventTime(int64_t time, const W& w, TriggerContext<W>& ctx) override {
    return purge(nested_->onEventTime(time, w, ctx));
  }
  TriggerResult onProcessingTime(int64_t time, const W& w, TriggerContext<W>& ctx) override {
    return purge(nested_->onProcessingTime(time, w, ctx));
  }
  bool canMerge() const override { return nested_->canMerge(); }
  void onMerge(const W& w, OnMergeContext<W>& ctx) override { nested_->onMerge(w, ctx); }
  void clear(const W& w, TriggerContext<W>& ctx) override { nested_->clear(w, ctx); }
  std::string toString() const override { return "PurgingTrigger(" + nested_->toString() + ")"; }

 private:
  static TriggerResult purge(TriggerResult r) {
    return isFire(r) ? TriggerResult::FIRE_AND_PURGE : r;
  }
  std::unique_ptr<Trigger<T, W>> nested_;
};

// Turns every FIRE of the nested trigger into FIRE_AND_PURGE.
template <class S>
struct PurgingTriggerSpec {
  template <class T, class W>
  std::unique_ptr<Trigger<T, W>> build() const {
    return internal::makeOwned<PurgingTriggerImpl<T, W>>(internal::buildTrigger<T, W>(nested));
  }
  S nested;
};
struct PurgingTrigger {
  template <class S>
  static PurgingTriggerSpec<S> of(S nested) {
    return PurgingTriggerSpec<S>{std::move(nested)};
  }
};

template <class T, class W>
class ContinuousEventTimeTriggerImpl final : public Trigger<T, W> {
 public:
  explicit ContinuousEventTimeTriggerImpl(int64_t interval) : interval_(interval) {}
  TriggerResult onElement(const T&, int64_t timestamp, const W& window,
                          TriggerContext<W>& ctx) override {
    if (window.maxTimestamp() <= ctx.getCurrentWatermark()) return TriggerResult::FIRE;
    ctx.registerEventTimeTimer(window.maxTimestamp());
    ReducingState<int64_t>& fireTimestamp = ctx.getPartitionedState(desc_);
    if (!fireTimestamp.get()) {
      registerNext(timestamp - (timestamp % interval_), window, ctx, fireTimestamp);
    }
    return TriggerResult::CONTINUE;
  }
  TriggerResult onEventTime(int64_t time, const W& window, TriggerContext<W>& ctx) override {
    if (time == window.maxTimestamp()) return TriggerResult::FIRE;
    ReducingState<int64_t>& fireTimestamp = ctx.getPartitionedState(desc_);
    std::optional<int64_t> next = fireTimestamp.get();
    if (next && *next == time) {
      fireTimestamp.clear();
      registerNext(time, window, ctx, fireTimestamp);
      return TriggerResult::FIRE;
    }
    return TriggerResult::CONTINUE;
  }
  TriggerResult onProcessingTime(int64_t, const W&, TriggerContext<W>&) override {
    return TriggerResult::CONTINUE;
  }
  bool canMerge() const override { return true; }
  void onMerge(const W&, OnMergeContext<W>& ctx) override {
    ctx.mergePartitionedState(desc_);
    std::optional<int64_t> next = ctx.getPartitionedState(desc_).get();
    if (next) ctx.registerEventTimeTimer(*next);
  }
  void clear(const W&, TriggerContext<W>& ctx) override {
    ReducingState<int64_t>& fireTimestamp = ctx.getPartitionedState(desc_);
    if (std::optional<int64_t> ts = fireTimestamp.get()) {
      ctx.deleteEventTimeTimer(*ts);
      fireTimestamp.clear();
    }
  }
  std::string toString() const override {
    return "ContinuousEventTimeTrigger(" + std::to_string(interval_) + ")";
  }

 private:
  void registerNext(int64_t time, const W& window, TriggerContext<W>& ctx,
                    ReducingState<int64_t>& state) {
    int64_t next = std::min(internal::saturatingAdd(time, interval_), window.maxTimestamp());
    state.add(next);
    ctx.registerEventTimeTimer(next);
  }
  int64_t interval_;
  ReducingStateDescriptor<int64_t> desc_{"fire-time", &internal::minLongs};
};

// Fires every `interval` of event time, and at the window's end.
struct ContinuousEventTimeTrigger {
  template <class Rep, class Period>
  static ContinuousEventTimeTrigger of(std::chrono::duration<Rep, Period> interval) {
    int64_t ms = internal::toMillis(interval);
    if (ms <= 0) {
      throw SluiceException("ContinuousEventTimeTrigger::of: the interval must be positive, got " +
                            std::to_string(ms) + " ms");
    }
    return ContinuousEventTimeTrigger{ms};
  }
  template <class T, class W>
  std::unique_ptr<Trigger<T, W>> build() const {
    return internal::makeOwned<ContinuousEventTimeTriggerImpl<T, W>>(intervalMs);
  }
  int64_t intervalMs = 1;
};

template <class T, class W>
class ContinuousProcessingTimeTriggerImpl final : public Trigger<T, W> {
 public:
  explicit ContinuousProcessingTimeTriggerImpl(int64_t interval) : interval_(interval) {}
  TriggerResult onElement(const T&, int64_t, const W& window, TriggerContext<W>& ctx) override {
    ReducingState<int64_t>& fireTimestamp = ctx.getPartitionedState(desc_);
    int64_t now = ctx.getCurrentProcessingTime();
    if (!fireTimestamp.get()) registerNext(now - (now % interval_), window, ctx, fireTimestamp);
    return TriggerResult::CONTINUE;
  }
  TriggerResult onEventTime(int64_t, const W&, TriggerContext<W>&) override {
    return TriggerResult::CONTINUE;
  }
  TriggerResult onProcessingTime(int64_t time, const W& window, TriggerContext<W>& ctx) override {
    ReducingState<int64_t>& fireTimestamp = ctx.getPartitionedState(desc_);
    std::optional<int64_t> next = fireTimestamp.get();
    if (next && *next == time) {
      fireTimestamp.clear();
      registerNext(time, window, ctx, fireTimestamp);
      return TriggerResult::FIRE;
    }
    return TriggerResult::CONTINUE;
  }
  bool canMerge() const override { return true; }
  void onMerge(const W&, OnMergeContext<W>& ctx) override {
    ctx.mergePartitionedState(desc_);
    std::optional<int64_t> next = ctx.getPartitionedState(desc_).get();
    if (next) ctx.registerProcessingTimeTimer(*next);
  }
  void clear(const W&, TriggerContext<W>& ctx) override {
    ReducingState<int64_t>& fireTimestamp = ctx.getPartitionedState(desc_);
    if (std::optional<int64_t> ts = fireTimestamp.get()) {
      ctx.deleteProcessingTimeTimer(*ts);
      fireTimestamp.clear();
    }
  }
  std::string toString() const override {
    return "ContinuousProcessingTimeTrigger(" + std::to_string(interval_) + ")";
  }

 private:
  void registerNext(int64_t time, const W& window, TriggerContext<W>& ctx,
                    ReducingState<int64_t>& state) {
    int64_t next = std::min(internal::saturatingAdd(time, interval_), window.maxTimestamp());
    state.add(next);
    ctx.registerProcessingTimeTimer(next);
  }
  int64_t interval_;
  ReducingStateDescriptor<int64_t> desc_{"fire-time", &internal::minLongs};
};

// Fires every `interval` of processing time (and at the window's end).
struct ContinuousProcessingTimeTrigger {
  template <class Rep, class Period>
  static ContinuousProcessingTimeTrigger of(std::chrono::duration<Rep, Period> interval) {
    int64_t ms = internal::toMillis(interval);
    if (ms <= 0) {
      throw SluiceException(
          "ContinuousProcessingTimeTrigger::of: the interval must be positive, got " +
          std::to_string(ms) + " ms");
    }
    return ContinuousProcessingTimeTrigger{ms};
  }
  template <class T, class W>
  std::unique_ptr<Trigger<T, W>> build() const {
    return internal::makeOwned<ContinuousProcessingTimeTriggerImpl<T, W>>(intervalMs);
  }
  int64_t intervalMs = 1;
};

// Never fires (the default of GlobalWindows; set a trigger of your own).
template <class T, class W>
class NeverTriggerImpl final : public Trigger<T, W> {
 public:
  TriggerResult onElement(const T&, int64_t, const W&, TriggerContext<W>&) override {
    return TriggerResult::CONTINUE;
  }
  TriggerResult onEventTime(int64_t, const W&, TriggerContext<W>&) override {
    return TriggerResult::CONTINUE;
  }
  TriggerResult onProcessingTime(int64_t, const W&, TriggerContext<W>&) override {
    return TriggerResult::CONTINUE;
  }
  bool canMerge() const override { return true; }
  void onMerge(const W&, OnMergeContext<W>&) override {}
  void clear(const W&, TriggerContext<W>&) override {}
  std::string toString() const override { return "NeverTrigger()"; }
};

// ---------------------------------------------------------------------------
// Assigners

class WindowAssignerContext {
 public:
  virtual ~WindowAssignerContext() = default;
  virtual int64_t getCurrentProcessingTime() const = 0;
};

// Puts an element into zero or more windows. Implement for custom windows;
// the built-in assigners below are descriptions that build one.
template <class T, class W>
class WindowAssigner {
 public:
  using ElementType = T;
  using WindowType = W;
  virtual ~WindowAssigner() = default;
  // Appends the element's windows to `out` (which arrives empty).
  virtual void assignWindows(const T& element, int64_t timestamp,
                             const WindowAssignerContext& context, std::vector<W>& out) = 0;
  virtual std::unique_ptr<Trigger<T, W>> getDefaultTrigger() const = 0;
  virtual bool isEventTime() const = 0;
  virtual std::string toString() const { return "WindowAssigner"; }
};

// An assigner whose windows can merge (sessions).
template <class T, class W>
class MergingWindowAssigner : public WindowAssigner<T, W> {
 public:
  class MergeCallback {
   public:
    virtual ~MergeCallback() = default;
    virtual void merge(const std::vector<W>& toBeMerged, const W& mergeResult) = 0;
  };
  // Calls callback.merge for every group of `windows` that becomes one.
  virtual void mergeWindows(const std::vector<W>& windows, MergeCallback& callback) = 0;
};

namespace internal {

[[noreturn]] inline void throwNoTimestamp(const std::string& assigner) {
  throw SluiceException(
      "record has no timestamp, but " + assigner +
      " assigns windows by event time. Did you forget to call "
      "assignTimestampsAndWatermarks(...) or to pass a WatermarkStrategy to fromSource?");
}

inline int64_t checkPositive(int64_t ms, const char* what) {
  if (ms <= 0) {
    throw SluiceException(std::string(what) + " must be positive, got " + std::to_string(ms) +
                          " ms");
  }
  return ms;
}

// Flink's TimeWindow.mergeWindows: sort by start, merge runs that intersect.
// Runs per element of a session window; allocates nothing once its scratch
// vectors (per thread) have grown.
template <class CB>
void mergeTimeWindows(const std::vector<TimeWindow>& windows, CB& callback) {
  thread_local std::vector<TimeWindow> sorted;
  thread_local std::vector<TimeWindow> members;
  sorted.assign(windows.begin(), windows.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const TimeWindow& a, const TimeWindow& b) { return a.getStart() < b.getStart(); });
  for (size_t i = 0; i < sorted.size();) {
    TimeWindow cover = sorted[i];
    size_t j = i + 1;
    while (j < sorted.size() && cover.intersects(sorted[j])) cover = cover.cover(sorted[j++]);
    if (j - i > 1) {
      members.assign(sorted.begin() + static_cast<std::ptrdiff_t>(i),
                     sorted.begin() + static_cast<std::ptrdiff_t>(j));
      callback.merge(members, cover);
    }
    i = j;
  }
}

template <class T>
class TumblingAssigner final : public WindowAssigner<T, TimeWindow> {
 public:
  TumblingAssigner(int64_t size, int64_t offset, bool eventTime)
      : size_(size), offset_(offset), eventTime_(eventTime) {}
  void assignWindows(const T&, int64_t timestamp, const WindowAssignerContext& ctx,
                     std::vector<TimeWindow>& out) override {
    if (eventTime_) {
      if (timestamp == kMinTimestamp) throwNoTimestamp(toString());
    } else {
      timestamp = ctx.getCurrentProcessingTime();
    }
    const __int128 start = TimeWindow::unclampedWindowStart(timestamp, offset_, size_);
    out.emplace_back(TimeWindow::clampToTimestamp(start),
                     TimeWindow::clampToTimestamp(start + size_));
  }
  std::unique_ptr<Trigger<T, TimeWindow>> getDefaultTrigger() const override {
    if (eventTime_) return internal::makeOwned<EventTimeTriggerImpl<T, TimeWindow>>();
    return internal::makeOwned<ProcessingTimeTriggerImpl<T, TimeWindow>>();
  }
  bool isEventTime() const override { return eventTime_; }
  std::string toString() const override {
    return std::string(eventTime_ ? "TumblingEventTimeWindows("
                                  : "TumblingProcessingTimeWindows(") +
           std::to_string(size_) + ")";
  }

 private:
  int64_t size_, offset_;
  bool eventTime_;
};

template <class T>
class SlidingAssigner final : public WindowAssigner<T, TimeWindow> {
 public:
  SlidingAssigner(int64_t size, int64_t slide, int64_t offset, bool eventTime)
      : size_(size), slide_(slide), offset_(offset), eventTime_(eventTime) {}
  void assignWindows(const T&, int64_t timestamp, const WindowAssignerContext& ctx,
                     std::vector<TimeWindow>& out) override {
    if (eventTime_) {
      if (timestamp == kMinTimestamp) throwNoTimestamp(toString());
    } else {
      timestamp = ctx.getCurrentProcessingTime();
    }
    // Windows that start below the minimum timestamp start at it, with their
    // true ends (each is still a distinct window).
    const __int128 lastStart = TimeWindow::unclampedWindowStart(timestamp, offset_, slide_);
    for (__int128 start = lastStart; start > static_cast<__int128>(timestamp) - size_;
         start -= slide_) {
      out.emplace_back(TimeWindow::clampToTimestamp(start),
                       TimeWindow::clampToTimestamp(start + size_));
    }
  }
  std::unique_ptr<Trigger<T, TimeWindow>> getDefaultTrigger() const override {
    if (eventTime_) return internal::makeOwned<EventTimeTriggerImpl<T, TimeWindow>>();
    return internal::makeOwned<ProcessingTimeTriggerImpl<T, TimeWindow>>();
  }
  bool isEventTime() const override { return eventTime_; }
  std::string toString() const override {
    return std::string(eventTime_ ? "SlidingEventTimeWindows(" : "SlidingProcessingTimeWindows(") +
           std::to_string(size_) + ", " + std::to_string(slide_) + ")";
  }

 private:
  int64_t size_, slide_, offset_;
  bool eventTime_;
};

// Cumulating windows: every window [start, start + k * step), k = 1 ..
// maxSize / step, with start aligned to maxSize (and offset), that contains
// the element, largest first. Windows whose ends saturate at the maximum
// timestamp coincide; each is assigned once.
template <class T>
class CumulativeAssigner final : public WindowAssigner<T, TimeWindow> {
 public:
  CumulativeAssigner(int64_t maxSize, int64_t step, int64_t offset)
      : maxSize_(maxSize), step_(step), offset_(offset) {}
  void assignWindows(const T&, int64_t timestamp, const WindowAssignerContext&,
                     std::vector<TimeWindow>& out) override {
    if (timestamp == kMinTimestamp) throwNoTimestamp(toString());
    const __int128 start = TimeWindow::unclampedWindowStart(timestamp, offset_, maxSize_);
    const int64_t clampedStart = TimeWindow::clampToTimestamp(start);
    for (__int128 end = start + maxSize_; end > timestamp; end -= step_) {
      const int64_t clampedEnd = TimeWindow::clampToTimestamp(end);
      if (!out.empty() && out.back().getEnd() == clampedEnd) continue;
      out.emplace_back(clampedStart, clampedEnd);
    }
  }
  std::unique_ptr<Trigger<T, TimeWindow>> getDefaultTrigger() const override {
    return internal::makeOwned<EventTimeTriggerImpl<T, TimeWindow>>();
  }
  bool isEventTime() const override { return true; }
  std::string toString() const override {
    return "CumulativeEventTimeWindows(" + std::to_string(maxSize_) + ", " + std::to_string(step_) +
           ")";
  }

 private:
  int64_t maxSize_, step_, offset_;
};

// Session windows; `gap` returns the gap for an element (constant or dynamic).
template <class T>
class SessionAssigner final : public MergingWindowAssigner<T, TimeWindow> {
 public:
  SessionAssigner(std::function<int64_t(const T&)> gap, bool eventTime)
      : gap_(std::move(gap)), eventTime_(eventTime) {}
  void assignWindows(const T& element, int64_t timestamp, const WindowAssignerContext& ctx,
                     std::vector<TimeWindow>& out) override {
    if (eventTime_) {
      if (timestamp == kMinTimestamp) throwNoTimestamp(toString());
    } else {
      timestamp = ctx.getCurrentProcessingTime();
    }
    int64_t gap = gap_(element);
    if (gap <= 0) {
      throw SluiceException("Dynamic session time gap must satisfy 0 < gap, got " +
                            std::to_string(gap) + " ms");
    }
    out.emplace_back(timestamp, saturatingAdd(timestamp, gap));
  }
  void mergeWindows(const std::vector<TimeWindow>& windows,
                    typename MergingWindowAssigner<T, TimeWindow>::MergeCallback& cb) override {
    mergeTimeWindows(windows, cb);
  }
  std::unique_ptr<Trigger<T, TimeWindow>> getDefaultTrigger() const override {
    if (eventTime_) return internal::makeOwned<EventTimeTriggerImpl<T, TimeWindow>>();
    return internal::makeOwned<ProcessingTimeTriggerImpl<T, TimeWindow>>();
  }
  bool isEventTime() const override { return eventTime_; }
  std::string toString() const override {
    return eventTime_ ? "EventTimeSessionWindows" : "ProcessingTimeSessionWindows";
  }

 private:
  std::function<int64_t(const T&)> gap_;
  bool eventTime_;
};

template <class T>
class GlobalAssigner final : public WindowAssigner<T, GlobalWindow> {
 public:
  void assignWindows(const T&, int64_t, const WindowAssignerContext&,
                     std::vector<GlobalWindow>& out) override {
    out.emplace_back();
  }
  std::unique_ptr<Trigger<T, GlobalWindow>> getDefaultTrigger() const override {
    return internal::makeOwned<NeverTriggerImpl<T, GlobalWindow>>();
  }
  bool isEventTime() const override { return false; }
  std::string toString() const override { return "GlobalWindows()"; }
};

}  // namespace internal

// Built-in assigner descriptions. Sizes, slides, offsets and gaps are
// std::chrono durations (milliseconds precision).
struct TumblingEventTimeWindows {
  using WindowType = TimeWindow;
  template <class R1, class P1, class R2 = int64_t, class P2 = std::milli>
  static TumblingEventTimeWindows of(std::chrono::duration<R1, P1> size,
                                     std::chrono::duration<R2, P2> offset = {}) {
    return make(internal::toMillis(size), internal::toMillis(offset), "TumblingEventTimeWindows");
  }
  template <class T>
  std::unique_ptr<WindowAssigner<T, TimeWindow>> create() const {
    return internal::makeOwned<internal::TumblingAssigner<T>>(size, offset, true);
  }
  int64_t size = 1, offset = 0;

 protected:
  static TumblingEventTimeWindows make(int64_t size, int64_t offset, const char* who) {
    internal::checkPositive(size, (std::string(who) + ": the size").c_str());
    if (std::abs(offset) >= size) {
      throw SluiceException(
          std::string(who) + ": the offset must satisfy abs(offset) < size, got offset " +
          std::to_string(offset) + " ms and size " + std::to_string(size) + " ms");
    }
    return TumblingEventTimeWindows{size, offset};
  }
};

struct TumblingProcessingTimeWindows {
  using WindowType = TimeWindow;
  template <class R1, class P1, class R2 = int64_t, class P2 = std::milli>
  static TumblingProcessingTimeWindows of(std::chrono::duration<R1, P1> size,
                                          std::chrono::duration<R2, P2> offset = {}) {
    auto t = TumblingEventTimeWindows::of(size, offset);
    return TumblingProcessingTimeWindows{t.size, t.offset};
  }
  template <class T>
  std::unique_ptr<WindowAssigner<T, TimeWindow>> create() const {
    return internal::makeOwned<internal::TumblingAssigner<T>>(size, offset, false);
  }
  int64_t size = 1, offset = 0;
};

namespace internal {
inline void checkSliding(int64_t size, int64_t slide, int64_t offset, const char* who) {
  checkPositive(size, (std::string(who) + ": the size").c_str());
  checkPositive(slide, (std::string(who) + ": the slide").c_str());
  if (std::abs(offset) >= slide) {
    throw SluiceException(
        std::string(who) + ": the offset must satisfy abs(offset) < slide, got offset " +
        std::to_string(offset) + " ms and slide " + std::to_string(slide) + " ms");
  }
}
}  // namespace internal

struct SlidingEventTimeWindows {
  using WindowType = TimeWindow;
  template <class R1, class P1, class R2, class P2, class R3 = int64_t, class P3 = std::milli>
  static SlidingEventTimeWindows of(std::chrono::duration<R1, P1> size,
                                    std::chrono::duration<R2, P2> slide,
                                    std::chrono::duration<R3, P3> offset = {}) {
    SlidingEventTimeWindows w{internal::toMillis(size), internal::toMillis(slide),
                              internal::toMillis(offset)};
    internal::checkSliding(w.size, w.slide, w.offset, "SlidingEventTimeWindows");
    return w;
  }
  template <class T>
  std::unique_ptr<WindowAssigner<T, TimeWindow>> create() const {
    return internal::makeOwned<internal::SlidingAssigner<T>>(size, slide, offset, true);
  }
  int64_t size = 1, slide = 1, offset = 0;
};

struct SlidingProcessingTimeWindows {
  using WindowType = TimeWindow;
  template <class R1, class P1, class R2, class P2, class R3 = int64_t, class P3 = std::milli>
  static SlidingProcessingTimeWindows of(std::chrono::duration<R1, P1> size,
                                         std::chrono::duration<R2, P2> slide,
                                         std::chrono::duration<R3, P3> offset = {}) {
    SlidingProcessingTimeWindows w{internal::toMillis(size), internal::toMillis(slide),
                                   internal::toMillis(offset)};
    internal::checkSliding(w.size, w.slide, w.offset, "SlidingProcessingTimeWindows");
    return w;
  }
  template <class T>
  std::unique_ptr<WindowAssigner<T, TimeWindow>> create() const {
    return internal::makeOwned<internal::SlidingAssigner<T>>(size, slide, offset, false);
  }
  int64_t size = 1, slide = 1, offset = 0;
};

// Cumulating event-time windows, a Sluice extension mirroring Flink SQL's
// CUMULATE table-valued function (Flink's DataStream API has no such
// assigner): windows grow by `step` from a start aligned to `maxSize` until
// they reach `maxSize`, then a new cycle starts. With maxSize 1 day and step
// 1 hour an element at 10:30 is in [00:00, 11:00), [00:00, 12:00), ...,
// [00:00, 24:00): each window fires when the watermark passes its end, so a
// day's running total is emitted every hour. maxSize must be a multiple of
// step; abs(offset) < maxSize.
struct CumulativeEventTimeWindows {
  using WindowType = TimeWindow;
  template <class R1, class P1, class R2, class P2, class R3 = int64_t, class P3 = std::milli>
  static CumulativeEventTimeWindows of(std::chrono::duration<R1, P1> maxSize,
                                       std::chrono::duration<R2, P2> step,
                                       std::chrono::duration<R3, P3> offset = {}) {
    CumulativeEventTimeWindows w{internal::toMillis(maxSize), internal::toMillis(step),
                                 internal::toMillis(offset)};
    const char* who = "CumulativeEventTimeWindows";
    internal::checkPositive(w.maxSize, "CumulativeEventTimeWindows: the max size");
    internal::checkPositive(w.step, "CumulativeEventTimeWindows: the step");
    if (w.maxSize % w.step != 0) {
      throw SluiceException(
          std::string(who) + ": the max size must be a multiple of the step, got " +
          std::to_string(w.maxSize) + " ms and step " + std::to_string(w.step) + " ms");
    }
    if (std::abs(w.offset) >= w.maxSize) {
      throw SluiceException(
          std::string(who) + ": the offset must satisfy abs(offset) < maxSize, got offset " +
          std::to_string(w.offset) + " ms and max size " + std::to_string(w.maxSize) + " ms");
    }
    return w;
  }
  template <class T>
  std::unique_ptr<WindowAssigner<T, TimeWindow>> create() const {
    return internal::makeOwned<internal::CumulativeAssigner<T>>(maxSize, step, offset);
  }
  int64_t maxSize = 1, step = 1, offset = 0;
};

// withDynamicGap(extractor): extractor is int64_t(const T&) (milliseconds).
template <class F, bool kEventTime>
struct DynamicSessionWindows {
  using WindowType = TimeWindow;
  template <class T>
  std::unique_ptr<WindowAssigner<T, TimeWindow>> create() const {
    static_assert(std::is_invocable_r_v<int64_t, const F&, const T&>,
                  "withDynamicGap(f): f must be int64_t(const T& element), the gap in ms");
    F f = extractor;
    return internal::makeOwned<internal::SessionAssigner<T>>(
        [f](const T& e) -> int64_t { return f(e); }, kEventTime);
  }
  F extractor;
};

struct EventTimeSessionWindows {
  using WindowType = TimeWindow;
  template <class R, class P>
  static EventTimeSessionWindows withGap(std::chrono::duration<R, P> gap) {
    return EventTimeSessionWindows{
        internal::checkPositive(internal::toMillis(gap), "EventTimeSessionWindows: the gap")};
  }
  template <class F>
  static DynamicSessionWindows<F, true> withDynamicGap(F extractor) {
    return DynamicSessionWindows<F, true>{std::move(extractor)};
  }
  template <class T>
  std::unique_ptr<WindowAssigner<T, TimeWindow>> create() const {
    int64_t g = gap;
    return internal::makeOwned<internal::SessionAssigner<T>>([g](const T&) { return g; }, true);
  }
  int64_t gap = 1;
};

struct ProcessingTimeSessionWindows {
  using WindowType = TimeWindow;
  template <class R, class P>
  static ProcessingTimeSessionWindows withGap(std::chrono::duration<R, P> gap) {
    return ProcessingTimeSessionWindows{
        internal::checkPositive(internal::toMillis(gap), "ProcessingTimeSessionWindows: the gap")};
  }
  template <class F>
  static DynamicSessionWindows<F, false> withDynamicGap(F extractor) {
    return DynamicSessionWindows<F, false>{std::move(extractor)};
  }
  template <class T>
  std::unique_ptr<WindowAssigner<T, TimeWindow>> create() const {
    int64_t g = gap;
    return internal::makeOwned<internal::SessionAssigner<T>>([g](const T&) { return g; }, false);
  }
  int64_t gap = 1;
};

// One window for all elements of a key; needs a trigger (count windows).
struct GlobalWindows {
  using WindowType = GlobalWindow;
  static GlobalWindows create() { return {}; }
  template <class T>
  std::unique_ptr<WindowAssigner<T, GlobalWindow>> create() const {
    return internal::makeOwned<internal::GlobalAssigner<T>>();
  }
};

namespace internal {
// The assigner of type W for elements T, from a built-in description or a
// user assigner object.
template <class T, class A>
auto buildAssigner(const A& a) {
  if constexpr (requires { a.template create<T>(); }) {
    return a.template create<T>();
  } else {
    static_assert(std::is_base_of_v<WindowAssigner<T, typename A::WindowType>, A>,
                  "window(assigner): pass a built-in assigner (TumblingEventTimeWindows::of(...), "
                  "...) or an object of a class derived from sluice::WindowAssigner<T, W>");
    return std::unique_ptr<WindowAssigner<T, typename A::WindowType>>(std::make_unique<A>(a));
  }
}
}  // namespace internal

// ---------------------------------------------------------------------------
// Evictors

template <class W>
class EvictorContext {
 public:
  virtual ~EvictorContext() = default;
  virtual int64_t getCurrentProcessingTime() const = 0;
  virtual int64_t getCurrentWatermark() const = 0;
};

// Removes elements from a window's contents before and/or after the window
// function runs. Erase from `elements` to evict.
template <class T, class W>
class Evictor {
 public:
  virtual ~Evictor() = default;
  virtual void evictBefore(std::vector<TimestampedValue<T>>& elements, int size, const W& window,
                           EvictorContext<W>& ctx) = 0;
  virtual void evictAfter(std::vector<TimestampedValue<T>>& elements, int size, const W& window,
                          EvictorContext<W>& ctx) = 0;
};

template <class T, class W>
class CountEvictorImpl final : public Evictor<T, W> {
 public:
  CountEvictorImpl(int64_t maxCount, bool after) : maxCount_(maxCount), after_(after) {}
  void evictBefore(std::vector<TimestampedValue<T>>& e, int size, const W&,
                   EvictorContext<W>&) override {
    if (!after_) evict(e, size);
  }
  void evictAfter(std::vector<TimestampedValue<T>>& e, int size, const W&,
                  EvictorContext<W>&) override {
    if (after_) evict(e, size);
  }

 private:
  // Keeps the last maxCount elements.
  void evict(std::vector<TimestampedValue<T>>& e, int size) {
    if (size <= maxCount_) return;
    e.erase(e.begin(), e.begin() + static_cast<std::ptrdiff_t>(size - maxCount_));
  }
  int64_t maxCount_;
  bool after_;
};

struct CountEvictor {
  // Keeps at most maxCount elements (the latest); evicts before the window
  // function unless doEvictAfter.
  static CountEvictor of(int64_t maxCount, bool doEvictAfter = false) {
    if (maxCount < 0) {
      throw SluiceException("CountEvictor::of: the count must not be negative, got " +
                            std::to_string(maxCount));
    }
    return CountEvictor{maxCount, doEvictAfter};
  }
  template <class T, class W>
  std::unique_ptr<Evictor<T, W>> build() const {
    return internal::makeOwned<CountEvictorImpl<T, W>>(maxCount, doEvictAfter);
  }
  int64_t maxCount = 0;
  bool doEvictAfter = false;
};

template <class T, class W>
class TimeEvictorImpl final : public Evictor<T, W> {
 public:
  TimeEvictorImpl(int64_t windowSize, bool after) : windowSize_(windowSize), after_(after) {}
  void evictBefore(std::vector<TimestampedValue<T>>& e, int, const W&,
                   EvictorContext<W>&) override {
    if (!after_) evict(e);
  }
  void evictAfter(std::vector<TimestampedValue<T>>& e, int, const W&, EvictorContext<W>&) override {
    if (after_) evict(e);
  }

 private:
  // Keeps the elements newer than (newest timestamp - windowSize).
  void evict(std::vector<TimestampedValue<T>>& e) {
    if (e.empty() || !e.front().hasTimestamp()) return;
    int64_t newest = kMinTimestamp;
    for (const auto& v : e) newest = std::max(newest, v.getTimestamp());
    const int64_t cutoff = internal::saturatingSub(newest, windowSize_);
    std::erase_if(e, [cutoff](const TimestampedValue<T>& v) { return v.getTimestamp() <= cutoff; });
  }
  int64_t windowSize_;
  bool after_;
};

struct TimeEvictor {
  template <class R, class P>
  static TimeEvictor of(std::chrono::duration<R, P> windowSize, bool doEvictAfter = false) {
    return TimeEvictor{internal::toMillis(windowSize), doEvictAfter};
  }
  template <class T, class W>
  std::unique_ptr<Evictor<T, W>> build() const {
    return internal::makeOwned<TimeEvictorImpl<T, W>>(windowSizeMs, doEvictAfter);
  }
  int64_t windowSizeMs = 0;
  bool doEvictAfter = false;
};

template <class T, class W>
class DeltaEvictorImpl final : public Evictor<T, W> {
 public:
  DeltaEvictorImpl(double threshold, std::function<double(const T&, const T&)> delta, bool after)
      : threshold_(threshold), delta_(std::move(delta)), after_(after) {}
  void evictBefore(std::vector<TimestampedValue<T>>& e, int, const W&,
                   EvictorContext<W>&) override {
    if (!after_) evict(e);
  }
  void evictAfter(std::vector<TimestampedValue<T>>& e, int, const W&, EvictorContext<W>&) override {
    if (after_) evict(e);
  }

 private:
  // Evicts the elements whose delta to the last element is >= threshold.
  void evict(std::vector<TimestampedValue<T>>& e) {
    if (e.empty()) return;
    const T last = e.back().getValue();
    std::erase_if(
        e, [&](const TimestampedValue<T>& v) { return delta_(v.getValue(), last) >= threshold_; });
  }
  double threshold_;
  std::function<double(const T&, const T&)> delta_;
  bool after_;
};

template <class F>
struct DeltaEvictorSpec {
  template <class T, class W>
  std::unique_ptr<Evictor<T, W>> build() const {
    static_assert(std::is_invocable_r_v<double, const F&, const T&, const T&>,
                  "DeltaEvictor::of(threshold, f): f must be double(const T& a, const T& b)");
    F f = delta;
    return internal::makeOwned<DeltaEvictorImpl<T, W>>(
        threshold, [f](const T& a, const T& b) { return static_cast<double>(f(a, b)); },
        doEvictAfter);
  }
  double threshold = 0;
  F delta;
  bool doEvictAfter = false;
};

struct DeltaEvictor {
  template <class F>
  static DeltaEvictorSpec<F> of(double threshold, F deltaFunction, bool doEvictAfter = false) {
    return DeltaEvictorSpec<F>{threshold, std::move(deltaFunction), doEvictAfter};
  }
};

namespace internal {
template <class T, class W, class S>
std::unique_ptr<Evictor<T, W>> buildEvictor(const S& s) {
  if constexpr (std::is_base_of_v<Evictor<T, W>, S>) {
    return internal::makeOwned<S>(s);
  } else if constexpr (requires { s.template build<T, W>(); }) {
    return s.template build<T, W>();
  } else {
    static_assert(kAlwaysFalseTrigger<S>,
                  "evictor(e): e must be CountEvictor::of, TimeEvictor::of, DeltaEvictor::of or "
                  "an object of a class derived from sluice::Evictor<T, W>");
    return nullptr;
  }
}
}  // namespace internal

// ---------------------------------------------------------------------------
// Window functions

// Keyed state scoped to one window (ProcessWindowFunction::Context::windowState)
// or to the key alone (globalState).
template <class N>
class ScopedStateStore {
 public:
  ScopedStateStore() = default;
  ScopedStateStore(KeyedStateBackend* backend, const N* ns) : backend_(backend), ns_(ns) {}
  template <class V>
  ValueState<V>& getState(const ValueStateDescriptor<V>& d) {
    return scoped(getOrCreateValueState<N>(*backend_, d));
  }
  template <class V>
  ListState<V>& getListState(const ListStateDescriptor<V>& d) {
    return scoped(getOrCreateListState<N>(*backend_, d));
  }
  template <class UK, class UV>
  MapState<UK, UV>& getMapState(const MapStateDescriptor<UK, UV>& d) {
    return scoped(getOrCreateMapState<N>(*backend_, d));
  }
  template <class V>
  ReducingState<V>& getReducingState(const ReducingStateDescriptor<V>& d) {
    return scoped(getOrCreateReducingState<N>(*backend_, d));
  }
  template <class IN, class ACC, class OUT>
  AggregatingState<IN, OUT>& getAggregatingState(
      const AggregatingStateDescriptor<IN, ACC, OUT>& d) {
    return scoped(getOrCreateAggregatingState<N>(*backend_, d));
  }

 private:
  template <class S>
  S& scoped(S& s) {
    s.setCurrentNamespace(*ns_);
    return s;
  }
  KeyedStateBackend* backend_ = nullptr;
  const N* ns_ = nullptr;
};

// Processes a window's contents with its metadata. With reduce/aggregate,
// `elements` holds the one pre-aggregated value.
template <class IN, class OUT, class KEY, class W>
class ProcessWindowFunction : public RichFunction {
 public:
  using InputType = IN;
  using OutputType = OUT;
  using KeyType = KEY;
  using WindowType = W;
  class Context {
   public:
    virtual ~Context() = default;
    virtual const W& window() const = 0;
    virtual int64_t currentProcessingTime() const = 0;
    virtual int64_t currentWatermark() const = 0;
    // State of this key and window; clear it in clear().
    virtual ScopedStateStore<W>& windowState() = 0;
    // State of this key across windows.
    virtual ScopedStateStore<VoidNamespace>& globalState() = 0;
    // Emits to a side output, with the window's maxTimestamp() as timestamp.
    template <class X>
    void output(const OutputTag<X>& tag, const X& value) {
      sideOutputs_->template emit<X>(tag.getId(), value, true, window().maxTimestamp());
    }

   protected:
    internal::SideOutputs* sideOutputs_ = nullptr;
  };
  virtual void process(const KEY& key, Context& context, const std::vector<IN>& elements,
                       Collector<OUT>& out) = 0;
  // Called when the window is purged for good (after lateness): clean up
  // windowState() here.
  virtual void clear(Context& context) { (void)context; }
};

// The older form: key, window, contents, collector.
template <class IN, class OUT, class KEY, class W>
class WindowFunction : public RichFunction {
 public:
  using InputType = IN;
  using OutputType = OUT;
  using KeyType = KEY;
  using WindowType = W;
  virtual void apply(const KEY& key, const W& window, const std::vector<IN>& input,
                     Collector<OUT>& out) = 0;
};

// Non-keyed (windowAll) variants.
template <class IN, class OUT, class W>
class ProcessAllWindowFunction : public RichFunction {
 public:
  using InputType = IN;
  using OutputType = OUT;
  using WindowType = W;
  using Context = typename ProcessWindowFunction<IN, OUT, uint8_t, W>::Context;
  virtual void process(Context& context, const std::vector<IN>& elements, Collector<OUT>& out) = 0;
  virtual void clear(Context& context) { (void)context; }
};

template <class IN, class OUT, class W>
class AllWindowFunction : public RichFunction {
 public:
  using InputType = IN;
  using OutputType = OUT;
  using WindowType = W;
  virtual void apply(const W& window, const std::vector<IN>& input, Collector<OUT>& out) = 0;
};

}  // namespace sluice
