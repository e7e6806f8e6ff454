// Joins of two streams, as in Flink's DataStream API:
//
//   - window join:  a.join(b).where(keyA).equalTo(keyB).window(assigner).apply(f)
//     emits f(x, y) for every pair of an element x of `a` and an element y of
//     `b` with equal keys in the same window (an inner join);
//   - window coGroup:  a.coGroup(b).where(keyA).equalTo(keyB).window(assigner)
//     .apply(f) calls f once per key and window with all elements of both
//     sides in it (one side may be empty), so outer joins can be written;
//   - interval join:  keyedA.intervalJoin(keyedB).between(lower, upper)
//     .process(f) calls f(x, y) for every x of `a` at time t and y of `b`
//     with the same key at a time in [t + lower, t + upper].
//
// Window joins are built, as in Flink, on the window machinery: each side is
// mapped into a TaggedUnion<A, B>, the two are unioned, keyed by the key of
// whichever side an element came from, and windowed; the window function
// splits a window's contents by side and calls the user's function. So the
// window's contents are keyed state, checkpointed with everything else, and
// outputs carry the window's maxTimestamp() as their timestamp.
//
// The interval join is a two-input keyed operator (Flink's
// IntervalJoinOperator): each side's elements wait in keyed MapState
// (timestamp -> elements) until the watermark says no element of the other
// side can join them any more; a cleanup timer per timestamp removes them.
// An output's timestamp is the larger of the two joined elements'. Elements
// behind the current watermark are late: they go to a side output when one
// is set, otherwise they are dropped and counted (numLateRecordsDropped).
//
// See docs/joins.md.
#pragma once

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <sluice/core/owned.h>
#include <sluice/core/serializer.h>
#include <sluice/datastream.h>
#include <sluice/functions.h>
#include <sluice/internal/keyed_state.h>
#include <sluice/internal/keyed_state_handler.h>
#include <sluice/internal/operators.h>
#include <sluice/timers.h>
#include <sluice/windowed_stream.h>
#include <sluice/windows.h>

namespace sluice {

// ---------------------------------------------------------------------------
// User functions

// join(...).apply(f): one output per pair of elements with equal keys in the
// same window.
template <class IN1, class IN2, class OUT>
class JoinFunction {
 public:
  using FirstInputType = IN1;
  using SecondInputType = IN2;
  using OutputType = OUT;
  virtual ~JoinFunction() = default;
  virtual OUT join(const IN1& first, const IN2& second) = 0;
};
template <class IN1, class IN2, class OUT>
class RichJoinFunction : public JoinFunction<IN1, IN2, OUT>, public RichFunction {};

// join(...).apply(f): zero or more outputs per pair.
template <class IN1, class IN2, class OUT>
class FlatJoinFunction {
 public:
  using FirstInputType = IN1;
  using SecondInputType = IN2;
  using OutputType = OUT;
  virtual ~FlatJoinFunction() = default;
  virtual void join(const IN1& first, const IN2& second, Collector<OUT>& out) = 0;
};
template <class IN1, class IN2, class OUT>
class RichFlatJoinFunction : public FlatJoinFunction<IN1, IN2, OUT>, public RichFunction {};

// coGroup(...).apply(f): called once per key and fired window with the
// window's elements of each side, in arrival order; one of the two may be
// empty, never both.
template <class IN1, class IN2, class OUT>
class CoGroupFunction {
 public:
  using FirstInputType = IN1;
  using SecondInputType = IN2;
  using OutputType = OUT;
  virtual ~CoGroupFunction() = default;
  virtual void coGroup(const std::vector<IN1>& first, const std::vector<IN2>& second,
                       Collector<OUT>& out) = 0;
};
template <class IN1, class IN2, class OUT>
class RichCoGroupFunction : public CoGroupFunction<IN1, IN2, OUT>, public RichFunction {};

// intervalJoin(...).process(f): called once per joined pair, with the current
// key's keyed state available through getRuntimeContext(). Outputs carry
// ctx.getTimestamp() = max(left timestamp, right timestamp).
template <class IN1, class IN2, class OUT>
class ProcessJoinFunction : public RichFunction {
 public:
  using FirstInputType = IN1;
  using SecondInputType = IN2;
  using OutputType = OUT;
  // Valid only during the processElement call it is passed to. output(tag, v)
  // (from BaseContext) emits to a side output with getTimestamp().
  class Context : public BaseContext {
   public:
    virtual int64_t getLeftTimestamp() const = 0;
    virtual int64_t getRightTimestamp() const = 0;
    // The timestamp of the outputs: the larger of the two.
    virtual int64_t getTimestamp() const = 0;
  };
  virtual void processElement(const IN1& left, const IN2& right, Context& ctx,
                              Collector<OUT>& out) = 0;
};

// ---------------------------------------------------------------------------
// TaggedUnion: an element of one of two streams, and which one.

template <class T1, class T2>
class TaggedUnion {
 public:
  // Default: an element of the first stream, value-initialised (for reuse
  // by deserialisation).
  TaggedUnion() = default;
  static TaggedUnion one(T1 value) {
    TaggedUnion u;
    u.value_.template emplace<0>(std::move(value));
    return u;
  }
  static TaggedUnion two(T2 value) {
    TaggedUnion u;
    u.value_.template emplace<1>(std::move(value));
    return u;
  }
  bool isOne() const { return value_.index() == 0; }
  bool isTwo() const { return value_.index() == 1; }
  // Throws std::bad_variant_access on the wrong side.
  const T1& getOne() const { return std::get<0>(value_); }
  const T2& getTwo() const { return std::get<1>(value_); }

