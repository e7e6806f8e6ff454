// The broadcast state pattern, as in Flink: one low-volume stream (rules,
// patterns, configuration) is broadcast to every subtask of an operator and
// kept there in broadcast state; the operator's other input, keyed or not,
// is evaluated against it.
//
//   MapStateDescriptor<std::string, Rule> rulesDesc("rules");
//   BroadcastStream<Rule> rules = ruleStream.broadcast(rulesDesc);
//   events.keyBy(&Event::user)
//       .connect(rules)
//       .process(MyKeyedBroadcastFunction());   // KeyedBroadcastProcessFunction<K, Event, Rule,
//       OUT>
//
// - `stream.broadcast(desc1, desc2, ...)` declares the broadcast states (a
//   MapStateDescriptor each, distinct names) and sends every element of
//   `stream` to every subtask of the connected operator.
// - processBroadcastElement() sees each broadcast element with read-write
//   access to the broadcast states; processElement() sees the other input's
//   elements with read-only access. Every subtask must update its broadcast
//   state the same way (depend only on the broadcast element and the state),
//   so that all copies stay identical: nothing else keeps them in sync.
// - There is no order between the two inputs: an element may be processed
//   before or after a broadcast element that was produced earlier.
// - Keyed variant: keyed state (getRuntimeContext().getState(...)) is scoped
//   to the current element's key in processElement(). processBroadcastElement()
//   has no current key; it reaches keyed state only through
//   ctx.applyToKeyedState(desc, fn), which visits every key that has state in
//   `desc`'s state. Keyed state used outside that call throws.
// - Broadcast states are operator state (sluice/state/operator_state.h,
//   BROADCAST mode): snapshotted with the operator, and restored to every
//   subtask, at any parallelism. Functions may also implement
//   CheckpointedFunction for operator state of their own.
//
// Threading: every call of one function copy happens on its task thread.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <sluice/checkpointed_function.h>
#include <sluice/core/clock.h>
#include <sluice/core/owned.h>
#include <sluice/datastream.h>
#include <sluice/functions.h>
#include <sluice/internal/keyed_state.h>
#include <sluice/internal/keyed_state_handler.h>
#include <sluice/internal/operators.h>
#include <sluice/state/operator_state.h>
#include <sluice/state/state.h>
#include <sluice/streaming_runtime_context.h>

namespace sluice {

namespace internal {

// The broadcast state descriptors of one BroadcastStream, type-erased: each
// can register its state with an operator's backend.
class BroadcastStateDeclarations {
 public:
  template <class K, class V>
  void add(const MapStateDescriptor<K, V>& desc) {
    for (const Declaration& d : declarations_) {
      if (d.name == desc.getName()) {
        throw SluiceException("broadcast(...): two descriptors are named '" + desc.getName() +
                              "'; each broadcast state needs its own name");
      }
    }
    if (desc.isTtlEnabled()) {
      throw SluiceException("broadcast(...): broadcast state '" + desc.getName() +
                            "' has time-to-live enabled; time-to-live applies to keyed state only");
    }
    declarations_.push_back(Declaration{desc.getName(), [desc](OperatorStateBackend& backend) {
                                          backend.getBroadcastState(desc);
                                        }});
  }

  // Registers every declared state (restoring it when the backend holds
  // restored data), so states are checked against a snapshot at startup.
  void registerAll(OperatorStateBackend& backend) const {
    for (const Declaration& d : declarations_) d.registerState(backend);
  }

  bool declares(std::string_view name) const {
    for (const Declaration& d : declarations_) {
      if (d.name == name) return true;
    }
    return false;
  }

  [[noreturn]] void failUndeclared(const std::string& name, const std::string& operatorName) const {
    std::string declared;
    for (const Declaration& d : declarations_) {
      declared += (declared.empty() ? "'" : ", '") + d.name + "'";
    }
    throw SluiceException("operator '" + operatorName + "': broadcast state '" + name +
                          "' does not exist. Check for typos in the state descriptor, or pass "
                          "it to broadcast(...) (declared: " +
                          declared + ")");
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const Declaration& d : declarations_) out.push_back(d.name);
    return out;
  }

 private:
  struct Declaration {
    std::string name;
    std::function<void(OperatorStateBackend&)> registerState;
  };
  std::vector<Declaration> declarations_;
};

// Typed access to the declared broadcast states of one operator instance.
class BroadcastStateAccess {
 public:
  void init(const BroadcastStateDeclarations* declarations, OperatorStateBackend* backend) {
    declarations_ = declarations;
    backend_ = backend;
  }
  template <class K, class V>
  BroadcastState<K, V>& get(const MapStateDescriptor<K, V>& desc) {
    if (!declarations_->declares(desc.getName())) {
      declarations_->failUndeclared(desc.getName(), backend_->operatorName());
    }
    return backend_->getBroadcastState(desc);
  }

