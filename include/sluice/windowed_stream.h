// WindowedStream (keyBy(...).window(...)) and AllWindowedStream
// (windowAll(...)): configure trigger, evictor and lateness, then apply a
// window function. See sluice/windows.h for the semantics and docs/windows.md.
//
// Which operator runs the windows is decided when the window function is
// applied: the sliced window operator (internal/slicing_window_operator.h)
// when the assigner makes aligned event-time windows (tumbling, sliding,
// cumulating) or processing-time tumbling or sliding windows, the session window
// operator (internal/session_window_operator.h) when it makes event-time
// sessions with a static gap, in both cases when the function is
// incremental (reduce, aggregate, the field aggregations, with or without a
// window function), there is neither a trigger other than the assigner's
// default (EventTimeTrigger, ProcessingTimeTrigger) nor an evictor, and the
// environment's configuration has `pipeline.window.slicing` on and
// `state.backend.type` hashmap; the general WindowOperator otherwise. The
// general operator and the fast one the assigner's type allows are compiled
// (both fast ones for a WindowedStream whose type leaves the assigner's kind
// out); the stream graph names the one chosen ("SlicingWindow(...)",
// "SessionWindow(...)" or "Window(...)").
#pragma once

#include <cctype>
#include <chrono>
#include <concepts>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include <sluice/core/config_options.h>
#include <sluice/core/owned.h>
#include <sluice/datastream.h>
#include <sluice/internal/session_window_operator.h>
#include <sluice/internal/slicing_window_operator.h>
#include <sluice/internal/window_operator.h>
#include <sluice/window/slicing.h>
#include <sluice/windows.h>

