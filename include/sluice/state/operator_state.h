// Operator state: the state of one operator in one subtask that is not
// scoped to a key, as in Flink's OperatorStateBackend.
//
// Operator state is a set of named states, each a list or a map, obtained
// from the backend with a descriptor:
//
//   ListState<int64_t>& offsets = backend.getListState(ListStateDescriptor<int64_t>("offsets"));
//   ListState<Rule>& all = backend.getUnionListState(ListStateDescriptor<Rule>("rules"));
//   BroadcastState<std::string, Rule>& rules =
//       backend.getBroadcastState(MapStateDescriptor<std::string, Rule>("rules"));
//
// What differs between the three kinds is how the state is handed out when a
// job restores at another parallelism (repartition()):
//
//   list state        SPLIT_DISTRIBUTE: the lists of all old subtasks are
//                     concatenated in subtask order and dealt out in
//                     contiguous chunks, the first (total % n) chunks one
//                     element larger (Flink's RoundRobinOperatorStateRepartitioner).
//                     At unchanged parallelism each subtask keeps its own list.
//   union list state  UNION: every new subtask receives the concatenation of
//                     all old lists and keeps what it needs.
//   broadcast state   BROADCAST: a map that every subtask holds identically
//                     (the operator must keep it so); each new subtask gets
//                     a copy, from old subtask (i % old parallelism).
//
// Objects are kept on the heap, typed; snapshot() serializes them with the
// types' TypeSerializers. A restored state is kept as bytes until a
// descriptor registers it, so state that the new version of an operator no
// longer asks for survives into the next snapshot unchanged.
//
// Snapshot format (integers little-endian, varuint = unsigned LEB128,
// string = varuint byte length + bytes):
//
//   "SLUICEOS"  u32 version = 1
//   varuint numStates, then per state, in name order:
//     string name
//     u8     mode            0 list (split), 1 union list, 2 broadcast
//     string schema          list: element schema; broadcast: key schema
//     string valueSchema     broadcast: value schema; list: empty
//     varuint numElements
//     string elements        numElements x element, where an element is
//                              list:      varuint length, serialized element
//                              broadcast: varuint length, serialized key,
//                                         varuint length, serialized value
//
// A backend without any state snapshots to the empty string, and restoring
// the empty string restores nothing.
//
// Threading: task thread only. Names: one name names one state of the
// operator, whatever its kind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

#include <sluice/core/owned.h>
#include <sluice/core/serializer.h>
#include <sluice/core/status.h>
#include <sluice/state/keyed_state_backend.h>
#include <sluice/state/state.h>

namespace sluice {

// How a state's elements are redistributed on restore (see above).
enum class OperatorStateMode : uint8_t {
  kSplitDistribute = 0,
  kUnion = 1,
  kBroadcast = 2,
};

// "list", "union list", "broadcast".
const char* operatorStateModeName(OperatorStateMode mode);

// ---------------------------------------------------------------------------
// Broadcast state

// The view of a broadcast state that processElement() gets: reads only.
//
// Keys are compared by their serialized bytes (TypeSerializer<K>), so K needs
// neither a hash nor an order; equal keys must serialize equally (true for
// every built-in serializer except floating-point -0.0 vs 0.0). Iteration
// visits the entries in the order of their serialized keys.
//
// Lookups reuse one buffer, so get()/contains() do not allocate for keys that
// serialize into a few hundred bytes after the first call. Task thread only.
template <class K, class V>
class ReadOnlyBroadcastState {
  static_assert(Serializable<K> && Serializable<V>,
                "broadcast state: both K and V need a sluice::TypeSerializer");

 protected:
  // By serialized key.
  using Map = std::map<std::string, std::pair<K, V>, std::less<>>;

 public:
  // Iterates the entries as `const std::pair<K, V>&`.
  class Iterator {
   public:
    using iterator_category = std::bidirectional_iterator_tag;
    using value_type = std::pair<K, V>;
    using difference_type = std::ptrdiff_t;
    using pointer = const std::pair<K, V>*;
    using reference = const std::pair<K, V>&;
    Iterator() = default;
    explicit Iterator(typename Map::const_iterator it) : it_(it) {}
    reference operator*() const { return it_->second; }
    pointer operator->() const { return &it_->second; }
    Iterator& operator++() {
      ++it_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator old = *this;
      ++it_;
      return old;
    }
    Iterator& operator--() {
      --it_;
      return *this;
    }
    Iterator operator--(int) {
      Iterator old = *this;
      --it_;
      return old;
    }
    bool operator==(const Iterator& other) const { return it_ == other.it_; }