 private:
  const BroadcastStateDeclarations* declarations_ = nullptr;
  OperatorStateBackend* backend_ = nullptr;
};

// The state a keyed state descriptor names, as the user-level type.
template <class T>
ValueState<T>& keyedStateFor(KeyedStateBackend& b, const ValueStateDescriptor<T>& d) {
  return getOrCreateValueState<VoidNamespace>(b, d);
}
template <class T>
ListState<T>& keyedStateFor(KeyedStateBackend& b, const ListStateDescriptor<T>& d) {
  return getOrCreateListState<VoidNamespace>(b, d);
}
template <class UK, class UV>
MapState<UK, UV>& keyedStateFor(KeyedStateBackend& b, const MapStateDescriptor<UK, UV>& d) {
  return getOrCreateMapState<VoidNamespace>(b, d);
}
template <class T>
ReducingState<T>& keyedStateFor(KeyedStateBackend& b, const ReducingStateDescriptor<T>& d) {
  return getOrCreateReducingState<VoidNamespace>(b, d);
}
template <class IN, class ACC, class OUT>
AggregatingState<IN, OUT>& keyedStateFor(KeyedStateBackend& b,
                                         const AggregatingStateDescriptor<IN, ACC, OUT>& d) {
  return getOrCreateAggregatingState<VoidNamespace>(b, d);
}

template <class D>
concept KeyedStateDescriptor = requires(KeyedStateBackend& b, const D& d) {
  keyedStateFor(b, d);
};

// Runs applyToKeyedState(): makes every key with state in the descriptor's
// state current in turn, then restores the previous current key.
template <class KS>
class KeyedStateVisitor {
 public:
  void init(KeyedStateBackend* backend, StreamingRuntimeContext* runtimeContext) {
    backend_ = backend;
    runtimeContext_ = runtimeContext;
  }

  template <class D, class Fn>
  void apply(const D& desc, Fn& fn) {
    KeyedStateBackend& b = *backend_;
    auto& state = keyedStateFor(b, desc);
    using S = std::remove_reference_t<decltype(state)>;
    constexpr bool kCallable = std::invocable<Fn&, const KS&, S&>;
    constexpr bool kProcessObject = requires(Fn & f, const KS& k, S& s) { f.process(k, s); };
    if constexpr (!kCallable && !kProcessObject) {
      static_assert(kAlwaysFalse<Fn>,
                    "applyToKeyedState(desc, fn): fn must be callable as fn(const KS& key, S& "
                    "state) (or have process(const KS&, S&)), where KS is the function's key type "
                    "and S the state type of the descriptor: ValueState<T> for "
                    "ValueStateDescriptor<T>, ListState<T>, MapState<UK, UV>, ReducingState<T>, "
                    "AggregatingState<IN, OUT>");
    } else {
      visit(b, desc.getName(), [&](const KS& k) {
        if constexpr (kCallable) {
          fn(k, state);
        } else {
          fn.process(k, state);
        }
      });
    }
  }

 private:
  template <class Visit>
  void visit(KeyedStateBackend& b, const std::string& stateName, Visit&& visitKey) {
    // The previous current key and context, put back however fn returns.
    struct Restore {
      KeyedStateBackend& backend;
      StreamingRuntimeContext& context;
      KeyedStateBackend* previousContextBackend;
      int32_t group;
      std::string key;
      ~Restore() {
        if (group >= 0) {
          backend.setCurrentKey(reinterpret_cast<const uint8_t*>(key.data()), key.size(), group);
        }
        context.setKeyedStateBackend(previousContextBackend);
      }
    } restore{b, *runtimeContext_, runtimeContext_->keyedStateBackend(), b.currentKeyGroup(),
              b.currentKeyGroup() >= 0 ? std::string(b.currentKey()) : std::string()};
    runtimeContext_->setKeyedStateBackend(&b);

    b.forEachKey(stateName, [&](std::string_view key, int32_t group) {
      b.setCurrentKey(reinterpret_cast<const uint8_t*>(key.data()), key.size(), group);
      visitKey(KeyedStateHandler<KS>::deserializeKey(key));
    });
  }