namespace sluice {

namespace internal {

// The key of windowAll: every element has the same one.
template <class T>
struct NullKeySelector {
  uint8_t operator()(const T&) const { return 0; }
};

template <class F, class V, class OUT, class K, class W>
concept ProcessWindowFn = std::derived_from<F, ProcessWindowFunction<V, OUT, K, W>>;
template <class F, class V, class OUT, class K, class W>
concept WindowFn = std::derived_from<F, WindowFunction<V, OUT, K, W>>;
template <class F, class V, class OUT, class W>
concept ProcessAllWindowFn = std::derived_from<F, ProcessAllWindowFunction<V, OUT, W>>;
template <class F, class V, class OUT, class W>
concept AllWindowFn = std::derived_from<F, AllWindowFunction<V, OUT, W>>;

// The window function for values V on a stream keyed by K, as the operator
// runs it.
template <class V, class K, class W, class F>
auto makeWindowFunction(F f) {
  using OUT = typename F::OutputType;
  static_assert(ProcessWindowFn<F, V, OUT, K, W> || WindowFn<F, V, OUT, K, W> ||
                    ProcessAllWindowFn<F, V, OUT, W> || AllWindowFn<F, V, OUT, W>,
                "window function: pass an object of a class derived from "
                "sluice::ProcessWindowFunction<IN, OUT, KEY, W> or WindowFunction<IN, OUT, KEY, "
                "W> (keyed windows), or ProcessAllWindowFunction<IN, OUT, W> or "
                "AllWindowFunction<IN, OUT, W> (windowAll), where IN is what the window "
                "function receives (the element type, or the reduce/aggregate result)");
  return std::shared_ptr<const InternalWindowFunction<V, OUT, K, W>>(
      std::make_shared<UserWindowFunction<V, OUT, K, W, F>>(std::move(f)));
}

template <class V, class K, class W>
auto passThrough() {
  return std::shared_ptr<const InternalWindowFunction<V, V, K, W>>(
      std::make_shared<PassThroughWindowFunction<V, K, W>>());
}

// The aligned windows an assigner description makes, if any.
template <class A>
std::optional<window::AlignedWindows> alignedWindowsOf(const A& a) {
  using window::AlignedKind;
  if constexpr (std::is_same_v<A, TumblingEventTimeWindows>) {
    return window::AlignedWindows{AlignedKind::kTumbling, a.size, a.size, a.offset};
  } else if constexpr (std::is_same_v<A, TumblingProcessingTimeWindows>) {
    return window::AlignedWindows{AlignedKind::kTumbling, a.size, a.size, a.offset, true};
  } else if constexpr (std::is_same_v<A, SlidingEventTimeWindows>) {
    return window::AlignedWindows{AlignedKind::kSliding, a.size, a.slide, a.offset};
  } else if constexpr (std::is_same_v<A, SlidingProcessingTimeWindows>) {
    return window::AlignedWindows{AlignedKind::kSliding, a.size, a.slide, a.offset, true};
  } else if constexpr (std::is_same_v<A, CumulativeEventTimeWindows>) {
    return window::AlignedWindows{AlignedKind::kCumulating, a.maxSize, a.step, a.offset};
  } else {
    (void)a;
    return std::nullopt;
  }
}

// The gap of static event-time sessions, if the assigner makes them.
template <class A>
std::optional<int64_t> sessionGapOf(const A& a) {
  if constexpr (std::is_same_v<A, EventTimeSessionWindows>) {
    return a.gap;
  } else {
    (void)a;
    return std::nullopt;
  }
}

// Which fast window operator an assigner's windows can run on, known from
// the assigner's type, so that a job compiles only the operators its windows
// may use (each is a sizeable template). kAny: any, decided at run time (a
// WindowedStream converted to the type without this argument).
enum class FastWindows { kAny, kNone, kSliced, kSessions };
template <class A>
inline constexpr FastWindows kFastWindowsOf =
    std::is_same_v<A, EventTimeSessionWindows> ? FastWindows::kSessions
    : std::is_same_v<A, TumblingEventTimeWindows> ||
            std::is_same_v<A, TumblingProcessingTimeWindows> ||
            std::is_same_v<A, SlidingEventTimeWindows> ||
            std::is_same_v<A, SlidingProcessingTimeWindows> ||
            std::is_same_v<A, CumulativeEventTimeWindows>
        ? FastWindows::kSliced
        : FastWindows::kNone;

// The types the sliced (and the session) window operator can hold.
template <class K, class W, class ACC>
inline constexpr bool kSliceable = std::is_same_v<W, TimeWindow>&& SliceableKey<K>&&
    std::default_initializable<ACC>&& std::copy_constructible<ACC>&& Serializable<ACC>;

template <class F, class T>
concept WindowReduceFn = ReduceCallable<F, T> || ReduceFunctionObject<F, T> || InPlaceReducer<F, T>;

template <class F>
concept AggregateFn = requires {
  typename F::InputType;
  typename F::AccumulatorType;
  typename F::OutputType;
}
&&std::derived_from<F, AggregateFunction<typename F::InputType, typename F::AccumulatorType,
                                         typename F::OutputType>>;

}  // namespace internal

// kFast: the fast operators these windows may run on (window() sets it from
// the assigner's type); leave it out to name the type of any WindowedStream.
template <class T, class K, class KS, class W,
          internal::FastWindows kFast = internal::FastWindows::kAny>
class WindowedStream {
  static constexpr bool kMaySlice =
      kFast == internal::FastWindows::kAny || kFast == internal::FastWindows::kSliced;
  static constexpr bool kMaySession =
      kFast == internal::FastWindows::kAny || kFast == internal::FastWindows::kSessions;

 public:
  using Spec = internal::WindowSettings<T, W>;

  WindowedStream(KeyedStream<T, K, KS> input, Spec spec, std::string assignerName,
                 bool allWindows = false)
      : input_(std::move(input)),
        spec_(std::move(spec)),
        assignerName_(std::move(assignerName)),
        all_(allWindows) {}
  // Any WindowedStream converts to the one without kFast.
  template <internal::FastWindows kOther>
  requires(kFast == internal::FastWindows::kAny && kOther != internal::FastWindows::kAny)
      WindowedStream(WindowedStream<T, K, KS, W, kOther> other)
      : input_(std::move(other.input_)),
        spec_(std::move(other.spec_)),
        assignerName_(std::move(other.assignerName_)),
        all_(other.all_),
        triggerSet_(other.triggerSet_),
        eventTimeTrigger_(other.eventTimeTrigger_),
        processingTimeTrigger_(other.processingTimeTrigger_),
        evictor_(std::move(other.evictor_)) {}