  bool operator==(const TaggedUnion&) const = default;

 private:
  friend struct TypeSerializer<TaggedUnion<T1, T2>>;
  std::variant<T1, T2> value_;
};

// [u8 tag: 1 first, 2 second][the element].
template <class T1, class T2>
struct TypeSerializer<TaggedUnion<T1, T2>> {
  static constexpr size_t kMinEncodedSize =
      1 + std::min(internal::minEncodedSize<T1>(), internal::minEncodedSize<T2>());
  static void serialize(const TaggedUnion<T1, T2>& value, DataOutputView& out) {
    if (value.isOne()) {
      out.writeU8(1);
      TypeSerializer<T1>::serialize(value.getOne(), out);
    } else {
      out.writeU8(2);
      TypeSerializer<T2>::serialize(value.getTwo(), out);
    }
  }
  static void deserialize(TaggedUnion<T1, T2>& into, DataInputView& in) {
    const size_t start = in.position();
    const uint8_t tag = in.readU8();
    if (tag == 1) {
      if (into.value_.index() != 0) into.value_.template emplace<0>();
      TypeSerializer<T1>::deserialize(std::get<0>(into.value_), in);
    } else if (tag == 2) {
      if (into.value_.index() != 1) into.value_.template emplace<1>();
      TypeSerializer<T2>::deserialize(std::get<1>(into.value_), in);
    } else {
      in.failAt(start, "invalid tagged union tag " + std::to_string(tag) + " (expected 1 or 2)");
    }
  }
  static std::string schema() { return "tagged_union<" + internal::joinSchemas<T1, T2>() + ">"; }
};

// ---------------------------------------------------------------------------
// Accepted function forms

namespace internal {

template <class T>
struct CollectorOf {
  using type = void;
};
template <class O>
struct CollectorOf<Collector<O>&> {
  using type = O;
};
template <class M>
struct MemberThirdArg {
  using type = void;
};
template <class C, class R, class X, class Y, class Z>
struct MemberThirdArg<R (C::*)(X, Y, Z) const> {
  using type = Z;
};
template <class C, class R, class X, class Y, class Z>
struct MemberThirdArg<R (C::*)(X, Y, Z)> {
  using type = Z;
};
// The third parameter of a three-argument lambda, functor or function
// pointer; void otherwise.
template <class F, class = void>
struct ThirdArg {
  using type = void;
};
template <class R, class X, class Y, class Z>
struct ThirdArg<R (*)(X, Y, Z)> {
  using type = Z;
};
template <class F>
struct ThirdArg<F, std::void_t<decltype(&F::operator())>> {
  using type = typename MemberThirdArg<decltype(&F::operator())>::type;
};
// OUT of a callable whose third parameter is Collector<OUT>&; void otherwise.
template <class F>
using ThirdCollectorOut = typename CollectorOf<typename ThirdArg<F>::type>::type;

}  // namespace internal

template <class F, class A, class B>
concept JoinFunctionObject = requires {
  typename F::OutputType;
}
&&std::derived_from<F, JoinFunction<A, B, typename F::OutputType>>;
template <class F, class A, class B>
concept FlatJoinFunctionObject = requires {
  typename F::OutputType;
}
&&std::derived_from<F, FlatJoinFunction<A, B, typename F::OutputType>>;
template <class F, class A, class B>
concept CoGroupFunctionObject = requires {
  typename F::OutputType;
}
&&std::derived_from<F, CoGroupFunction<A, B, typename F::OutputType>>;
template <class F, class A, class B>
concept JoinCallable = std::invocable<F&, const A&, const B&> &&
    !std::is_void_v<std::invoke_result_t<F&, const A&, const B&>>;
template <class F, class A, class B>
concept FlatJoinCallable =
    !std::is_void_v<internal::ThirdCollectorOut<F>> &&
    std::invocable<F&, const A&, const B&, Collector<internal::ThirdCollectorOut<F>>&>;
template <class F, class A, class B>
concept CoGroupCallable = !std::is_void_v<internal::ThirdCollectorOut<F>> &&
                          std::invocable<F&, const std::vector<A>&, const std::vector<B>&,
                                         Collector<internal::ThirdCollectorOut<F>>&>;

namespace internal {

// The key of a tagged element: the key selector of the side it came from.
template <class A, class B, class K, class KSA, class KSB>
struct UnionKeySelector {
  mutable KSA first;
  mutable KSB second;
  K operator()(const TaggedUnion<A, B>& v) const {
    return v.isOne() ? K(std::invoke(first, v.getOne())) : K(std::invoke(second, v.getTwo()));
  }
};

// What the window function runs on a window's contents split by side.
template <class A, class B, class OUT, class F>
struct CoGroupBody {
  F f;
  void operator()(const std::vector<A>& first, const std::vector<B>& second, Collector<OUT>& out) {
    if constexpr (std::derived_from<F, CoGroupFunction<A, B, OUT>>) {
      f.coGroup(first, second, out);
    } else {
      f(first, second, out);
    }
  }
};
// Flink's JoinCoGroupFunction: a nested loop over both sides.
template <class A, class B, class OUT, class F>
struct JoinBody {
  F f;
  void operator()(const std::vector<A>& first, const std::vector<B>& second, Collector<OUT>& out) {
    for (const A& a : first) {
      for (const B& b : second) {
        if constexpr (std::derived_from<F, JoinFunction<A, B, OUT>>) {
          out.collect(f.join(a, b));
        } else {
          out.collect(f(a, b));
        }
      }
    }
  }
};
// Flink's FlatJoinCoGroupFunction.
template <class A, class B, class OUT, class F>
struct FlatJoinBody {
  F f;
  void operator()(const std::vector<A>& first, const std::vector<B>& second, Collector<OUT>& out) {
    for (const A& a : first) {
      for (const B& b : second) {
        if constexpr (std::derived_from<F, FlatJoinFunction<A, B, OUT>>) {
          f.join(a, b, out);
        } else {
          f(a, b, out);
        }
      }
    }
  }
};

// Flink's CoGroupWindowFunction: splits a window's tagged elements by side
// and runs `Body`. Opens and closes the user's function when it is rich.
template <class A, class B, class OUT, class K, class W, class Body>
class CoGroupWindowFunction final : public WindowFunction<TaggedUnion<A, B>, OUT, K, W> {
 public:
  explicit CoGroupWindowFunction(Body body) : body_(std::move(body)) {}
  void open() override { openFunction(body_.f, this->getRuntimeContext()); }
  void close() override { closeFunction(body_.f); }
  void apply(const K&, const W&, const std::vector<TaggedUnion<A, B>>& input,
             Collector<OUT>& out) override {
    first_.clear();
    second_.clear();
    for (const auto& e : input) {
      if (e.isOne()) {
        first_.push_back(e.getOne());
      } else {
        second_.push_back(e.getTwo());
      }
    }
    body_(first_, second_, out);
  }

