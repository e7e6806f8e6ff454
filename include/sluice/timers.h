// Timers of keyed operators, as in Flink's InternalTimerService: event-time
// timers fire when the watermark passes them, processing-time timers when the
// clock does; each fires once, in timestamp order, with its key made current.
// At most one timer exists per (key, namespace, timestamp) and domain.
//
// Timers are keyed state: each remembers its key group, and snapshot() /
// restore() write and read them per key group, so that checkpoints carry them
// and a rescaled subtask takes exactly the timers of its key groups.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// One operator's timers with namespace type N (VoidNamespace for process
// functions, the window type for window operators). Task thread only.
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

  int64_t currentWatermark() const { return watermark_; }
  int64_t currentProcessingTime() const { return context_->clock().currentTimeMillis(); }

  void registerEventTimeTimer(const K& key, const N& ns, int64_t time) {
    event_.insert(make(key, ns, time));
  }
  void deleteEventTimeTimer(const K& key, const N& ns, int64_t time) {
    event_.erase(make(key, ns, time));
  }
  void registerProcessingTimeTimer(const K& key, const N& ns, int64_t time) {
    processing_.insert(make(key, ns, time));
    scheduleProcessing();
  }
  void deleteProcessingTimeTimer(const K& key, const N& ns, int64_t time) {
    processing_.erase(make(key, ns, time));
  }

  // Fires every event-time timer at or before `watermark`, in order. Timers
  // registered while firing that are due fire too.
  void advanceWatermark(int64_t watermark) {
    watermark_ = watermark;
    while (!event_.empty() && event_.begin()->timestamp <= watermark) {
      Entry e = std::move(event_.extract(event_.begin()).value());
      onEventTime_(e.timer);
    }
  }

  size_t numEventTimeTimers() const { return event_.size(); }
  size_t numProcessingTimeTimers() const { return processing_.size(); }
  // Visits each timer of the given domain in firing order.
  void forEachTimer(TimeDomain domain, const std::function<void(const Timer&)>& f) const {
    for (const Entry& e : domain == TimeDomain::EVENT_TIME ? event_ : processing_) f(e.timer);
  }

  // Every timer, with its domain and key group: [u32 count] then per timer
  // [u8 domain][i32 key group][i64 timestamp][u32 n][n bytes: key | namespace].
  std::string snapshot() const {
    std::vector<uint8_t> bytes;
    DataOutputView out(bytes);
    out.writeU32(static_cast<uint32_t>(event_.size() + processing_.size()));
    auto write = [&](const Entry& e, TimeDomain d) {
      out.writeU8(static_cast<uint8_t>(d));
      out.writeI32(e.keyGroup);
      out.writeI64(e.timestamp);
      out.writeU32(static_cast<uint32_t>(e.bytes.size()));
      out.writeBytes(e.bytes.data(), e.bytes.size());
    };
    for (const Entry& e : event_) write(e, TimeDomain::EVENT_TIME);
    for (const Entry& e : processing_) write(e, TimeDomain::PROCESSING_TIME);
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
      e.bytes = std::move(bytes);
      DataInputView kv(e.bytes.data(), e.bytes.size());
      TypeSerializer<K>::deserialize(e.timer.key, kv);
      TypeSerializer<N>::deserialize(e.timer.ns, kv);
      e.timer.timestamp = ts;
      (domain == TimeDomain::EVENT_TIME ? event_ : processing_).insert(std::move(e));
    }
    if (!processing_.empty()) scheduleProcessing();
  }

 private:
  struct Entry {
    int64_t timestamp = 0;
    std::vector<uint8_t> bytes;  // serialized key | namespace: identity and tie-break
    int32_t keyGroup = 0;
    Timer timer;
    bool operator<(const Entry& o) const {
      return timestamp != o.timestamp ? timestamp < o.timestamp : bytes < o.bytes;
    }
  };

  Entry make(const K& key, const N& ns, int64_t time) const {
    Entry e;
    e.timestamp = time;
    DataOutputView out(e.bytes);
    TypeSerializer<K>::serialize(key, out);
    TypeSerializer<N>::serialize(ns, out);
    e.keyGroup = assignToKeyGroup(key, maxParallelism_);
    e.timer = Timer{time, key, ns};
    return e;
  }

  // Keeps one task timer armed for the earliest processing-time timer.
  void scheduleProcessing() {
    if (processing_.empty()) return;
    int64_t first = processing_.begin()->timestamp;
    if (first >= scheduledAt_) return;
    scheduledAt_ = first;
    context_->registerProcessingTimer(first, [this](int64_t at) { onProcessingTimer(at); });
  }
  void onProcessingTimer(int64_t at) {
    if (at == scheduledAt_) scheduledAt_ = kMaxTimestamp;
    int64_t now = context_->clock().currentTimeMillis();
    while (!processing_.empty() && processing_.begin()->timestamp <= now) {
      Entry e = std::move(processing_.extract(processing_.begin()).value());
      onProcessingTime_(e.timer);
    }
    scheduleProcessing();
  }

  OperatorContext* context_ = nullptr;
  int32_t maxParallelism_ = 128;
  Callback onEventTime_;
  Callback onProcessingTime_;
  std::set<Entry> event_;
  std::set<Entry> processing_;
  int64_t watermark_ = kMinTimestamp;
  int64_t scheduledAt_ = kMaxTimestamp;
};

}  // namespace internal
}  // namespace sluice