  // A built-in trigger (EventTimeTrigger::create(), CountTrigger::of(n),
  // PurgingTrigger::of(...), ...) or an object of a Trigger<T, W> subclass.
  template <class S>
  WindowedStream& trigger(S t) {
    spec_.trigger = [t] { return internal::buildTrigger<T, W>(t); };
    triggerSet_ = true;
    eventTimeTrigger_ = std::is_same_v<S, EventTimeTrigger>;
    processingTimeTrigger_ = std::is_same_v<S, ProcessingTimeTrigger>;
    return *this;
  }
  // CountEvictor::of, TimeEvictor::of, DeltaEvictor::of or an Evictor<T, W>.
  template <class S>
  WindowedStream& evictor(S e) {
    evictor_ = [e] { return internal::buildEvictor<T, W>(e); };
    return *this;
  }
  // Elements up to `lateness` behind the watermark still update (and
  // re-fire) their windows; window state lives until maxTimestamp + lateness.
  template <class R, class P>
  WindowedStream& allowedLateness(std::chrono::duration<R, P> lateness) {
    int64_t ms = internal::toMillis(lateness);
    if (ms < 0) {
      throw SluiceException("allowedLateness must not be negative, got " + std::to_string(ms) +
                            " ms");
    }
    spec_.allowedLateness = ms;
    return *this;
  }
  // Late elements (no window left to update) go to `tag` instead of being
  // dropped; read them with result.getSideOutput(tag).
  WindowedStream& sideOutputLateData(const OutputTag<T>& tag) {
    spec_.lateDataTag = tag.getId();
    return *this;
  }

  // reduce(f): f is T(const T&, const T&) or a ReduceFunction<T>.
  // reduce(f, windowFunction): incremental reduce, then the window function
  // gets the one reduced value with the window's metadata.
  template <class F>
  SingleOutputStreamOperator<T> reduce(F f) {
    checkReduce<F>();
    auto function = internal::passThrough<T, K, W>();
    if constexpr (internal::kSliceable<K, W, T>) {
      if constexpr (kMaySlice) {
        if (sliceable()) return buildSliced<T>("reduce", reduceSlices(f), function);
      }
      if constexpr (kMaySession) {
        if (sessionable()) return buildSessions<T>("reduce", reduceSlices(f), function);
      }
    }
    return build("reduce", reduceContents(std::move(f)), std::move(function));
  }
  template <class F, class P>
  auto reduce(F f, P windowFunction) {
    checkReduce<F>();
    auto function = internal::makeWindowFunction<T, K, W>(std::move(windowFunction));
    if constexpr (internal::kSliceable<K, W, T>) {
      if constexpr (kMaySlice) {
        if (sliceable()) return buildSliced<T>("reduce", reduceSlices(f), function);
      }
      if constexpr (kMaySession) {
        if (sessionable()) return buildSessions<T>("reduce", reduceSlices(f), function);
      }
    }
    return build("reduce", reduceContents(std::move(f)), std::move(function));
  }