 private:
  Body body_;
  std::vector<A> first_;
  std::vector<B> second_;
};

}  // namespace internal

// ---------------------------------------------------------------------------
// Window join and coGroup

// The last step of join/coGroup: optional trigger, evictor and lateness,
// then apply(f). kJoin: join (f per pair) or coGroup (f per key and window).
// W is the window type of the assigner A.
template <bool kJoin, class IN1, class IN2, class KS1, class KS2, class A>
class TwoStreamWithWindow {
 public:
  using KeyType = std::decay_t<std::invoke_result_t<KS1&, const IN1&>>;
  using WindowType = typename A::WindowType;
  using UnionType = TaggedUnion<IN1, IN2>;

  TwoStreamWithWindow(DataStream<IN1> first, DataStream<IN2> second, KS1 key1, KS2 key2, A assigner)
      : first_(std::move(first)),
        second_(std::move(second)),
        key1_(std::move(key1)),
        key2_(std::move(key2)),
        assigner_(std::move(assigner)) {}

  // A built-in trigger (EventTimeTrigger::create(), CountTrigger::of(n), ...)
  // or an object of a class derived from Trigger<TaggedUnion<IN1, IN2>, W>.
  // Default: the assigner's.
  template <class S>
  TwoStreamWithWindow& trigger(S t) {
    config_.push_back([t](Windowed& w) { w.trigger(t); });
    return *this;
  }
  // CountEvictor::of, TimeEvictor::of, DeltaEvictor::of or an object of a
  // class derived from Evictor<TaggedUnion<IN1, IN2>, W>; counts and deltas
  // see the elements of both sides. Default: none.
  template <class S>
  TwoStreamWithWindow& evictor(S e) {
    config_.push_back([e](Windowed& w) { w.evictor(e); });
    return *this;
  }
  // Late elements within `lateness` re-fire their window (which then emits
  // its whole contents again). Default: 0.
  template <class R, class P>
  TwoStreamWithWindow& allowedLateness(std::chrono::duration<R, P> lateness) {
    int64_t ms = internal::toMillis(lateness);
    if (ms < 0) {
      throw SluiceException("allowedLateness must not be negative, got " + std::to_string(ms) +
                            " ms");
    }
    config_.push_back([lateness](Windowed& w) { w.allowedLateness(lateness); });
    return *this;
  }

