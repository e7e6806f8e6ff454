// User-facing state: descriptors, primitives and time-to-live, as in Flink.
//
// A keyed function obtains state from its runtime context with a descriptor:
//
//   ValueStateDescriptor<int64_t> countDesc("count");
//   ValueState<int64_t>& count = getRuntimeContext().getState(countDesc);
//   count.update(count.value().value_or(0) + 1);
//
// The state object is scoped to the key of the element being processed (and,
// inside window operators, to the window): every call reads or writes the
// entry of the current key. The same descriptor name always returns the same
// state object within one operator. Values are stored with the type's
// TypeSerializer (the hashmap backend keeps objects, RocksDB keeps bytes), so
// T must be Serializable and copyable.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sluice/core/serializer.h>
#include <sluice/core/status.h>

namespace sluice {

// The namespace of state that is not scoped by anything but the key.
struct VoidNamespace {
  bool operator==(const VoidNamespace&) const = default;
};

template <>
struct TypeSerializer<VoidNamespace> {
  static constexpr size_t kMinEncodedSize = 0;
  static void serialize(const VoidNamespace&, DataOutputView&) {}
  static void deserialize(VoidNamespace&, DataInputView&) {}
  static std::string schema() { return "void"; }
};

// ---------------------------------------------------------------------------
// Time to live

// When a state entry expires. Built with StateTtlConfig::newBuilder(ttl).
class StateTtlConfig {
 public:
  enum class UpdateType : uint8_t {
    kOnCreateAndWrite,  // the timestamp moves on create and on every write
    kOnReadAndWrite,    // ... and also on every read
  };
  enum class StateVisibility : uint8_t {
    kNeverReturnExpired,           // an expired entry reads as absent
    kReturnExpiredIfNotCleanedUp,  // an expired entry still present is returned
  };

  // Defined below: it holds a StateTtlConfig, complete only after this class.
  class Builder;
  static Builder newBuilder(std::chrono::milliseconds ttl);

  std::chrono::milliseconds getTtl() const { return ttl_; }
  UpdateType getUpdateType() const { return updateType_; }
  StateVisibility getStateVisibility() const { return visibility_; }
  bool cleanupFullSnapshotEnabled() const { return cleanupFullSnapshot_; }
  // On by default, as in Flink (background cleanup for RocksDB).
  bool cleanupInRocksdbCompactFilterEnabled() const { return cleanupInRocksdbCompactFilter_; }
  int64_t queryTimeAfterNumEntries() const { return queryTimeAfterNumEntries_; }

 private:
  std::chrono::milliseconds ttl_{0};
  UpdateType updateType_ = UpdateType::kOnCreateAndWrite;
  StateVisibility visibility_ = StateVisibility::kNeverReturnExpired;
  bool cleanupFullSnapshot_ = false;
  bool cleanupInRocksdbCompactFilter_ = true;
  int64_t queryTimeAfterNumEntries_ = 1000;
};

class StateTtlConfig::Builder {
 public:
  explicit Builder(std::chrono::milliseconds ttl) { config_.ttl_ = ttl; }
  Builder& setUpdateType(UpdateType t) {
    config_.updateType_ = t;
    return *this;
  }
  Builder& updateTtlOnCreateAndWrite() { return setUpdateType(UpdateType::kOnCreateAndWrite); }
  Builder& updateTtlOnReadAndWrite() { return setUpdateType(UpdateType::kOnReadAndWrite); }
  Builder& setStateVisibility(StateVisibility v) {
    config_.visibility_ = v;
    return *this;
  }
  Builder& neverReturnExpired() { return setStateVisibility(StateVisibility::kNeverReturnExpired); }
  Builder& returnExpiredIfNotCleanedUp() {
    return setStateVisibility(StateVisibility::kReturnExpiredIfNotCleanedUp);
  }
  // Expired entries are left out of full (canonical) snapshots.
  Builder& cleanupFullSnapshot() {
    config_.cleanupFullSnapshot_ = true;
    return *this;
  }
  // RocksDB: a compaction filter drops expired entries during compaction,
  // reading the clock again after every `queryTimeAfterNumEntries` entries.
  Builder& cleanupInRocksdbCompactFilter(int64_t queryTimeAfterNumEntries = 1000) {
    config_.cleanupInRocksdbCompactFilter_ = true;
    config_.queryTimeAfterNumEntries_ = queryTimeAfterNumEntries;
    return *this;
  }
  // No cleanup besides on access (and the explicitly enabled strategies).
  Builder& disableCleanupInBackground() {
    config_.cleanupInRocksdbCompactFilter_ = false;
    return *this;
  }
  Builder& setTtl(std::chrono::milliseconds ttl) {
    config_.ttl_ = ttl;
    return *this;
  }
  StateTtlConfig build() const {
    if (config_.ttl_.count() <= 0) {
      throw SluiceException("StateTtlConfig: the time to live must be positive, got " +
                            std::to_string(config_.ttl_.count()) + " ms");
    }
    return config_;
  }