  // aggregate(agg): agg derives from AggregateFunction<T, ACC, R>; emits R.
  template <class A>
  auto aggregate(A agg) {
    checkAggregate<A>();
    using R = typename A::OutputType;
    auto function = internal::passThrough<R, K, W>();
    if constexpr (internal::kSliceable<K, W, typename A::AccumulatorType>) {
      using ACC = typename A::AccumulatorType;
      if constexpr (kMaySlice) {
        if (sliceable()) return buildSliced<ACC>("aggregate", aggregateSlices(agg), function);
      }
      if constexpr (kMaySession) {
        if (sessionable()) return buildSessions<ACC>("aggregate", aggregateSlices(agg), function);
      }
    }
    return build("aggregate", aggregateContents(std::move(agg)), std::move(function));
  }
  template <class A, class P>
  auto aggregate(A agg, P windowFunction) {
    checkAggregate<A>();
    using R = typename A::OutputType;
    auto function = internal::makeWindowFunction<R, K, W>(std::move(windowFunction));
    if constexpr (internal::kSliceable<K, W, typename A::AccumulatorType>) {
      using ACC = typename A::AccumulatorType;
      if constexpr (kMaySlice) {
        if (sliceable()) return buildSliced<ACC>("aggregate", aggregateSlices(agg), function);
      }
      if constexpr (kMaySession) {
        if (sessionable()) return buildSessions<ACC>("aggregate", aggregateSlices(agg), function);
      }
    }
    return build("aggregate", aggregateContents(std::move(agg)), std::move(function));
  }

  // process(f): f derives from ProcessWindowFunction<T, OUT, K, W> (or, on
  // windowAll, ProcessAllWindowFunction<T, OUT, W>) and gets every element.
  template <class P>
  auto process(P windowFunction) {
    std::shared_ptr<const internal::WindowContents<T, T, W>> contents;
    if (evictor_) {
      using Fold = internal::IdentityFold<T>;
      contents = std::make_shared<internal::EvictingContents<T, W, Fold>>(Fold{}, evictor_);
    } else {
      contents = std::make_shared<internal::ListContents<T, W>>();
    }
    return build("process", std::move(contents),
                 internal::makeWindowFunction<T, K, W>(std::move(windowFunction)));
  }
  // apply(f): f derives from WindowFunction<T, OUT, K, W> (or AllWindowFunction).
  template <class P>
  auto apply(P windowFunction) {
    return process(std::move(windowFunction));
  }

  // Field aggregations per window, as on KeyedStream.
  SingleOutputStreamOperator<T> sum(int position) {
    return agg(internal::AggregationKind::kSum, position);
  }
  SingleOutputStreamOperator<T> min(int position) {
    return agg(internal::AggregationKind::kMin, position);
  }
  SingleOutputStreamOperator<T> max(int position) {
    return agg(internal::AggregationKind::kMax, position);
  }
  SingleOutputStreamOperator<T> minBy(int position) {
    return agg(internal::AggregationKind::kMinBy, position);
  }
  SingleOutputStreamOperator<T> maxBy(int position) {
    return agg(internal::AggregationKind::kMaxBy, position);
  }
  SingleOutputStreamOperator<T> sum(const std::string& field) {
    return agg(internal::AggregationKind::kSum, fieldPosition(field));
  }
  SingleOutputStreamOperator<T> min(const std::string& field) {
    return agg(internal::AggregationKind::kMin, fieldPosition(field));
  }
  SingleOutputStreamOperator<T> max(const std::string& field) {
    return agg(internal::AggregationKind::kMax, fieldPosition(field));
  }
  SingleOutputStreamOperator<T> minBy(const std::string& field) {
    return agg(internal::AggregationKind::kMinBy, fieldPosition(field));
  }
  SingleOutputStreamOperator<T> maxBy(const std::string& field) {
    return agg(internal::AggregationKind::kMaxBy, fieldPosition(field));
  }
  template <class V, class C>
  requires std::same_as<C, T> SingleOutputStreamOperator<T> sum(V C::*m) {
    return reduce(internal::MemberAggregator<T, V, C>(internal::AggregationKind::kSum, m));
  }
  template <class V, class C>
  requires std::same_as<C, T> SingleOutputStreamOperator<T> min(V C::*m) {
    return reduce(internal::MemberAggregator<T, V, C>(internal::AggregationKind::kMin, m));
  }
  template <class V, class C>
  requires std::same_as<C, T> SingleOutputStreamOperator<T> max(V C::*m) {
    return reduce(internal::MemberAggregator<T, V, C>(internal::AggregationKind::kMax, m));
  }
  template <class V, class C>
  requires std::same_as<C, T> SingleOutputStreamOperator<T> minBy(V C::*m) {
    return reduce(internal::MemberAggregator<T, V, C>(internal::AggregationKind::kMinBy, m));
  }
  template <class V, class C>
  requires std::same_as<C, T> SingleOutputStreamOperator<T> maxBy(V C::*m) {
    return reduce(internal::MemberAggregator<T, V, C>(internal::AggregationKind::kMaxBy, m));
  }