  // join: f is  OUT f(const IN1&, const IN2&),  void f(const IN1&, const
  // IN2&, Collector<OUT>&),  or an object of a class derived from
  // JoinFunction<IN1, IN2, OUT> or FlatJoinFunction<IN1, IN2, OUT>.
  // coGroup: f is  void f(const std::vector<IN1>&, const std::vector<IN2>&,
  // Collector<OUT>&)  or a CoGroupFunction<IN1, IN2, OUT>.
  template <class F>
  auto apply(F f) const {
    if constexpr (kJoin) {
      if constexpr (JoinFunctionObject<F, IN1, IN2>) {
        using OUT = typename F::OutputType;
        return build<OUT>(internal::JoinBody<IN1, IN2, OUT, F>{std::move(f)});
      } else if constexpr (FlatJoinFunctionObject<F, IN1, IN2>) {
        using OUT = typename F::OutputType;
        return build<OUT>(internal::FlatJoinBody<IN1, IN2, OUT, F>{std::move(f)});
      } else if constexpr (JoinCallable<F, IN1, IN2>) {
        using OUT = std::decay_t<std::invoke_result_t<F&, const IN1&, const IN2&>>;
        return build<OUT>(internal::JoinBody<IN1, IN2, OUT, F>{std::move(f)});
      } else if constexpr (FlatJoinCallable<F, IN1, IN2>) {
        using OUT = internal::ThirdCollectorOut<F>;
        return build<OUT>(internal::FlatJoinBody<IN1, IN2, OUT, F>{std::move(f)});
      } else {
        static_assert(internal::kAlwaysFalse<F>,
                      "join(...).where(...).equalTo(...).window(...).apply(f) accepts:\n"
                      "  - a callable  OUT f(const IN1&, const IN2&)  (OUT not void)\n"
                      "  - a callable  void f(const IN1&, const IN2&, sluice::Collector<OUT>&)\n"
                      "  - an object of a class derived from sluice::JoinFunction<IN1, IN2, OUT> "
                      "or sluice::FlatJoinFunction<IN1, IN2, OUT> (or their Rich variants)");
        return 0;
      }
    } else {
      if constexpr (CoGroupFunctionObject<F, IN1, IN2>) {
        using OUT = typename F::OutputType;
        return build<OUT>(internal::CoGroupBody<IN1, IN2, OUT, F>{std::move(f)});
      } else if constexpr (CoGroupCallable<F, IN1, IN2>) {
        using OUT = internal::ThirdCollectorOut<F>;
        return build<OUT>(internal::CoGroupBody<IN1, IN2, OUT, F>{std::move(f)});
      } else {
        static_assert(internal::kAlwaysFalse<F>,
                      "coGroup(...).where(...).equalTo(...).window(...).apply(f) accepts:\n"
                      "  - a callable  void f(const std::vector<IN1>&, const std::vector<IN2>&, "
                      "sluice::Collector<OUT>&)\n"
                      "  - an object of a class derived from sluice::CoGroupFunction<IN1, IN2, "
                      "OUT> or sluice::RichCoGroupFunction<IN1, IN2, OUT>");
        return 0;
      }
    }
  }

 private:
  using KeySelector = internal::UnionKeySelector<IN1, IN2, KeyType, KS1, KS2>;
  using Windowed = WindowedStream<UnionType, KeyType, KeySelector, WindowType>;

  template <class OUT, class Body>
  SingleOutputStreamOperator<OUT> build(Body body) const {
    const char* what = kJoin ? "Join" : "CoGroup";
    DataStream<IN1> first = first_;
    DataStream<IN2> second = second_;
    DataStream<UnionType> tagged1 = first.map([](const IN1& v) { return UnionType::one(v); })
                                        .name(std::string(what) + ": tag input 1");
    DataStream<UnionType> tagged2 = second.map([](const IN2& v) { return UnionType::two(v); })
                                        .name(std::string(what) + ": tag input 2");
    auto keyed = tagged1.union_(tagged2).keyBy(KeySelector{key1_, key2_});
    Windowed windowed = keyed.window(assigner_);
    for (const auto& c : config_) c(windowed);
    SingleOutputStreamOperator<OUT> out = windowed.apply(
        internal::CoGroupWindowFunction<IN1, IN2, OUT, KeyType, WindowType, Body>(std::move(body)));
    auto& node = out.environmentState()->graph.node(out.getId());
    out.name(std::string(what) + " " + node.name);
    return out;
  }