  KeyedStateBackend* backend_ = nullptr;
  StreamingRuntimeContext* runtimeContext_ = nullptr;
};

// What both contexts of both function kinds share: BaseContext (timestamp,
// side outputs) plus processing time.
class BroadcastContextBase : public BaseContext {
 public:
  // The operator's processing time, in milliseconds since the epoch.
  int64_t currentProcessingTime() const { return clock_->currentTimeMillis(); }

 protected:
  BroadcastStateAccess* access_ = nullptr;
  const Clock* clock_ = nullptr;
};

}  // namespace internal

// ---------------------------------------------------------------------------
// Functions

// Processes a non-keyed stream connected to a broadcast stream.
template <class IN1, class IN2, class OUT>
class BroadcastProcessFunction : public RichFunction {
 public:
  using InputType1 = IN1;
  using InputType2 = IN2;
  using OutputType = OUT;

  // For processElement: broadcast state read-only. Valid during the call.
  class ReadOnlyContext : public internal::BroadcastContextBase {
   public:
    // The declared broadcast state `desc` names; throws when no descriptor
    // of that name was passed to broadcast(...).
    template <class K, class V>
    ReadOnlyBroadcastState<K, V>& getBroadcastState(const MapStateDescriptor<K, V>& desc) {
      return this->access_->get(desc);
    }
  };
  // For processBroadcastElement: broadcast state read-write.
  class Context : public internal::BroadcastContextBase {
   public:
    template <class K, class V>
    BroadcastState<K, V>& getBroadcastState(const MapStateDescriptor<K, V>& desc) {
      return this->access_->get(desc);
    }
  };

  virtual void processElement(const IN1& value, ReadOnlyContext& ctx, Collector<OUT>& out) = 0;
  virtual void processBroadcastElement(const IN2& value, Context& ctx, Collector<OUT>& out) = 0;
};

// Processes a keyed stream (key type KS) connected to a broadcast stream.
template <class KS, class IN1, class IN2, class OUT>
class KeyedBroadcastProcessFunction : public RichFunction {
 public:
  using KeyType = KS;
  using InputType1 = IN1;
  using InputType2 = IN2;
  using OutputType = OUT;

  class ReadOnlyContext : public internal::BroadcastContextBase {
   public:
    template <class K, class V>
    ReadOnlyBroadcastState<K, V>& getBroadcastState(const MapStateDescriptor<K, V>& desc) {
      return this->access_->get(desc);
    }
    // The key of the element being processed.
    virtual const KS& getCurrentKey() const = 0;
  };

  class Context : public internal::BroadcastContextBase {
   public:
    template <class K, class V>
    BroadcastState<K, V>& getBroadcastState(const MapStateDescriptor<K, V>& desc) {
      return this->access_->get(desc);
    }
    // Calls fn(key, state) for every key of this subtask that has state in
    // the keyed state `desc` names (ValueStateDescriptor, ListStateDescriptor,
    // MapStateDescriptor, ReducingStateDescriptor, AggregatingStateDescriptor),
    // with that key current: `state` and getRuntimeContext() state refer to
    // it. fn may read, update and clear the state. Keys are visited in no
    // particular order; the set of keys is fixed when the call starts.
    template <class D, class Fn>
    void applyToKeyedState(const D& desc, Fn&& fn) {
      if constexpr (internal::KeyedStateDescriptor<D>) {
        visitor_->apply(desc, fn);
      } else {
        static_assert(internal::kAlwaysFalse<D>,
                      "applyToKeyedState(desc, fn): desc must be a keyed state descriptor "
                      "(ValueStateDescriptor, ListStateDescriptor, MapStateDescriptor, "
                      "ReducingStateDescriptor or AggregatingStateDescriptor)");
      }
    }

   protected:
    internal::KeyedStateVisitor<KS>* visitor_ = nullptr;
  };

  virtual void processElement(const IN1& value, ReadOnlyContext& ctx, Collector<OUT>& out) = 0;
  virtual void processBroadcastElement(const IN2& value, Context& ctx, Collector<OUT>& out) = 0;
};

// ---------------------------------------------------------------------------
// Operators