   private:
    typename Map::const_iterator it_;
  };
  struct EntryRange {
    Iterator first;
    Iterator last;
    Iterator begin() const { return first; }
    Iterator end() const { return last; }
  };

  virtual ~ReadOnlyBroadcastState() = default;
  ReadOnlyBroadcastState(const ReadOnlyBroadcastState&) = delete;
  ReadOnlyBroadcastState& operator=(const ReadOnlyBroadcastState&) = delete;

  // A copy of the value of `key`, or nullopt.
  std::optional<V> get(const K& key) const {
    const V* v = find(key);
    return v != nullptr ? std::optional<V>(*v) : std::nullopt;
  }
  // The value of `key` without a copy, or nullptr. Valid until the state is
  // next modified.
  const V* find(const K& key) const {
    auto it = map_.find(serializeKey(key));
    return it == map_.end() ? nullptr : &it->second.second;
  }
  bool contains(const K& key) const { return map_.find(serializeKey(key)) != map_.end(); }
  size_t size() const { return map_.size(); }
  bool isEmpty() const { return map_.empty(); }

  // Iteration without copies:  for (const auto& [key, value] : s.immutableEntries())
  // Modifying the state while iterating invalidates the range.
  EntryRange immutableEntries() const {
    return EntryRange{Iterator(map_.cbegin()), Iterator(map_.cend())};
  }
  // Copies of all entries.
  std::vector<std::pair<K, V>> entries() const {
    std::vector<std::pair<K, V>> out;
    out.reserve(map_.size());
    for (const auto& [bytes, kv] : map_) out.push_back(kv);
    return out;
  }

 protected:
  ReadOnlyBroadcastState() = default;

  std::string_view serializeKey(const K& key) const {
    scratch_.clear();
    DataOutputView out(scratch_);
    TypeSerializer<K>::serialize(key, out);
    return std::string_view(reinterpret_cast<const char*>(scratch_.data()), scratch_.size());
  }

  Map map_;
  mutable std::vector<uint8_t> scratch_;
};

// A broadcast state as processBroadcastElement() (and CheckpointedFunction)
// sees it: reads and writes. Every subtask must make the same changes, in
// the same order, so that all copies stay identical: a restore at another
// parallelism hands out one subtask's copy to all.
template <class K, class V>
class BroadcastState : public ReadOnlyBroadcastState<K, V> {
 public:
  void put(const K& key, const V& value) {
    std::string_view bytes = this->serializeKey(key);
    auto it = this->map_.find(bytes);
    if (it != this->map_.end()) {
      it->second.second = value;
    } else {
      this->map_.emplace(std::string(bytes), std::pair<K, V>(key, value));
    }
  }
  // Puts every (key, value) pair of `entries` (a map or a range of pairs).
  template <class Range>
  void putAll(const Range& entries) {
    for (const auto& [k, v] : entries) put(k, v);
  }
  void remove(const K& key) {
    auto it = this->map_.find(this->serializeKey(key));
    if (it != this->map_.end()) this->map_.erase(it);
  }
  void clear() { this->map_.clear(); }

  // Java-style iteration that may remove entries (see MapStateIterator):
  //   for (auto it = s.iterator(); it->hasNext();) { auto [k, v] = it->next(); ... it->remove(); }
  // put() and remove() through the state while iterating invalidate it.
  std::unique_ptr<MapStateIterator<K, V>> iterator() {
    return internal::makeOwned<Iter>(this->map_);
  }

 protected:
  BroadcastState() = default;

 private:
  class Iter final : public MapStateIterator<K, V> {
   public:
    explicit Iter(typename ReadOnlyBroadcastState<K, V>::Map& map)
        : map_(map), next_(map.begin()) {}
    bool hasNext() override { return next_ != map_.end(); }
    std::pair<K, V> next() override {
      if (next_ == map_.end()) throw SluiceException("broadcast state iterator: no next entry");
      last_ = next_++;
      hasLast_ = true;
      return last_->second;
    }
    void remove() override {
      if (!hasLast_) {
        throw SluiceException("broadcast state iterator: remove() without a preceding next()");
      }
      map_.erase(last_);
      hasLast_ = false;
    }