  DataStream<IN1> first_;
  DataStream<IN2> second_;
  KS1 key1_;
  KS2 key2_;
  A assigner_;
  std::vector<std::function<void(Windowed&)>> config_;
};

// After where(key1).equalTo(key2): choose the windows.
template <bool kJoin, class IN1, class IN2, class KS1, class KS2>
class TwoStreamEqualTo {
 public:
  TwoStreamEqualTo(DataStream<IN1> first, DataStream<IN2> second, KS1 key1, KS2 key2)
      : first_(std::move(first)),
        second_(std::move(second)),
        key1_(std::move(key1)),
        key2_(std::move(key2)) {}

  // A window assigner, as for keyBy(...).window(...): TumblingEventTimeWindows,
  // SlidingEventTimeWindows, EventTimeSessionWindows, GlobalWindows, their
  // processing-time variants, or a WindowAssigner<TaggedUnion<IN1, IN2>, W>.
  template <class A>
  TwoStreamWithWindow<kJoin, IN1, IN2, KS1, KS2, A> window(A assigner) const {
    return TwoStreamWithWindow<kJoin, IN1, IN2, KS1, KS2, A>(first_, second_, key1_, key2_,
                                                             std::move(assigner));
  }

 private:
  DataStream<IN1> first_;
  DataStream<IN2> second_;
  KS1 key1_;
  KS2 key2_;
};

// After where(key1): the second input's key.
template <bool kJoin, class IN1, class IN2, class KS1>
class TwoStreamWhere {
 public:
  TwoStreamWhere(DataStream<IN1> first, DataStream<IN2> second, KS1 key1)
      : first_(std::move(first)), second_(std::move(second)), key1_(std::move(key1)) {}

  // key: K(const IN2&) or a member pointer of IN2, with the same K as where().
  template <class KS2>
  auto equalTo(KS2 key2) const {
    if constexpr (std::is_invocable_v<const KS2&, const IN2&> &&
                  !std::is_void_v<std::invoke_result_t<const KS2&, const IN2&>>) {
      using K1 = std::decay_t<std::invoke_result_t<const KS1&, const IN1&>>;
      using K2 = std::decay_t<std::invoke_result_t<const KS2&, const IN2&>>;
      static_assert(std::is_same_v<K1, K2>,
                    "join/coGroup: where(key1) and equalTo(key2) must produce the same key type "
                    "(convert one of them, e.g. with a lambda returning the other's type)");
      return TwoStreamEqualTo<kJoin, IN1, IN2, KS1, KS2>(first_, second_, key1_, std::move(key2));
    } else {
      static_assert(internal::kAlwaysFalse<KS2>,
                    "join/coGroup: equalTo(key) accepts a callable  K key(const IN2&)  (K not "
                    "void) or a member pointer of the second stream's element type");
      return 0;
    }
  }

 private:
  DataStream<IN1> first_;
  DataStream<IN2> second_;
  KS1 key1_;
};

// a.join(b): start of a window join. See the top of this file.
template <class IN1, class IN2>
class JoinedStreams {
 public:
  JoinedStreams(DataStream<IN1> first, DataStream<IN2> second)
      : first_(std::move(first)), second_(std::move(second)) {
    internal::requireSameEnvironment("join", first_.environmentState().get(),
                                     second_.environmentState().get());
  }
  // key: K(const IN1&) or a member pointer of IN1.
  template <class KS1>
  TwoStreamWhere<true, IN1, IN2, KS1> where(KS1 key1) const {
    static_assert(std::is_invocable_v<const KS1&, const IN1&> &&
                      !std::is_void_v<std::invoke_result_t<const KS1&, const IN1&>>,
                  "join/coGroup: where(key) accepts a callable  K key(const IN1&)  (K not void) "
                  "or a member pointer of the first stream's element type");
    return TwoStreamWhere<true, IN1, IN2, KS1>(first_, second_, std::move(key1));
  }

 private:
  DataStream<IN1> first_;
  DataStream<IN2> second_;
};

// a.coGroup(b): start of a window coGroup. See the top of this file.
template <class IN1, class IN2>
class CoGroupedStreams {
 public:
  CoGroupedStreams(DataStream<IN1> first, DataStream<IN2> second)
      : first_(std::move(first)), second_(std::move(second)) {
    internal::requireSameEnvironment("coGroup", first_.environmentState().get(),
                                     second_.environmentState().get());
  }
  // key: K(const IN1&) or a member pointer of IN1.
  template <class KS1>
  TwoStreamWhere<false, IN1, IN2, KS1> where(KS1 key1) const {
    static_assert(std::is_invocable_v<const KS1&, const IN1&> &&
                      !std::is_void_v<std::invoke_result_t<const KS1&, const IN1&>>,
                  "join/coGroup: where(key) accepts a callable  K key(const IN1&)  (K not void) "
                  "or a member pointer of the first stream's element type");
    return TwoStreamWhere<false, IN1, IN2, KS1>(first_, second_, std::move(key1));
  }