 private:
  template <class, class, class, class, internal::FastWindows>
  friend class WindowedStream;

  template <class F>
  static void checkReduce() {
    static_assert(internal::WindowReduceFn<F, T>,
                  "WindowedStream::reduce(f) accepts a callable  T f(const T& a, const T& b)  or "
                  "an object of a class derived from sluice::ReduceFunction<T>");
  }
  template <class A>
  static void checkAggregate() {
    static_assert(internal::AggregateFn<A>,
                  "WindowedStream::aggregate(agg): agg must be an object of a class derived from "
                  "sluice::AggregateFunction<T, ACC, OUT>");
    if constexpr (internal::AggregateFn<A>) {
      static_assert(std::is_same_v<typename A::InputType, T>,
                    "WindowedStream::aggregate(agg): the AggregateFunction's input type must be "
                    "the stream's element type");
    }
  }

  int fieldPosition(const std::string& field) const {
    if constexpr (SluiceStruct<T>) {
      int32_t i = fieldIndex<T>(field);
      if (i < 0)
        throw SluiceException("no field '" + field + "' in " + TypeSerializer<T>::schema());
      return i;
    } else {
      throw SluiceException("aggregation by field name '" + field +
                            "' needs a SLUICE_STRUCT type; got " + TypeSerializer<T>::schema());
    }
  }
  SingleOutputStreamOperator<T> agg(internal::AggregationKind kind, int position) {
    return reduce(internal::PositionAggregator<T>(
        kind, position, std::string("WindowedStream::") + internal::aggregationName(kind)));
  }

  template <class F>
  std::shared_ptr<const internal::WindowContents<T, T, W>> reduceContents(F f) const {
    if (evictor_) {
      using Fold = internal::ReduceFold<T, F>;
      return internal::makeOwned<internal::EvictingContents<T, W, Fold>>(Fold{std::move(f)},
                                                                         evictor_);
    }
    return internal::makeOwned<internal::ReduceContents<T, W, F>>(std::move(f));
  }
  template <class A>
  auto aggregateContents(A agg) const {
    using ACC = typename A::AccumulatorType;
    using R = typename A::OutputType;
    std::shared_ptr<const internal::WindowContents<T, R, W>> contents;
    if (evictor_) {
      using Fold = internal::AggregateFold<T, ACC, R, A>;
      contents =
          std::make_shared<internal::EvictingContents<T, W, Fold>>(Fold{std::move(agg)}, evictor_);
    } else {
      contents = std::make_shared<internal::AggregateContents<T, ACC, R, W, A>>(std::move(agg));
    }
    return contents;
  }

  template <class F>
  static auto reduceSlices(const F& f) {
    return std::shared_ptr<const internal::SliceFunction<T, T, T>>(
        internal::makeOwned<internal::ReduceSlices<T, F>>(f));
  }
  template <class A>
  static auto aggregateSlices(const A& agg) {
    using ACC = typename A::AccumulatorType;
    using R = typename A::OutputType;
    return std::shared_ptr<const internal::SliceFunction<T, ACC, R>>(
        internal::makeOwned<internal::AggregateSlices<T, ACC, R, A>>(agg));
  }