 private:
  StateTtlConfig config_;
};

inline StateTtlConfig::Builder StateTtlConfig::newBuilder(std::chrono::milliseconds ttl) {
  return Builder(ttl);
}

// ---------------------------------------------------------------------------
// Primitives. All calls are scoped to the current key (and namespace).

template <class T>
class ValueState {
 public:
  virtual ~ValueState() = default;
  // The current key's value, or nullopt when it has none.
  virtual std::optional<T> value() = 0;
  virtual void update(const T& value) = 0;
  virtual void clear() = 0;
};

template <class T>
class ListState {
 public:
  virtual ~ListState() = default;
  // The current key's elements in insertion order; empty when it has none.
  virtual std::vector<T> get() = 0;
  virtual void add(const T& value) = 0;
  virtual void addAll(const std::vector<T>& values) = 0;
  // Replaces the elements; an empty vector clears the state.
  virtual void update(const std::vector<T>& values) = 0;
  virtual void clear() = 0;
};

// Iterates the entries of the current key's map, Java-style:
//   for (auto it = state.iterator(); it->hasNext();) {
//     auto [k, v] = it->next();
//     if (...) it->remove();   // removes the entry next() returned
//   }
// Entries put or removed through the state while iterating may or may not be
// seen; removing through the iterator is always safe.
template <class UK, class UV>
class MapStateIterator {
 public:
  virtual ~MapStateIterator() = default;
  virtual bool hasNext() = 0;
  virtual std::pair<UK, UV> next() = 0;
  virtual void remove() = 0;
};

template <class UK, class UV>
class MapState {
 public:
  virtual ~MapState() = default;
  virtual std::optional<UV> get(const UK& key) = 0;
  virtual void put(const UK& key, const UV& value) = 0;
  virtual void remove(const UK& key) = 0;
  virtual bool contains(const UK& key) = 0;
  virtual bool isEmpty() = 0;
  virtual void clear() = 0;
  virtual std::unique_ptr<MapStateIterator<UK, UV>> iterator() = 0;

  template <class Range>
  void putAll(const Range& entries) {
    for (const auto& [k, v] : entries) put(k, v);
  }
  // Copies of all entries, in no particular order.
  std::vector<std::pair<UK, UV>> entries() {
    std::vector<std::pair<UK, UV>> out;
    for (auto it = iterator(); it->hasNext();) out.push_back(it->next());
    return out;
  }
  std::vector<UK> keys() {
    std::vector<UK> out;
    for (auto it = iterator(); it->hasNext();) out.push_back(it->next().first);
    return out;
  }
  std::vector<UV> values() {
    std::vector<UV> out;
    for (auto it = iterator(); it->hasNext();) out.push_back(it->next().second);
    return out;
  }
};

// Keeps one value per key, combined with a ReduceFunction on add().
template <class T>
class ReducingState {
 public:
  virtual ~ReducingState() = default;
  virtual std::optional<T> get() = 0;
  virtual void add(const T& value) = 0;
  virtual void clear() = 0;
};

// Keeps one accumulator per key, updated with an AggregateFunction on add();
// get() returns the function's result for it.
template <class IN, class OUT>
class AggregatingState {
 public:
  virtual ~AggregatingState() = default;
  virtual std::optional<OUT> get() = 0;
  virtual void add(const IN& value) = 0;
  virtual void clear() = 0;
};

// Incremental aggregation, as in Flink: windows and AggregatingState use it.
template <class IN, class ACC, class OUT>
class AggregateFunction {
 public:
  using InputType = IN;
  using AccumulatorType = ACC;
  using OutputType = OUT;
  virtual ~AggregateFunction() = default;
  virtual ACC createAccumulator() = 0;
  virtual ACC add(const IN& value, ACC accumulator) = 0;
  virtual OUT getResult(const ACC& accumulator) = 0;
  virtual ACC merge(ACC a, ACC b) = 0;
};

// ---------------------------------------------------------------------------
// Descriptors

enum class StateKind : uint8_t {
  kValue = 0,
  kList = 1,
  kMap = 2,
  kReducing = 3,
  kAggregating = 4,
};

const char* stateKindName(StateKind kind);

class StateDescriptorBase {
 public:
  StateDescriptorBase(std::string name, StateKind kind) : name_(std::move(name)), kind_(kind) {
    if (name_.empty()) throw SluiceException("a state descriptor's name must not be empty");
  }
  virtual ~StateDescriptorBase() = default;
  const std::string& getName() const { return name_; }
  StateKind kind() const { return kind_; }
  void enableTimeToLive(const StateTtlConfig& config) { ttl_ = config; }
  const std::optional<StateTtlConfig>& getTtlConfig() const { return ttl_; }
  bool isTtlEnabled() const { return ttl_.has_value(); }