 private:
  DataStream<IN1> first_;
  DataStream<IN2> second_;
};

// ---------------------------------------------------------------------------
// Interval join

namespace internal {

// Bounds in milliseconds, already moved inwards for exclusive bounds, and
// the late-data side outputs (empty: drop and count).
struct IntervalJoinSpec {
  int64_t lowerBound = 0;
  int64_t upperBound = 0;
  std::string leftLateTag;
  std::string rightLateTag;
};

// Flink's IntervalJoinOperator. Keyed state per key: LEFT_BUFFER and
// RIGHT_BUFFER, MapState<timestamp, [(element, joined)]>. Event-time timers
// (namespace 0 left, 1 right) at the time a timestamp's elements can no
// longer join remove them. The timers fire when the operator's watermark
// (the minimum of both inputs') advances, before it goes downstream.
template <class K, class A, class B, class OUT, class F, class KSA, class KSB>
class IntervalJoinOperator final : public KeyedUdfOperator<TwoInputOperator<A, B, OUT>, F, K> {
  using Base = KeyedUdfOperator<TwoInputOperator<A, B, OUT>, F, K>;
  template <class T>
  using Buffer = InternalMapState<VoidNamespace, int64_t, std::vector<std::pair<T, bool>>>;
  using Timer = TimerData<K, uint8_t>;
  static constexpr uint8_t kCleanupLeft = 0;
  static constexpr uint8_t kCleanupRight = 1;

 public:
  IntervalJoinOperator(F f, KSA leftKey, KSB rightKey, IntervalJoinSpec spec)
      : Base(std::move(f)),
        leftKey_(std::move(leftKey)),
        rightKey_(std::move(rightKey)),
        spec_(std::move(spec)) {}

  void setup(OperatorContext& context, OutputBase& output) override {
    // The base decides the operator's watermark; it reaches the timers
    // through this output first.
    downstream_ = &static_cast<Output<OUT>&>(output);
    watermarks_.downstream = downstream_;
    watermarks_.timers = &timers_;
    Base::setup(context, watermarks_);
  }
  void initializeState(const OperatorStateRestore* restore) override {
    Base::initializeState(restore);
    KeyedStateBackend& backend = this->keyed_.backend();
    left_ = &getOrCreateMapState<VoidNamespace>(
        backend, MapStateDescriptor<int64_t, std::vector<std::pair<A, bool>>>("LEFT_BUFFER"));
    right_ = &getOrCreateMapState<VoidNamespace>(
        backend, MapStateDescriptor<int64_t, std::vector<std::pair<B, bool>>>("RIGHT_BUFFER"));
    left_->setCurrentNamespace(VoidNamespace{});
    right_->setCurrentNamespace(VoidNamespace{});
    timers_.initForOperator(
        this->context(), [this](const Timer& t) { onEventTime(t); }, [](const Timer&) {}, restore);
  }
  OperatorStateSnapshot snapshotState(int64_t checkpointId) override {
    OperatorStateSnapshot s = Base::snapshotState(checkpointId);
    s.writeTimers = timers_.snapshotLater();
    return s;
  }
  void open() override {
    ctx_.setContext(&this->context());
    collector_.setOutput(downstream_);
    leftLate_ = lateOutput<A>(spec_.leftLateTag);
    rightLate_ = lateOutput<B>(spec_.rightLateTag);
    Base::open();
  }

  void processElement1(const StreamRecord<A>& r) override {
    checkTimestamp(r, "left");
    key_ = leftKey_(r.value);
    this->keyed_.setCurrentKey(key_);
    if (isLate(r.timestamp)) {
      late(r, leftLate_, !spec_.leftLateTag.empty());
      return;
    }
    addToBuffer(*left_, r.value, r.timestamp);
    const int64_t from = saturatingAdd(r.timestamp, spec_.lowerBound);
    const int64_t to = saturatingAdd(r.timestamp, spec_.upperBound);
    for (auto it = right_->iterator(); it->hasNext();) {
      auto [ts, entries] = it->next();
      if (ts < from || ts > to) continue;
      for (const auto& e : entries) collect(r.value, e.first, r.timestamp, ts);
    }
    const int64_t cleanup =
        spec_.upperBound > 0 ? saturatingAdd(r.timestamp, spec_.upperBound) : r.timestamp;
    timers_.registerEventTimeTimer(key_, kCleanupLeft, cleanup);
  }

  void processElement2(const StreamRecord<B>& r) override {
    checkTimestamp(r, "right");
    key_ = rightKey_(r.value);
    this->keyed_.setCurrentKey(key_);
    if (isLate(r.timestamp)) {
      late(r, rightLate_, !spec_.rightLateTag.empty());
      return;
    }
    addToBuffer(*right_, r.value, r.timestamp);
    // A right element at t joins the left elements in [t - upper, t - lower].
    const int64_t from = saturatingSub(r.timestamp, spec_.upperBound);
    const int64_t to = saturatingSub(r.timestamp, spec_.lowerBound);
    for (auto it = left_->iterator(); it->hasNext();) {
      auto [ts, entries] = it->next();
      if (ts < from || ts > to) continue;
      for (const auto& e : entries) collect(e.first, r.value, ts, r.timestamp);
    }
    const int64_t cleanup =
        spec_.lowerBound < 0 ? saturatingSub(r.timestamp, spec_.lowerBound) : r.timestamp;
    timers_.registerEventTimeTimer(key_, kCleanupRight, cleanup);
  }

