// Timers of keyed operators, as in Flink's InternalTimerService: event-time
// timers fire when the watermark passes them, processing-time timers when the
// clock does; each fires once, in timestamp order, with its key made current.
// At most one timer exists per (key, namespace, timestamp) and domain.
//
// Timers are keyed state: each remembers its key group, and snapshot() /
// restore() write and read them per key group, so that checkpoints carry them
// and a rescaled subtask takes exactly the timers of its key groups.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sluice/core/flat_hash_map.h>
#include <sluice/core/key_hash.h>
#include <sluice/core/serializer.h>
#include <sluice/graph/operator.h>

namespace sluice {

enum class TimeDomain : uint8_t { EVENT_TIME = 0, PROCESSING_TIME = 1 };

// What a KeyedProcessFunction (and the contexts that have one) sees of time.
class TimerService {
 public:
  virtual ~TimerService() = default;
  virtual int64_t currentProcessingTime() const = 0;
  virtual int64_t currentWatermark() const = 0;
  // For the current key. Registering the same timestamp twice keeps one timer.
  virtual void registerProcessingTimeTimer(int64_t time) = 0;
  virtual void registerEventTimeTimer(int64_t time) = 0;
  virtual void deleteProcessingTimeTimer(int64_t time) = 0;
  virtual void deleteEventTimeTimer(int64_t time) = 0;
};

namespace internal {

template <class K, class N>
struct TimerData {
  int64_t timestamp = 0;
  K key{};
  N ns{};
};

// memcmp(a, b, n) == 0, inline and eight bytes at a time (keys are short).
inline bool timerBytesEqual(const uint8_t* a, const uint8_t* b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    if (x != y) return false;
  }
  for (; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}
// Lexicographic order of the key bytes, as vector's operator< has it, but
// eight bytes at a time and inline: timers of one window end all share a
// timestamp, so inserting one compares bytes at every level of the tree.
inline bool timerBytesLess(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    std::memcpy(&x, a.data() + i, 8);
    std::memcpy(&y, b.data() + i, 8);
    if (x != y) {
      if constexpr (std::endian::native == std::endian::little) {
        x = __builtin_bswap64(x);
        y = __builtin_bswap64(y);
      }
      return x < y;  // big-endian words order as their bytes do
    }
  }
  for (; i < n; ++i) {
    if (a[i] != b[i]) return a[i] < b[i];
  }
  return a.size() < b.size();
}

// One operator's timers with namespace type N (VoidNamespace for process
// functions, the window type for window operators). Task thread only.
//
// Each domain keeps its timers twice: ordered by (timestamp, key, namespace)
// for firing, and in a hash index for the de-duplication check that every
// registration makes. Registering a timer that exists (the common case: a
// window's timer is registered again for every element) costs one
// serialization into a stack buffer and one hash probe, no allocation.
template <class K, class N>
class InternalTimerService {
 public:
  using Timer = TimerData<K, N>;
  // Called with each due timer; the callee makes timer.key current.
  using Callback = std::function<void(const Timer&)>;

  void init(OperatorContext& context, int32_t maxParallelism, Callback onEventTime,
            Callback onProcessingTime) {
    context_ = &context;
    maxParallelism_ = maxParallelism;
    onEventTime_ = std::move(onEventTime);
    onProcessingTime_ = std::move(onProcessingTime);
  }

  // init() for an operator subtask, then restore() of the timers of its
  // key groups from every old subtask's snapshot in `restore` (may be null).
  void initForOperator(OperatorContext& context, Callback onEventTime, Callback onProcessingTime,
                       const OperatorStateRestore* restore) {
    RuntimeContext& rc = context.runtimeContext();
    init(context, rc.getMaxNumberOfParallelSubtasks(), std::move(onEventTime),
         std::move(onProcessingTime));
    if (restore == nullptr) return;
    KeyGroupRange range = computeKeyGroupRangeForOperatorIndex(rc.getMaxNumberOfParallelSubtasks(),
                                                               rc.getNumberOfParallelSubtasks(),
                                                               rc.getIndexOfThisSubtask());
    for (const std::string& t : restore->timers) this->restore(t, range);
  }