   private:
    typename ReadOnlyBroadcastState<K, V>::Map& map_;
    typename ReadOnlyBroadcastState<K, V>::Map::iterator next_;
    typename ReadOnlyBroadcastState<K, V>::Map::iterator last_;
    bool hasLast_ = false;
  };
};

namespace internal {

// One registered operator state, typed; the backend reaches it through
// this interface to snapshot and restore it.
class OperatorStateHolder {
 public:
  virtual ~OperatorStateHolder() = default;
  // Appends every element in the snapshot's element format; returns how many.
  virtual uint64_t writeElements(DataOutputView& out) const = 0;
  // Replaces the contents with `count` elements read from `in`.
  virtual void readElements(DataInputView& in, uint64_t count) = 0;
};

template <class T>
class OperatorListStateImpl final : public ListState<T>, public OperatorStateHolder {
 public:
  std::vector<T> get() override { return elements_; }
  void add(const T& value) override { elements_.push_back(value); }
  void addAll(const std::vector<T>& values) override {
    elements_.insert(elements_.end(), values.begin(), values.end());
  }
  void update(const std::vector<T>& values) override { elements_ = values; }
  void clear() override { elements_.clear(); }

  uint64_t writeElements(DataOutputView& out) const override {
    std::vector<uint8_t> buf;
    for (const T& e : elements_) {
      buf.clear();
      DataOutputView element(buf);
      TypeSerializer<T>::serialize(e, element);
      out.writeVarUint(buf.size());
      out.writeBytes(buf.data(), buf.size());
    }
    return elements_.size();
  }
  void readElements(DataInputView& in, uint64_t count) override {
    elements_.clear();
    for (uint64_t i = 0; i < count; ++i) {
      std::string_view bytes = in.readStringView();
      DataInputView element(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      T value{};
      TypeSerializer<T>::deserialize(value, element);
      if (element.remaining() != 0) {
        element.failAt(element.position(), "list element " + std::to_string(i) + " has " +
                                               std::to_string(element.remaining()) +
                                               " bytes left over after " +
                                               TypeSerializer<T>::schema());
      }
      elements_.push_back(std::move(value));
    }
  }

 private:
  std::vector<T> elements_;
};

template <class K, class V>
class HeapBroadcastState final : public BroadcastState<K, V>, public OperatorStateHolder {
 public:
  uint64_t writeElements(DataOutputView& out) const override {
    std::vector<uint8_t> buf;
    for (const auto& [keyBytes, kv] : this->map_) {
      out.writeString(keyBytes);
      buf.clear();
      DataOutputView value(buf);
      TypeSerializer<V>::serialize(kv.second, value);
      out.writeVarUint(buf.size());
      out.writeBytes(buf.data(), buf.size());
    }
    return this->map_.size();
  }
  void readElements(DataInputView& in, uint64_t count) override {
    this->map_.clear();
    for (uint64_t i = 0; i < count; ++i) {
      std::string_view keyBytes = in.readStringView();
      std::string_view valueBytes = in.readStringView();
      std::pair<K, V> kv{};
      readExactly(keyBytes, kv.first, "key", i);
      readExactly(valueBytes, kv.second, "value", i);
      if (!this->map_.emplace(std::string(keyBytes), std::move(kv)).second) {
        throw SerializationError("broadcast state entry " + std::to_string(i) +
                                 " repeats an earlier key");
      }
    }
  }

 private:
  template <class X>
  static void readExactly(std::string_view bytes, X& into, const char* what, uint64_t i) {
    DataInputView in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    TypeSerializer<X>::deserialize(into, in);
    if (in.remaining() != 0) {
      in.failAt(in.position(), std::string("broadcast state entry ") + std::to_string(i) + "'s " +
                                   what + " has " + std::to_string(in.remaining()) +
                                   " bytes left over after " + TypeSerializer<X>::schema());
    }
  }
};

}  // namespace internal

// ---------------------------------------------------------------------------
// The backend

// The operator state of one operator in one subtask. Owned by the operator
// (through internal::FunctionStateHandler); created in initializeState(),
// restored from the subtask's share of a snapshot before any state is
// registered, snapshotted between elements. Task thread only.
//
// Failures: asking for a name that is registered with another kind or type
// throws SluiceException; registering a restored state with another mode or
// schema throws StateMigrationException naming the state and both; reading a
// corrupt snapshot throws SerializationError naming the offset.
class OperatorStateBackend {
 public:
  explicit OperatorStateBackend(std::string operatorName = "operator");
  ~OperatorStateBackend();
  OperatorStateBackend(const OperatorStateBackend&) = delete;
  OperatorStateBackend& operator=(const OperatorStateBackend&) = delete;

