// User functions: the interfaces a job implements, named as in Flink.
//
// Every transformation accepts either a lambda of the right signature or an
// object of a class derived from the matching interface below (MapFunction,
// FlatMapFunction, ...). Each parallel subtask gets its own copy of the
// function object, so function classes must be copyable and must not share
// mutable state between copies.
//
// Rich functions (derived from RichFunction) get open() before the first
// element, close() after the last one (also after a failure), and a
// RuntimeContext that says which subtask they run in. All calls of one copy
// happen on one task thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include <sluice/core/runtime_context.h>
#include <sluice/core/status.h>
#include <sluice/graph/operator.h>
#include <sluice/streaming_runtime_context.h>
#include <sluice/timers.h>

namespace sluice {

// Receives the zero or more results of flatMap / process calls.
template <class T>
class Collector {
 public:
  virtual ~Collector() = default;
  virtual void collect(const T& value) = 0;
  virtual void collect(T&& value) { collect(static_cast<const T&>(value)); }
};

// Names a side output of type T. Two tags are the same side output when their
// ids are equal; the id must not be empty.
template <class T>
class OutputTag {
 public:
  using Type = T;
  explicit OutputTag(std::string id) : id_(std::move(id)) {
    if (id_.empty()) throw SluiceException("OutputTag id must not be empty");
  }
  const std::string& getId() const { return id_; }

 private:
  std::string id_;
};

class RichFunction {
 public:
  virtual ~RichFunction() = default;
  // Called once per subtask before the first element.
  virtual void open() {}
  // Called once per subtask after the last element, or after a failure.
  virtual void close() {}

  // Valid from open() until close() returns. Throws when called outside it.
  // Keyed state (getState, getListState, ...) is available on keyed streams.
  StreamingRuntimeContext& getRuntimeContext() const {
    if (runtimeContext_ == nullptr) {
      throw SluiceException("getRuntimeContext() is only available between open() and close()");
    }
    return *runtimeContext_;
  }
  void setRuntimeContext(StreamingRuntimeContext* context) { runtimeContext_ = context; }

 private:
  StreamingRuntimeContext* runtimeContext_ = nullptr;
};

template <class IN, class OUT>
class MapFunction {
 public:
  using InputType = IN;
  using OutputType = OUT;
  virtual ~MapFunction() = default;
  virtual OUT map(const IN& value) = 0;
};
template <class IN, class OUT>
class RichMapFunction : public MapFunction<IN, OUT>, public RichFunction {};

template <class IN, class OUT>
class FlatMapFunction {
 public:
  using InputType = IN;
  using OutputType = OUT;
  virtual ~FlatMapFunction() = default;
  virtual void flatMap(const IN& value, Collector<OUT>& out) = 0;
};
template <class IN, class OUT>
class RichFlatMapFunction : public FlatMapFunction<IN, OUT>, public RichFunction {};

template <class T>
class FilterFunction {
 public:
  using InputType = T;
  virtual ~FilterFunction() = default;
  virtual bool filter(const T& value) = 0;
};
template <class T>
class RichFilterFunction : public FilterFunction<T>, public RichFunction {};

template <class T>
class ReduceFunction {
 public:
  using InputType = T;
  virtual ~ReduceFunction() = default;
  // Combines the running result `value1` with the new element `value2`.
  virtual T reduce(const T& value1, const T& value2) = 0;
};
template <class T>
class RichReduceFunction : public ReduceFunction<T>, public RichFunction {};

// Chooses the partition of a key for partitionCustom().
template <class K>
class Partitioner {
 public:
  virtual ~Partitioner() = default;
  virtual int partition(const K& key, int numPartitions) = 0;
};

namespace internal {

// Side outputs of one operator instance: looks each tag up once, then emits
// directly into the consumers' Output<X>.
class SideOutputs {
 public:
  void setContext(OperatorContext* context) { context_ = context; }

  template <class X>
  void emit(const std::string& tagId, const X& value, bool hasTimestamp, int64_t timestamp) {
    Output<X>* out = lookup<X>(tagId);
    if (out == nullptr) {
      context_->countDroppedRecord();  // nothing consumes this tag
      return;
    }
    StreamRecord<X> r(value);
    r.hasTimestamp = hasTimestamp;
    r.timestamp = timestamp;
    out->collect(std::move(r));
  }

 private:
  template <class X>
  Output<X>* lookup(const std::string& tagId) {
    for (auto& e : cache_) {
      if (e.id == tagId) {
        if (*e.type != typeid(X)) mismatch(tagId);
        return static_cast<Output<X>*>(e.output);
      }
    }
    OutputBase* base = context_->sideOutput(tagId);
    if (base != nullptr && dynamic_cast<Output<X>*>(base) == nullptr) mismatch(tagId);
    cache_.push_back({tagId, &typeid(X), base});
    return static_cast<Output<X>*>(base);
  }
  [[noreturn]] static void mismatch(const std::string& tagId) {
    throw SluiceException("side output '" + tagId +
                          "' is used with two different types; an OutputTag id names one type");
  }