namespace internal {

// A function context with access to the broadcast states.
template <class Base>
class BroadcastContextImpl : public ProcessContextImpl<Base> {
 public:
  void init(OperatorContext* context, BroadcastStateAccess* access) {
    this->setContext(context);
    this->access_ = access;
    this->clock_ = &context->clock();
  }
};

// The operator of DataStream<IN1>::connect(BroadcastStream<IN2>).process(f):
// input 0 is the non-broadcast stream, input 1 the broadcast stream.
template <class IN1, class IN2, class OUT, class F>
class CoBroadcastWithNonKeyedOperator final : public TwoInputOperator<IN1, IN2, OUT> {
 public:
  CoBroadcastWithNonKeyedOperator(F f, std::shared_ptr<const BroadcastStateDeclarations> decls)
      : f_(std::move(f)), declarations_(std::move(decls)) {}

  void initializeState(const OperatorStateRestore* restore) override {
    functionState_.initializeBackend(this->context(), restore);
    declarations_->registerAll(functionState_.backend());
    functionState_.initializeFunction(f_);
  }
  OperatorStateSnapshot snapshotState(int64_t checkpointId) override {
    OperatorStateSnapshot s;
    s.operatorState = functionState_.snapshot(f_, checkpointId);
    return s;
  }
  void open() override {
    access_.init(declarations_.get(), &functionState_.backend());
    readOnlyCtx_.init(&this->context(), &access_);
    ctx_.init(&this->context(), &access_);
    collector_.setOutput(&this->output());
    openFunction(f_, this->streamingContext());
  }
  void close() override { closeFunction(f_); }

  void processElement1(const StreamRecord<IN1>& r) override {
    readOnlyCtx_.setCurrent(r.hasTimestamp, r.timestamp);
    collector_.setTimestampFrom(r.hasTimestamp, r.timestamp);
    f_.processElement(r.value, readOnlyCtx_, collector_);
  }
  void processElement2(const StreamRecord<IN2>& r) override {
    ctx_.setCurrent(r.hasTimestamp, r.timestamp);
    collector_.setTimestampFrom(r.hasTimestamp, r.timestamp);
    f_.processBroadcastElement(r.value, ctx_, collector_);
  }

  // For tests: the function copy of this subtask.
  F& function() { return f_; }

 private:
  using Fn = BroadcastProcessFunction<IN1, IN2, OUT>;
  F f_;
  std::shared_ptr<const BroadcastStateDeclarations> declarations_;
  FunctionStateHandler functionState_;
  BroadcastStateAccess access_;
  BroadcastContextImpl<typename Fn::ReadOnlyContext> readOnlyCtx_;
  BroadcastContextImpl<typename Fn::Context> ctx_;
  TimestampedCollector<OUT> collector_;
};

// The operator of KeyedStream<IN1, KS>::connect(BroadcastStream<IN2>).process(f).
template <class KS, class IN1, class IN2, class OUT, class F, class KeySelector>
class CoBroadcastWithKeyedOperator final : public TwoInputOperator<IN1, IN2, OUT> {
 public:
  CoBroadcastWithKeyedOperator(F f, KeySelector key,
                               std::shared_ptr<const BroadcastStateDeclarations> decls)
      : f_(std::move(f)), key_(std::move(key)), declarations_(std::move(decls)) {}

  void initializeState(const OperatorStateRestore* restore) override {
    keyed_.initialize(this->context(), restore);
    this->streamingContext().setKeyedStateBackend(&keyed_.backend());
    functionState_.initializeBackend(this->context(), restore);
    declarations_->registerAll(functionState_.backend());
    functionState_.initializeFunction(f_, &keyed_.backend());
  }
  OperatorStateSnapshot snapshotState(int64_t checkpointId) override {
    OperatorStateSnapshot s;
    s.keyedState = keyed_.snapshot(checkpointId);
    s.operatorState = functionState_.snapshot(f_, checkpointId);
    return s;
  }
  void open() override {
    access_.init(declarations_.get(), &functionState_.backend());
    visitor_.init(&keyed_.backend(), &this->streamingContext());
    readOnlyCtx_.init(&this->context(), &access_);
    ctx_.init(&this->context(), &access_);
    ctx_.setVisitor(&visitor_);
    collector_.setOutput(&this->output());
    openFunction(f_, this->streamingContext());
  }
  void close() override {
    closeFunction(f_);
    keyed_.dispose();
  }