  // Whether the sliced window operator runs these windows (see the top of
  // this file); the types were checked by the caller.
  bool sliceable() const {
    if (!spec_.aligned || evictor_) return false;
    // The assigner's default trigger, or that trigger set explicitly.
    const bool defaultTrigger =
        spec_.aligned->processingTime ? processingTimeTrigger_ : eventTimeTrigger_;
    if (triggerSet_ && !defaultTrigger) return false;
    return fastPathConfigured();
  }
  // Whether the session window operator runs these windows (see the top of
  // this file); the types were checked by the caller.
  bool sessionable() const {
    if (!spec_.sessionGap || evictor_) return false;
    if (triggerSet_ && !eventTimeTrigger_) return false;
    return fastPathConfigured();
  }
  // `pipeline.window.slicing` on and the hashmap state backend.
  bool fastPathConfigured() const {
    const Configuration& config = input_.environmentState()->config;
    if (!config.get(options::kPipelineWindowSlicing)) return false;
    std::string backend = config.get(options::kStateBackendType);
    for (char& c : backend) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return backend == "hashmap";
  }

  // One sliced operator class per (key, input, accumulator, value, output)
  // types; the functions are run-time strategies.
  template <class ACC, class V, class OUT>
  SingleOutputStreamOperator<OUT> buildSliced(
      const char* what, std::shared_ptr<const internal::SliceFunction<T, ACC, V>> fn,
      std::shared_ptr<const internal::InternalWindowFunction<V, OUT, K, W>> function) {
    internal::SlicingWindowSpec<K, T, ACC, V, OUT> spec;
    spec.windows = *spec_.aligned;
    (void)window::Slicing(spec.windows);  // throws now for windows it cannot cut
    return buildTable<internal::SlicingWindowOperator<K, T, ACC, V, OUT>>(
        std::move(spec), all_ ? "SlicingAllWindow(" : "SlicingWindow(", what, std::move(fn),
        std::move(function));
  }

  // The same for the session operator.
  template <class ACC, class V, class OUT>
  SingleOutputStreamOperator<OUT> buildSessions(
      const char* what, std::shared_ptr<const internal::SliceFunction<T, ACC, V>> fn,
      std::shared_ptr<const internal::InternalWindowFunction<V, OUT, K, W>> function) {
    internal::SessionWindowSpec<K, T, ACC, V, OUT> spec;
    spec.gap = *spec_.sessionGap;
    return buildTable<internal::SessionWindowOperator<K, T, ACC, V, OUT>>(
        std::move(spec), all_ ? "SessionAllWindow(" : "SessionWindow(", what, std::move(fn),
        std::move(function));
  }

  // Fills in what both table operators' specs share and adds the operator,
  // named `prefix` + assigner + `what`.
  template <class Op, class Spec, class ACC, class V, class OUT>
  SingleOutputStreamOperator<OUT> buildTable(
      Spec spec, const char* prefix, const char* what,
      std::shared_ptr<const internal::SliceFunction<T, ACC, V>> fn,
      std::shared_ptr<const internal::InternalWindowFunction<V, OUT, K, W>> function) {
    spec.assignerName = assignerName_;
    spec.allowedLateness = spec_.allowedLateness;
    spec.lateDataTag = spec_.lateDataTag;
    spec.key = input_.getKeySelector();
    spec.function = std::move(fn);
    spec.windowFunction = std::move(function);
    std::string name = std::string(prefix) + assignerName_ + ", " + what + ")";
    auto factory = [spec = std::move(spec)]() { return internal::makeOwned<Op>(spec); };
    auto out = input_.template transform<OUT>(name, std::move(factory));
    if (all_) out.setParallelism(1);
    return out;
  }