  int64_t currentWatermark() const { return watermark_; }
  int64_t currentProcessingTime() const { return context_->clock().currentTimeMillis(); }

  void registerEventTimeTimer(const K& key, const N& ns, int64_t time) {
    add(event_, key, ns, time);
  }
  void deleteEventTimeTimer(const K& key, const N& ns, int64_t time) {
    remove(event_, key, ns, time);
  }
  void registerProcessingTimeTimer(const K& key, const N& ns, int64_t time) {
    if (add(processing_, key, ns, time)) scheduleProcessing();
  }
  void deleteProcessingTimeTimer(const K& key, const N& ns, int64_t time) {
    remove(processing_, key, ns, time);
  }

  // Fires every event-time timer at or before `watermark`, in order. Timers
  // registered while firing that are due fire too.
  void advanceWatermark(int64_t watermark) {
    watermark_ = watermark;
    while (!event_.queue.empty() && event_.queue.begin()->timestamp <= watermark) {
      Entry e = pop(event_);
      onEventTime_(e.timer);
    }
  }

  size_t numEventTimeTimers() const { return event_.queue.size(); }
  size_t numProcessingTimeTimers() const { return processing_.queue.size(); }
  // Visits each timer of the given domain in firing order.
  void forEachTimer(TimeDomain domain, const std::function<void(const Timer&)>& f) const {
    for (const Entry& e : (domain == TimeDomain::EVENT_TIME ? event_ : processing_).queue) {
      f(e.timer);
    }
  }

  // Every timer, with its domain and key group: [u32 count] then per timer
  // [u8 domain][i32 key group][i64 timestamp][u32 n][n bytes: key | namespace].
  std::string snapshot() const {
    std::vector<uint8_t> bytes;
    DataOutputView out(bytes);
    out.writeU32(static_cast<uint32_t>(event_.queue.size() + processing_.queue.size()));
    auto write = [&](const Entry& e, TimeDomain d) {
      out.writeU8(static_cast<uint8_t>(d));
      out.writeI32(e.keyGroup);
      out.writeI64(e.timestamp);
      out.writeU32(static_cast<uint32_t>(e.bytes.size()));
      out.writeBytes(e.bytes.data(), e.bytes.size());
    };
    for (const Entry& e : event_.queue) write(e, TimeDomain::EVENT_TIME);
    for (const Entry& e : processing_.queue) write(e, TimeDomain::PROCESSING_TIME);
    return std::string(bytes.begin(), bytes.end());
  }

  // Adds the timers of `snapshot` whose key group is in `range`.
  void restore(std::string_view snapshot, KeyGroupRange range) {
    DataInputView in(reinterpret_cast<const uint8_t*>(snapshot.data()), snapshot.size());
    uint32_t count = in.readU32();
    for (uint32_t i = 0; i < count; ++i) {
      auto domain = static_cast<TimeDomain>(in.readU8());
      int32_t keyGroup = in.readI32();
      int64_t ts = in.readI64();
      uint32_t n = in.readU32();
      std::vector<uint8_t> bytes(n);
      in.readBytes(bytes.data(), n);
      if (!range.contains(keyGroup)) continue;
      Entry e;
      e.timestamp = ts;
      e.keyGroup = keyGroup;
      e.hash = hashOf(ts, bytes.data(), bytes.size());
      e.setBytes(std::move(bytes));
      DataInputView kv(e.bytes.data(), e.bytes.size());
      TypeSerializer<K>::deserialize(e.timer.key, kv);
      TypeSerializer<N>::deserialize(e.timer.ns, kv);
      e.timer.timestamp = ts;
      insert(domain == TimeDomain::EVENT_TIME ? event_ : processing_, std::move(e));
    }
    if (!processing_.queue.empty()) scheduleProcessing();
  }