  void processElement1(const StreamRecord<IN1>& r) override {
    readOnlyCtx_.key = key_(r.value);
    keyed_.setCurrentKey(readOnlyCtx_.key);
    readOnlyCtx_.setCurrent(r.hasTimestamp, r.timestamp);
    collector_.setTimestampFrom(r.hasTimestamp, r.timestamp);
    f_.processElement(r.value, readOnlyCtx_, collector_);
  }
  void processElement2(const StreamRecord<IN2>& r) override {
    ctx_.setCurrent(r.hasTimestamp, r.timestamp);
    collector_.setTimestampFrom(r.hasTimestamp, r.timestamp);
    // No current key here: keyed state only through applyToKeyedState().
    StreamingRuntimeContext& rc = this->streamingContext();
    struct Reattach {
      StreamingRuntimeContext& rc;
      KeyedStateBackend* backend;
      ~Reattach() { rc.setKeyedStateBackend(backend); }
    } reattach{rc, rc.keyedStateBackend()};
    rc.detachKeyedState(
        "keyed state has no current key in processBroadcastElement; use "
        "ctx.applyToKeyedState(descriptor, function) to visit the state of every key");
    f_.processBroadcastElement(r.value, ctx_, collector_);
  }

  F& function() { return f_; }

 private:
  using Fn = KeyedBroadcastProcessFunction<KS, IN1, IN2, OUT>;
  struct ReadOnlyCtx final : BroadcastContextImpl<typename Fn::ReadOnlyContext> {
    const KS& getCurrentKey() const override { return key; }
    KS key{};
  };
  struct Ctx final : BroadcastContextImpl<typename Fn::Context> {
    void setVisitor(KeyedStateVisitor<KS>* visitor) { this->visitor_ = visitor; }
  };

  F f_;
  KeySelector key_;
  std::shared_ptr<const BroadcastStateDeclarations> declarations_;
  KeyedStateHandler<KS> keyed_;
  FunctionStateHandler functionState_;
  BroadcastStateAccess access_;
  KeyedStateVisitor<KS> visitor_;
  ReadOnlyCtx readOnlyCtx_;
  Ctx ctx_;
  TimestampedCollector<OUT> collector_;
};

template <class D>
struct IsMapStateDescriptor : std::false_type {};
template <class K, class V>
struct IsMapStateDescriptor<MapStateDescriptor<K, V>> : std::true_type {};

}  // namespace internal

// ---------------------------------------------------------------------------
// Streams

// A stream whose elements go to every subtask of the operator it is
// connected to, with the broadcast states it declares. Created by
// DataStream<T>::broadcast(descriptors...); connect it with connect().
template <class T>
class BroadcastStream {
 public:
  BroadcastStream(DataStream<T> broadcasted,
                  std::shared_ptr<const internal::BroadcastStateDeclarations> declarations)
      : stream_(std::move(broadcasted)), declarations_(std::move(declarations)) {}

  // The stream with broadcast partitioning.
  const DataStream<T>& getBroadcastedStream() const { return stream_; }
  // Names of the declared broadcast states, in declaration order.
  std::vector<std::string> getBroadcastStateDescriptorNames() const {
    return declarations_->names();
  }
  const std::shared_ptr<const internal::BroadcastStateDeclarations>& declarations() const {
    return declarations_;
  }

 private:
  DataStream<T> stream_;
  std::shared_ptr<const internal::BroadcastStateDeclarations> declarations_;
};

// A non-keyed stream connected to a broadcast stream.
template <class IN1, class IN2>
class BroadcastConnectedStream {
 public:
  BroadcastConnectedStream(DataStream<IN1> first, BroadcastStream<IN2> broadcast)
      : first_(std::move(first)), broadcast_(std::move(broadcast)) {
    internal::requireSameEnvironment("connect", first_.environmentState().get(),
                                     broadcast_.getBroadcastedStream().environmentState().get());
  }

  // A BroadcastProcessFunction<IN1, IN2, OUT> subclass object.
  template <class F>
  auto process(F f) const {
    if constexpr (requires { typename F::OutputType; } &&
                  std::derived_from<F,
                                    BroadcastProcessFunction<IN1, IN2, typename F::OutputType>>) {
      using OUT = typename F::OutputType;
      auto decls = broadcast_.declarations();
      return internal::addTwoInputOperator<OUT>(
          "connect", first_, broadcast_.getBroadcastedStream(), "Co-Process-Broadcast", [f, decls] {
            return internal::makeOwned<internal::CoBroadcastWithNonKeyedOperator<IN1, IN2, OUT, F>>(
                f, decls);
          });
    } else {
      static_assert(internal::kAlwaysFalse<F>,
                    "BroadcastConnectedStream<IN1, IN2>::process(f) accepts an object of a class "
                    "derived from sluice::BroadcastProcessFunction<IN1, IN2, OUT> (IN1 the "
                    "non-broadcast stream's element type, IN2 the broadcast stream's); a "
                    "KeyedBroadcastProcessFunction needs a keyed stream: "
                    "stream.keyBy(...).connect(broadcastStream)");
      return *this;
    }
  }