  // One operator class per (key, input, value, output, window) types; the
  // contents and the function are run-time strategies.
  template <class V, class OUT>
  SingleOutputStreamOperator<OUT> build(
      const char* what, std::shared_ptr<const internal::WindowContents<T, V, W>> contents,
      std::shared_ptr<const internal::InternalWindowFunction<V, OUT, K, W>> function) {
    using Op = internal::WindowOperator<K, T, V, OUT, W>;
    internal::WindowSpec<K, T, V, OUT, W> spec;
    static_cast<Spec&>(spec) = spec_;
    spec.key = input_.getKeySelector();
    spec.contents = std::move(contents);
    spec.function = std::move(function);
    std::string name = std::string(all_ ? "AllWindow(" : "Window(") + assignerName_ + ", " +
                       (triggerSet_ ? spec.trigger()->toString() : "default trigger") +
                       (evictor_ ? ", evictor" : "") + ", " + what + ")";
    auto factory = [spec = std::move(spec)]() { return internal::makeOwned<Op>(spec); };
    auto out = input_.template transform<OUT>(name, std::move(factory));
    if (all_) out.setParallelism(1);
    return out;
  }

  KeyedStream<T, K, KS> input_;
  Spec spec_;
  std::string assignerName_;
  bool all_ = false;
  bool triggerSet_ = false;
  bool eventTimeTrigger_ = false;       // the trigger set is EventTimeTrigger::create()
  bool processingTimeTrigger_ = false;  // the trigger set is ProcessingTimeTrigger::create()
  std::function<std::unique_ptr<Evictor<T, W>>()> evictor_;
};

// windowAll(...): one window operator instance (parallelism 1) sees every
// element. Same configuration and functions as WindowedStream, with
// ProcessAllWindowFunction / AllWindowFunction as window functions.
template <class T, class W, internal::FastWindows kFast = internal::FastWindows::kAny>
using AllWindowedStream = WindowedStream<T, uint8_t, internal::NullKeySelector<T>, W, kFast>;

// --- KeyedStream / DataStream entry points -------------------------------------

template <class T, class K, class KS>
template <class A>
auto KeyedStream<T, K, KS>::window(A assigner) const {
  using W = typename A::WindowType;
  internal::WindowSettings<T, W> spec;
  spec.assigner = [assigner] { return internal::buildAssigner<T>(assigner); };
  spec.aligned = internal::alignedWindowsOf(assigner);
  spec.sessionGap = internal::sessionGapOf(assigner);
  std::string name = spec.assigner()->toString();
  return WindowedStream<T, K, KS, W, internal::kFastWindowsOf<A>>(*this, std::move(spec),
                                                                  std::move(name));
}

template <class T, class K, class KS>
auto KeyedStream<T, K, KS>::countWindow(int64_t size) const {
  auto w = window(GlobalWindows::create());
  w.trigger(PurgingTrigger::of(CountTrigger::of(size)));
  return w;
}

template <class T, class K, class KS>
auto KeyedStream<T, K, KS>::countWindow(int64_t size, int64_t slide) const {
  auto w = window(GlobalWindows::create());
  w.evictor(CountEvictor::of(size));
  w.trigger(CountTrigger::of(slide));
  return w;
}

template <class T>
template <class A>
auto DataStream<T>::windowAll(A assigner) const {
  using W = typename A::WindowType;
  KeyedStream<T, uint8_t, internal::NullKeySelector<T>> keyed(env_, inputs_,
                                                              internal::NullKeySelector<T>{});
  internal::WindowSettings<T, W> spec;
  spec.assigner = [assigner] { return internal::buildAssigner<T>(assigner); };
  spec.aligned = internal::alignedWindowsOf(assigner);
  spec.sessionGap = internal::sessionGapOf(assigner);
  std::string name = spec.assigner()->toString();
  return AllWindowedStream<T, W, internal::kFastWindowsOf<A>>(std::move(keyed), std::move(spec),
                                                              std::move(name), true);
}

template <class T>
auto DataStream<T>::countWindowAll(int64_t size) const {
  auto w = windowAll(GlobalWindows::create());
  w.trigger(PurgingTrigger::of(CountTrigger::of(size)));
  return w;
}

template <class T>
auto DataStream<T>::countWindowAll(int64_t size, int64_t slide) const {
  auto w = windowAll(GlobalWindows::create());
  w.evictor(CountEvictor::of(size));
  w.trigger(CountTrigger::of(slide));
  return w;
}

}  // namespace sluice