  // A list redistributed by even split on rescale. The same descriptor name
  // returns the same object.
  template <class T>
  ListState<T>& getListState(const ListStateDescriptor<T>& desc) {
    return getList(desc, OperatorStateMode::kSplitDistribute);
  }
  // A list of which every subtask receives the whole (all subtasks' lists
  // concatenated) on restore.
  template <class T>
  ListState<T>& getUnionListState(const ListStateDescriptor<T>& desc) {
    return getList(desc, OperatorStateMode::kUnion);
  }
  // A map every subtask holds a copy of.
  // Processing-time lookups of a registered state do not allocate.
  template <class K, class V>
  BroadcastState<K, V>& getBroadcastState(const MapStateDescriptor<K, V>& desc) {
    using Impl = internal::HeapBroadcastState<K, V>;
    checkDescriptor(desc);
    if (Entry* e = findRegistered(desc.getName(), typeid(Impl), OperatorStateMode::kBroadcast)) {
      return static_cast<Impl&>(*e->typed);
    }
    Meta meta{desc.getName(), OperatorStateMode::kBroadcast, TypeSerializer<K>::schema(),
              TypeSerializer<V>::schema()};
    Entry& e = entryFor(meta, typeid(Impl));
    if (!e.typed) {
      e.typed = std::make_unique<Impl>();
      e.type = &typeid(Impl);
      loadRestored(e);
    }
    return static_cast<Impl&>(*e.typed);
  }

  // Names of the list and union list states registered so far (Flink's
  // getRegisteredStateNames), and of the broadcast states.
  std::vector<std::string> getRegisteredStateNames() const;
  std::vector<std::string> getRegisteredBroadcastStateNames() const;

  // Serializes every state, registered or only restored (format above).
  std::string snapshot() const;
  // Loads this subtask's share of a snapshot (already repartitioned). Call
  // once, before any state is registered; throws otherwise.
  void restore(const std::string& bytes);
  // True after restore() of a snapshot that held at least one state.
  bool hasRestoredState() const { return restoredAny_; }

  // Redistributes the snapshots of the old subtasks (index = old subtask;
  // an entry may be empty) to `newParallelism` new subtasks, each state by
  // its mode (see the top of this file). Throws SluiceException when two old
  // subtasks disagree on a state's mode or schema, SerializationError on a
  // corrupt snapshot.
  static std::vector<std::string> repartition(const std::vector<std::string>& oldSubtaskSnapshots,
                                              int newParallelism);

  const std::string& operatorName() const { return operatorName_; }

 private:
  struct Meta {
    std::string name;
    OperatorStateMode mode = OperatorStateMode::kSplitDistribute;
    std::string schema;
    std::string valueSchema;
    // "list state 'offsets' of int64", "broadcast state 'rules' of string -> Rule".
    std::string describe() const;
    bool operator==(const Meta&) const = default;
  };
  struct Entry {
    Meta meta;
    std::unique_ptr<internal::OperatorStateHolder> typed;  // null until registered
    const std::type_info* type = nullptr;
    // Restored elements, kept as bytes until the state is registered.
    uint64_t restoredCount = 0;
    std::string restoredElements;
  };

  template <class T>
  ListState<T>& getList(const ListStateDescriptor<T>& desc, OperatorStateMode mode) {
    using Impl = internal::OperatorListStateImpl<T>;
    checkDescriptor(desc);
    if (Entry* e = findRegistered(desc.getName(), typeid(Impl), mode)) {
      return static_cast<Impl&>(*e->typed);
    }
    Meta meta{desc.getName(), mode, TypeSerializer<T>::schema(), ""};
    Entry& e = entryFor(meta, typeid(Impl));
    if (!e.typed) {
      e.typed = std::make_unique<Impl>();
      e.type = &typeid(Impl);
      loadRestored(e);
    }
    return static_cast<Impl&>(*e.typed);
  }

  void checkDescriptor(const StateDescriptorBase& desc) const {
    if (desc.isTtlEnabled()) [[unlikely]]
      failTtl(desc.getName());
  }
  [[noreturn]] void failTtl(const std::string& name) const;
  // The registered state `name` when it has this type and mode, else null.
  Entry* findRegistered(const std::string& name, const std::type_info& type,
                        OperatorStateMode mode);
  // The entry for `meta`: the registered one (checked against `meta` and
  // `type`), the restored one (checked against `meta`), or a new one.
  Entry& entryFor(const Meta& meta, const std::type_info& type);
  // Moves restored bytes into the freshly created typed state.
  void loadRestored(Entry& e);

  std::string operatorName_;
  std::map<std::string, Entry> states_;
  bool restoreCalled_ = false;
  bool restoredAny_ = false;
};

// Flink's name for what CheckpointedFunction::initializeState gets.
using OperatorStateStore = OperatorStateBackend;

}  // namespace sluice