 private:
  struct Entry {
    int64_t timestamp = 0;
    // The first 16 bytes of `bytes` as two big-endian words (zero-padded):
    // they order as the bytes do, and ties of timestamp (every timer of one
    // window end) are mostly decided on them without reading `bytes`.
    uint64_t prefix[2] = {0, 0};
    std::vector<uint8_t> bytes;  // serialized key | namespace: identity and tie-break
    int32_t keyGroup = 0;
    uint64_t hash = 0;
    Timer timer;
    void setBytes(std::vector<uint8_t> b) {
      bytes = std::move(b);
      uint8_t padded[16] = {};
      if (!bytes.empty()) std::memcpy(padded, bytes.data(), std::min(bytes.size(), sizeof padded));
      for (int w = 0; w < 2; ++w) {
        uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v = (v << 8) | padded[w * 8 + i];
        prefix[w] = v;
      }
    }
    bool operator<(const Entry& o) const {
      if (timestamp != o.timestamp) return timestamp < o.timestamp;
      if (prefix[0] != o.prefix[0]) return prefix[0] < o.prefix[0];
      if (prefix[1] != o.prefix[1]) return prefix[1] < o.prefix[1];
      return timerBytesLess(bytes, o.bytes);
    }
  };
  using Queue = std::set<Entry>;
  using Ref = typename Queue::const_iterator;

  // A timer being looked up, not yet (or never) stored.
  struct Probe {
    int64_t timestamp;
    const uint8_t* data;
    size_t size;
    uint64_t hash;
  };
  // One slot of the de-duplication index: the timer's hash, timestamp and,
  // when they fit, its key bytes inline, so that finding an existing timer
  // touches one cache line of the index and nothing else.
  static constexpr size_t kInlineBytes = 24;
  struct IndexKey {
    uint64_t hash = 0;
    int64_t timestamp = 0;
    uint32_t size = 0;
    uint8_t bytes[kInlineBytes] = {};
    const Entry* entry = nullptr;  // set once the entry is stored

    IndexKey() = default;
    explicit IndexKey(const Probe& p) : hash(p.hash), timestamp(p.timestamp) {
      size = static_cast<uint32_t>(p.size);
      if (p.size <= kInlineBytes && p.size != 0) std::memcpy(bytes, p.data, p.size);
    }
    const uint8_t* data() const { return size <= kInlineBytes ? bytes : entry->bytes.data(); }
    friend bool operator==(const IndexKey& k, const Probe& p) {
      return k.hash == p.hash && k.timestamp == p.timestamp && k.size == p.size &&
             timerBytesEqual(k.data(), p.data, p.size);
    }
    friend bool operator==(const IndexKey& a, const IndexKey& b) {
      return a.hash == b.hash && a.timestamp == b.timestamp && a.size == b.size &&
             timerBytesEqual(a.data(), b.data(), a.size);
    }
  };
  struct IndexHash {
    uint64_t operator()(const IndexKey& k) const { return k.hash; }
    uint64_t operator()(const Probe& p) const { return p.hash; }
  };
  struct Domain {
    Queue queue;
    FlatHashMap<IndexKey, Ref, IndexHash> index;
  };

  static uint64_t hashOf(int64_t ts, const uint8_t* p, size_t n) {
    uint64_t h = (0x9E3779B97F4A7C15ULL ^ static_cast<uint64_t>(ts)) * 0xbf58476d1ce4e5b9ULL;
    while (n >= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
      h ^= h >> 31;
      p += 8;
      n -= 8;
    }
    if (n != 0) {
      uint64_t w = 0;
      std::memcpy(&w, p, n);
      h = (h ^ w) * 0x94d049bb133111ebULL;
    }
    return h ^ (h >> 29);
  }