  // For tests and snapshots.
  InternalTimerService<K, uint8_t>& timerService() { return timers_; }

 private:
  struct Ctx final : ProcessContextImpl<typename ProcessJoinFunction<A, B, OUT>::Context> {
    int64_t getLeftTimestamp() const override { return left; }
    int64_t getRightTimestamp() const override { return right; }
    int64_t getTimestamp() const override { return result; }
    int64_t left = 0;
    int64_t right = 0;
    int64_t result = 0;
  };

  template <class T>
  Output<T>* lateOutput(const std::string& tag) {
    if (tag.empty()) return nullptr;
    OutputBase* base = this->context().sideOutput(tag);
    if (base == nullptr) return nullptr;
    auto* typed = dynamic_cast<Output<T>*>(base);
    if (typed == nullptr) {
      throw SluiceException("side output '" + tag +
                            "' is used with two different types; an OutputTag id names one type");
    }
    return typed;
  }

  template <class T>
  void checkTimestamp(const StreamRecord<T>& r, const char* side) const {
    if (!r.hasTimestamp || r.timestamp == kMinTimestamp) {
      throw SluiceException(std::string("interval join: an element of the ") + side +
                            " input has no timestamp; elements used in interval joins need "
                            "meaningful timestamps (use assignTimestampsAndWatermarks)");
    }
  }
  bool isLate(int64_t timestamp) const { return timestamp < timers_.currentWatermark(); }
  template <class T>
  void late(const StreamRecord<T>& r, Output<T>* out, bool hasTag) {
    if (out != nullptr) {
      out->collect(r);
      return;
    }
    if (hasTag) {
      // A late-data tag nobody reads: dropped like any unread side output.
      this->context().countDroppedRecord();
      return;
    }
    this->context().incrementCounter("numLateRecordsDropped", 1);
    this->context().countDroppedRecord();
  }

  template <class T>
  static void addToBuffer(Buffer<T>& buffer, const T& value, int64_t timestamp) {
    std::optional<std::vector<std::pair<T, bool>>> entries = buffer.get(timestamp);
    if (!entries) entries.emplace();
    entries->emplace_back(value, false);
    buffer.put(timestamp, *entries);
  }

  void collect(const A& left, const B& right, int64_t leftTs, int64_t rightTs) {
    const int64_t ts = std::max(leftTs, rightTs);
    ctx_.left = leftTs;
    ctx_.right = rightTs;
    ctx_.result = ts;
    ctx_.setCurrent(true, ts);
    collector_.setTimestampFrom(true, ts);
    this->f_.processElement(left, right, ctx_, collector_);
  }

  void onEventTime(const Timer& t) {
    this->keyed_.setCurrentKey(t.key);
    if (t.ns == kCleanupLeft) {
      left_->remove(spec_.upperBound <= 0 ? t.timestamp : t.timestamp - spec_.upperBound);
    } else {
      right_->remove(spec_.lowerBound <= 0 ? t.timestamp + spec_.lowerBound : t.timestamp);
    }
  }

  KSA leftKey_;
  KSB rightKey_;
  IntervalJoinSpec spec_;
  Output<OUT>* downstream_ = nullptr;
  TimerFiringOutput<OUT, InternalTimerService<K, uint8_t>> watermarks_;
  Buffer<A>* left_ = nullptr;
  Buffer<B>* right_ = nullptr;
  Output<A>* leftLate_ = nullptr;
  Output<B>* rightLate_ = nullptr;
  InternalTimerService<K, uint8_t> timers_;
  K key_{};
  Ctx ctx_;
  TimestampedCollector<OUT> collector_;
};

}  // namespace internal

// keyedA.intervalJoin(keyedB).between(lower, upper): the configured join.
// Bounds are inclusive unless made exclusive; the left element at time t
// joins right elements at [t + lower, t + upper].
template <class IN1, class IN2, class K, class KS1, class KS2>
class IntervalJoined {
 public:
  IntervalJoined(KeyedStream<IN1, K, KS1> left, KeyedStream<IN2, K, KS2> right, int64_t lower,
                 int64_t upper)
      : left_(std::move(left)), right_(std::move(right)), lower_(lower), upper_(upper) {}