 private:
  std::string name_;
  StateKind kind_;
  std::optional<StateTtlConfig> ttl_;
};

template <class T>
class ValueStateDescriptor : public StateDescriptorBase {
  static_assert(Serializable<T>, "ValueStateDescriptor<T>: T needs a sluice::TypeSerializer");

 public:
  using ValueType = T;
  explicit ValueStateDescriptor(std::string name)
      : StateDescriptorBase(std::move(name), StateKind::kValue) {}
};

template <class T>
class ListStateDescriptor : public StateDescriptorBase {
  static_assert(Serializable<T>, "ListStateDescriptor<T>: T needs a sluice::TypeSerializer");

 public:
  using ElementType = T;
  explicit ListStateDescriptor(std::string name)
      : StateDescriptorBase(std::move(name), StateKind::kList) {}
};

template <class UK, class UV>
class MapStateDescriptor : public StateDescriptorBase {
  static_assert(Serializable<UK> && Serializable<UV>,
                "MapStateDescriptor<UK, UV>: both types need a sluice::TypeSerializer");

 public:
  using KeyType = UK;
  using ValueType = UV;
  explicit MapStateDescriptor(std::string name)
      : StateDescriptorBase(std::move(name), StateKind::kMap) {}
};

template <class T>
class ReducingStateDescriptor : public StateDescriptorBase {
  static_assert(Serializable<T>, "ReducingStateDescriptor<T>: T needs a sluice::TypeSerializer");

 public:
  using ValueType = T;
  using ReduceFn = std::function<T(const T&, const T&)>;
  // `reduce` is a callable T(const T&, const T&) or an object with
  // T reduce(const T&, const T&) (a ReduceFunction<T>).
  template <class F>
  ReducingStateDescriptor(std::string name, F reduce)
      : StateDescriptorBase(std::move(name), StateKind::kReducing),
        reduce_(wrap(std::move(reduce))) {}
  const ReduceFn& getReduceFunction() const { return reduce_; }

 private:
  template <class F>
  static ReduceFn wrap(F f) {
    if constexpr (std::is_invocable_r_v<T, F&, const T&, const T&>) {
      return ReduceFn(std::move(f));
    } else {
      static_assert(
          requires(F & g, const T& a) {
            { g.reduce(a, a) } -> std::convertible_to<T>;
          },
          "ReducingStateDescriptor: pass T(const T&, const T&) or a ReduceFunction<T>");
      auto shared = std::make_shared<F>(std::move(f));
      return [shared](const T& a, const T& b) { return shared->reduce(a, b); };
    }
  }
  ReduceFn reduce_;
};

template <class IN, class ACC, class OUT>
class AggregatingStateDescriptor : public StateDescriptorBase {
  static_assert(Serializable<ACC>,
                "AggregatingStateDescriptor<IN, ACC, OUT>: ACC needs a sluice::TypeSerializer");

 public:
  using InputType = IN;
  using AccumulatorType = ACC;
  using OutputType = OUT;
  // `function` is an object of a class derived from AggregateFunction<IN, ACC, OUT>.
  template <class F>
  requires std::is_base_of_v<AggregateFunction<IN, ACC, OUT>, F> AggregatingStateDescriptor(
      std::string name, F function)
      : StateDescriptorBase(std::move(name), StateKind::kAggregating),
        function_(std::make_shared<F>(std::move(function))) {}
  AggregatingStateDescriptor(std::string name,
                             std::shared_ptr<AggregateFunction<IN, ACC, OUT>> function)
      : StateDescriptorBase(std::move(name), StateKind::kAggregating),
        function_(std::move(function)) {}
  // Shared by every state created from this descriptor (within one subtask).
  const std::shared_ptr<AggregateFunction<IN, ACC, OUT>>& getAggregateFunction() const {
    return function_;
  }

 private:
  std::shared_ptr<AggregateFunction<IN, ACC, OUT>> function_;
};

}  // namespace sluice