  struct Entry {
    std::string id;
    const std::type_info* type;
    OutputBase* output;
  };
  OperatorContext* context_ = nullptr;
  std::vector<Entry> cache_;
};

}  // namespace internal

// The part of a process-function context that every variant shares. Valid
// only during the call it is passed to.
class BaseContext {
 public:
  virtual ~BaseContext() = default;
  // The current element's timestamp, or nullopt when it has none.
  virtual std::optional<int64_t> timestamp() const = 0;

  // Emits `value` to the side output `tag`, with the current timestamp. A tag
  // that no getSideOutput() consumes counts the record in numRecordsDropped.
  template <class X>
  void output(const OutputTag<X>& tag, const X& value) {
    auto ts = timestamp();
    sideOutputs_->emit<X>(tag.getId(), value, ts.has_value(), ts.value_or(kMinTimestamp));
  }

 protected:
  internal::SideOutputs* sideOutputs_ = nullptr;
};

template <class IN, class OUT>
class ProcessFunction : public RichFunction {
 public:
  using InputType = IN;
  using OutputType = OUT;
  class Context : public BaseContext {
   public:
    // Reads time; registering a timer throws, since timers need a key
    // (Flink: "Setting timers is only supported on a keyed streams.").
    virtual TimerService& timerService() = 0;
  };
  virtual void processElement(const IN& value, Context& ctx, Collector<OUT>& out) = 0;
};

// Processes a keyed stream element by element, with keyed state and timers.
// onTimer runs when a timer registered through ctx.timerService() fires, with
// the timer's key current (state calls see that key's state).
template <class K, class IN, class OUT>
class KeyedProcessFunction : public RichFunction {
 public:
  using KeyType = K;
  using InputType = IN;
  using OutputType = OUT;
  class Context : public BaseContext {
   public:
    virtual const K& getCurrentKey() const = 0;
    virtual TimerService& timerService() = 0;
  };
  class OnTimerContext : public Context {
   public:
    virtual TimeDomain timeDomain() const = 0;
  };
  virtual void processElement(const IN& value, Context& ctx, Collector<OUT>& out) = 0;
  // `timestamp` is the timer's; outputs carry it as their timestamp.
  virtual void onTimer(int64_t timestamp, OnTimerContext& ctx, Collector<OUT>& out) {
    (void)timestamp;
    (void)ctx;
    (void)out;
  }
};

// Two keyed inputs with the same key type, processed together (Flink's
// KeyedCoProcessFunction): connect two KeyedStreams, or keyBy(key1, key2) on
// ConnectedStreams. Elements of both inputs with equal keys reach the same
// subtask and see the same keyed state and timers; onTimer runs with the
// timer's key current.
template <class K, class IN1, class IN2, class OUT>
class KeyedCoProcessFunction : public RichFunction {
 public:
  using KeyType = K;
  using OutputType = OUT;
  class Context : public BaseContext {
   public:
    virtual const K& getCurrentKey() const = 0;
    virtual TimerService& timerService() = 0;
  };
  class OnTimerContext : public Context {
   public:
    virtual TimeDomain timeDomain() const = 0;
  };
  virtual void processElement1(const IN1& value, Context& ctx, Collector<OUT>& out) = 0;
  virtual void processElement2(const IN2& value, Context& ctx, Collector<OUT>& out) = 0;
  // `timestamp` is the timer's; outputs carry it as their timestamp.
  virtual void onTimer(int64_t timestamp, OnTimerContext& ctx, Collector<OUT>& out) {
    (void)timestamp;
    (void)ctx;
    (void)out;
  }
};

template <class IN1, class IN2, class OUT>
class CoMapFunction {
 public:
  using OutputType = OUT;
  virtual ~CoMapFunction() = default;
  virtual OUT map1(const IN1& value) = 0;
  virtual OUT map2(const IN2& value) = 0;
};
template <class IN1, class IN2, class OUT>
class RichCoMapFunction : public CoMapFunction<IN1, IN2, OUT>, public RichFunction {};

template <class IN1, class IN2, class OUT>
class CoFlatMapFunction {
 public:
  using OutputType = OUT;
  virtual ~CoFlatMapFunction() = default;
  virtual void flatMap1(const IN1& value, Collector<OUT>& out) = 0;
  virtual void flatMap2(const IN2& value, Collector<OUT>& out) = 0;
};
template <class IN1, class IN2, class OUT>
class RichCoFlatMapFunction : public CoFlatMapFunction<IN1, IN2, OUT>, public RichFunction {};

template <class IN1, class IN2, class OUT>
class CoProcessFunction : public RichFunction {
 public:
  using OutputType = OUT;
  class Context : public BaseContext {};
  virtual void processElement1(const IN1& value, Context& ctx, Collector<OUT>& out) = 0;
  virtual void processElement2(const IN2& value, Context& ctx, Collector<OUT>& out) = 0;
};

}  // namespace sluice