  const DataStream<IN1>& getFirstInput() const { return first_; }
  const BroadcastStream<IN2>& getSecondInput() const { return broadcast_; }

 private:
  DataStream<IN1> first_;
  BroadcastStream<IN2> broadcast_;
};

// A keyed stream connected to a broadcast stream.
template <class IN1, class KS, class KeySelector, class IN2>
class KeyedBroadcastConnectedStream {
 public:
  KeyedBroadcastConnectedStream(KeyedStream<IN1, KS, KeySelector> first,
                                BroadcastStream<IN2> broadcast)
      : first_(std::move(first)), broadcast_(std::move(broadcast)) {
    internal::requireSameEnvironment("connect", first_.environmentState().get(),
                                     broadcast_.getBroadcastedStream().environmentState().get());
  }

  // A KeyedBroadcastProcessFunction<KS, IN1, IN2, OUT> subclass object.
  template <class F>
  auto process(F f) const {
    if constexpr (requires { typename F::OutputType; } &&
                  std::derived_from<
                      F, KeyedBroadcastProcessFunction<KS, IN1, IN2, typename F::OutputType>>) {
      using OUT = typename F::OutputType;
      auto decls = broadcast_.declarations();
      auto key = first_.getKeySelector();
      return internal::addTwoInputOperator<OUT>(
          "connect", first_, broadcast_.getBroadcastedStream(), "Co-Process-Broadcast-Keyed",
          [f, key, decls] {
            return internal::makeOwned<
                internal::CoBroadcastWithKeyedOperator<KS, IN1, IN2, OUT, F, KeySelector>>(f, key,
                                                                                           decls);
          });
    } else if constexpr (requires { typename F::OutputType; } &&
                         std::derived_from<
                             F, BroadcastProcessFunction<IN1, IN2, typename F::OutputType>>) {
      static_assert(internal::kAlwaysFalse<F>,
                    "KeyedStream::connect(broadcastStream).process(f): a BroadcastProcessFunction "
                    "can only be used on a non-keyed stream; derive from "
                    "sluice::KeyedBroadcastProcessFunction<KS, IN1, IN2, OUT> instead");
      return *this;
    } else {
      static_assert(internal::kAlwaysFalse<F>,
                    "KeyedStream::connect(broadcastStream).process(f) accepts an object of a class "
                    "derived from sluice::KeyedBroadcastProcessFunction<KS, IN1, IN2, OUT> (KS the "
                    "key type of keyBy, IN1 the keyed stream's element type, IN2 the broadcast "
                    "stream's)");
      return *this;
    }
  }

  const KeyedStream<IN1, KS, KeySelector>& getFirstInput() const { return first_; }
  const BroadcastStream<IN2>& getSecondInput() const { return broadcast_; }

 private:
  KeyedStream<IN1, KS, KeySelector> first_;
  BroadcastStream<IN2> broadcast_;
};

// ---------------------------------------------------------------------------
// The DataStream / KeyedStream members declared in datastream.h

template <class T>
template <class D, class... More>
BroadcastStream<T> DataStream<T>::broadcast(const D& descriptor, const More&... more) const {
  if constexpr (internal::IsMapStateDescriptor<D>::value &&
                (internal::IsMapStateDescriptor<More>::value && ...)) {
    auto declarations = std::make_shared<internal::BroadcastStateDeclarations>();
    declarations->add(descriptor);
    (declarations->add(more), ...);
    return BroadcastStream<T>(broadcast(), std::move(declarations));
  } else {
    static_assert(internal::kAlwaysFalse<D>,
                  "DataStream<T>::broadcast(descriptors...) accepts sluice::MapStateDescriptor<K, "
                  "V> objects, one per broadcast state");
    return BroadcastStream<T>(broadcast(), nullptr);
  }
}

template <class T>
template <class T2>
BroadcastConnectedStream<T, T2> DataStream<T>::connect(const BroadcastStream<T2>& broadcast) const {
  return BroadcastConnectedStream<T, T2>(*this, broadcast);
}

template <class T, class K, class KeySelector>
template <class T2>
KeyedBroadcastConnectedStream<T, K, KeySelector, T2> KeyedStream<T, K, KeySelector>::connect(
    const BroadcastStream<T2>& broadcast) const {
  return KeyedBroadcastConnectedStream<T, K, KeySelector, T2>(*this, broadcast);
}

}  // namespace sluice