  // Adds the timer unless it exists; returns whether it was added.
  bool add(Domain& d, const K& key, const N& ns, int64_t time) {
    uint8_t buffer[64] = {};
    overflow_.clear();
    DataOutputView out(buffer, sizeof buffer, overflow_);
    TypeSerializer<K>::serialize(key, out);
    TypeSerializer<N>::serialize(ns, out);
    // The same timer as the last call (a window operator registers its
    // trigger's timer and its cleanup timer back to back, often the same).
    if (memoDomain_ == &d && memoTime_ == time && memo_.size() == out.size() &&
        std::memcmp(memo_.data(), out.data(), out.size()) == 0) {
      return false;
    }
    memoDomain_ = &d;
    memoTime_ = time;
    memo_.assign(out.data(), out.data() + out.size());
    const uint64_t h = hashOf(time, out.data(), out.size());
    const Probe probe{time, out.data(), out.size(), h};
    if (d.index.find(probe) != nullptr) return false;
    Entry e;
    e.timestamp = time;
    e.setBytes(std::vector<uint8_t>(out.data(), out.data() + out.size()));
    e.keyGroup = assignToKeyGroup(key, maxParallelism_);
    e.hash = h;
    e.timer = Timer{time, key, ns};
    insert(d, std::move(e));
    return true;
  }
  static void insert(Domain& d, Entry e) {
    auto [it, inserted] = d.queue.insert(std::move(e));
    if (!inserted) return;
    const Probe probe{it->timestamp, it->bytes.data(), it->bytes.size(), it->hash};
    auto [slot, added] = d.index.tryEmplace(probe);
    slot->key.entry = &*it;
    slot->value = it;
    (void)added;
  }
  static void unindex(Domain& d, const Entry& e) {
    d.index.erase(Probe{e.timestamp, e.bytes.data(), e.bytes.size(), e.hash});
  }
  void remove(Domain& d, const K& key, const N& ns, int64_t time) {
    memoDomain_ = nullptr;
    uint8_t buffer[64] = {};
    overflow_.clear();
    DataOutputView out(buffer, sizeof buffer, overflow_);
    TypeSerializer<K>::serialize(key, out);
    TypeSerializer<N>::serialize(ns, out);
    const Probe probe{time, out.data(), out.size(), hashOf(time, out.data(), out.size())};
    auto* found = d.index.find(probe);
    if (found == nullptr) return;
    Ref r = found->value;
    d.index.erase(probe);
    d.queue.erase(r);
  }
  Entry pop(Domain& d) {
    memoDomain_ = nullptr;
    Ref first = d.queue.begin();
    unindex(d, *first);
    return std::move(d.queue.extract(first).value());
  }

  // Keeps one task timer armed for the earliest processing-time timer.
  void scheduleProcessing() {
    if (processing_.queue.empty()) return;
    int64_t first = processing_.queue.begin()->timestamp;
    if (first >= scheduledAt_) return;
    scheduledAt_ = first;
    context_->registerProcessingTimer(first, [this](int64_t at) { onProcessingTimer(at); });
  }
  void onProcessingTimer(int64_t at) {
    if (at == scheduledAt_) scheduledAt_ = kMaxTimestamp;
    int64_t now = context_->clock().currentTimeMillis();
    while (!processing_.queue.empty() && processing_.queue.begin()->timestamp <= now) {
      Entry e = pop(processing_);
      onProcessingTime_(e.timer);
    }
    scheduleProcessing();
  }

  OperatorContext* context_ = nullptr;
  int32_t maxParallelism_ = 128;
  Callback onEventTime_;
  Callback onProcessingTime_;
  Domain event_;
  Domain processing_;
  std::vector<uint8_t> overflow_;
  // The last timer add() saw exist or inserted; cleared by every removal.
  const Domain* memoDomain_ = nullptr;
  int64_t memoTime_ = 0;
  std::vector<uint8_t> memo_;
  int64_t watermark_ = kMinTimestamp;
  int64_t scheduledAt_ = kMaxTimestamp;
};

}  // namespace internal
}  // namespace sluice