  // Excludes t + lower itself.
  IntervalJoined& lowerBoundExclusive() {
    lowerInclusive_ = false;
    return *this;
  }
  // Excludes t + upper itself.
  IntervalJoined& upperBoundExclusive() {
    upperInclusive_ = false;
    return *this;
  }
  // Late left/right elements (behind the watermark) go to `tag` instead of
  // being dropped; read them with result.getSideOutput(tag).
  IntervalJoined& sideOutputLeftLateData(const OutputTag<IN1>& tag) {
    leftLateTag_ = tag.getId();
    return *this;
  }
  IntervalJoined& sideOutputRightLateData(const OutputTag<IN2>& tag) {
    rightLateTag_ = tag.getId();
    return *this;
  }

  // f: an object of a class derived from ProcessJoinFunction<IN1, IN2, OUT>.
  template <class F>
  auto process(F f) const {
    if constexpr (requires { typename F::OutputType; } &&
                  std::derived_from<F, ProcessJoinFunction<IN1, IN2, typename F::OutputType>>) {
      using OUT = typename F::OutputType;
      using Op = internal::IntervalJoinOperator<K, IN1, IN2, OUT, F, KS1, KS2>;
      internal::IntervalJoinSpec spec;
      // As Flink: move exclusive bounds inwards once, so the operator only
      // deals with inclusive ones.
      spec.lowerBound = lowerInclusive_ ? lower_ : internal::saturatingAdd(lower_, 1);
      spec.upperBound = upperInclusive_ ? upper_ : internal::saturatingSub(upper_, 1);
      spec.leftLateTag = leftLateTag_;
      spec.rightLateTag = rightLateTag_;
      KS1 leftKey = left_.getKeySelector();
      KS2 rightKey = right_.getKeySelector();
      return internal::addTwoInputOperator<OUT>(
          "intervalJoin", left_, right_, "Interval Join", [f, leftKey, rightKey, spec] {
            return internal::makeOwned<Op>(f, leftKey, rightKey, spec);
          });
    } else {
      static_assert(internal::kAlwaysFalse<F>,
                    "intervalJoin(...).between(...).process(f) accepts an object of a class "
                    "derived from sluice::ProcessJoinFunction<IN1, IN2, OUT> (IN1 the left "
                    "stream's element type, IN2 the right's)");
      return 0;
    }
  }

 private:
  KeyedStream<IN1, K, KS1> left_;
  KeyedStream<IN2, K, KS2> right_;
  int64_t lower_;
  int64_t upper_;
  bool lowerInclusive_ = true;
  bool upperInclusive_ = true;
  std::string leftLateTag_;
  std::string rightLateTag_;
};

// keyedA.intervalJoin(keyedB): choose the bounds with between().
template <class IN1, class IN2, class K, class KS1, class KS2>
class IntervalJoin {
 public:
  IntervalJoin(KeyedStream<IN1, K, KS1> left, KeyedStream<IN2, K, KS2> right)
      : left_(std::move(left)), right_(std::move(right)) {
    internal::requireSameEnvironment("intervalJoin", left_.environmentState().get(),
                                     right_.environmentState().get());
  }
  // Durations (e.g. std::chrono::milliseconds(-5), seconds(2)), in whole
  // milliseconds; lower may be negative; lower <= upper.
  template <class R1, class P1, class R2, class P2>
  IntervalJoined<IN1, IN2, K, KS1, KS2> between(std::chrono::duration<R1, P1> lower,
                                                std::chrono::duration<R2, P2> upper) const {
    int64_t lo = internal::toMillis(lower);
    int64_t hi = internal::toMillis(upper);
    if (lo > hi) {
      throw SluiceException(
          "intervalJoin.between(lower, upper): lower must not be above upper, "
          "got lower = " +
          std::to_string(lo) + " ms, upper = " + std::to_string(hi) + " ms");
    }
    return IntervalJoined<IN1, IN2, K, KS1, KS2>(left_, right_, lo, hi);
  }

 private:
  KeyedStream<IN1, K, KS1> left_;
  KeyedStream<IN2, K, KS2> right_;
};

// ---------------------------------------------------------------------------
// The DataStream / KeyedStream members declared in datastream.h

template <class T>
template <class T2>
auto DataStream<T>::join(const DataStream<T2>& other) const {
  return JoinedStreams<T, T2>(*this, other);
}

template <class T>
template <class T2>
auto DataStream<T>::coGroup(const DataStream<T2>& other) const {
  return CoGroupedStreams<T, T2>(*this, other);
}

template <class T, class K, class KS>
template <class T2, class K2, class KS2>
auto KeyedStream<T, K, KS>::intervalJoin(const KeyedStream<T2, K2, KS2>& other) const {
  static_assert(std::is_same_v<K, K2>,
                "intervalJoin: both keyed streams must have the same key type (keyBy selectors "
                "returning the same type)");
  if constexpr (std::is_same_v<K, K2>) {
    return IntervalJoin<T, T2, K, KS, KS2>(*this, other);
  } else {
    return 0;
  }
}

}  // namespace sluice
