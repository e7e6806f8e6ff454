// InternalTimerService<K, N>: the timers of a keyed operator for key type K
// and namespace type N (VoidNamespace for process functions, the window type
// for window operators), as in Flink. The typed half only: keys and
// namespaces are serialized into the bytes of a window::TimerQueue, which
// keeps, de-duplicates, orders, fires and checkpoints them, and deserialized
// again when a timer fires. Task thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sluice/core/key_hash.h>
#include <sluice/core/serializer.h>
#include <sluice/graph/operator.h>
#include <sluice/window/timer_queue.h>

namespace sluice::internal {

template <class K, class N>
struct TimerData {
  int64_t timestamp = 0;
  K key{};
  N ns{};
};

template <class K, class N>
class InternalTimerService {
 public:
  using Timer = TimerData<K, N>;
  // Called with each due timer; the callee makes timer.key current.
  using Callback = std::function<void(const Timer&)>;

  void init(OperatorContext& context, int32_t maxParallelism, Callback onEventTime,
            Callback onProcessingTime) {
    keyGroups_ = KeyGroupAssigner(maxParallelism);
    onEventTime_ = std::move(onEventTime);
    onProcessingTime_ = std::move(onProcessingTime);
    queue_.init(
        context, [this](int64_t ts, std::string_view bytes) { fire(onEventTime_, ts, bytes); },
        [this](int64_t ts, std::string_view bytes) { fire(onProcessingTime_, ts, bytes); });
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

  int64_t currentWatermark() const { return queue_.currentWatermark(); }
  int64_t currentProcessingTime() const { return queue_.currentProcessingTime(); }

  void registerEventTimeTimer(const K& key, const N& ns, int64_t time) {
    add(TimeDomain::EVENT_TIME, key, ns, time);
  }
  void deleteEventTimeTimer(const K& key, const N& ns, int64_t time) {
    queue_.remove(TimeDomain::EVENT_TIME, time, serialize(key, ns));
  }
  void registerProcessingTimeTimer(const K& key, const N& ns, int64_t time) {
    add(TimeDomain::PROCESSING_TIME, key, ns, time);
  }
  void deleteProcessingTimeTimer(const K& key, const N& ns, int64_t time) {
    queue_.remove(TimeDomain::PROCESSING_TIME, time, serialize(key, ns));
  }

  // Fires every event-time timer at or before `watermark`, in order.
  void advanceWatermark(int64_t watermark) { queue_.advanceWatermark(watermark); }

  size_t numEventTimeTimers() const { return queue_.size(TimeDomain::EVENT_TIME); }
  size_t numProcessingTimeTimers() const { return queue_.size(TimeDomain::PROCESSING_TIME); }
  // Visits each timer of the given domain in firing order.
  void forEachTimer(TimeDomain domain, const std::function<void(const Timer&)>& f) const {
    queue_.forEach(domain, [&](int64_t ts, std::string_view bytes) { f(decode(ts, bytes)); });
  }

  std::string snapshot() const { return queue_.snapshot(); }
  // snapshot(), written later: see TimerQueue::snapshotLater().
  std::function<std::string()> snapshotLater() { return queue_.snapshotLater(); }
  // Adds the timers of `snapshot` whose key group is in `range`, checking
  // that every one decodes as a K and an N.
  void restore(std::string_view snapshot, KeyGroupRange range) {
    queue_.restore(snapshot, range);
    for (TimeDomain d : {TimeDomain::EVENT_TIME, TimeDomain::PROCESSING_TIME}) {
      queue_.forEach(d, [&](int64_t ts, std::string_view bytes) { (void)decode(ts, bytes); });
    }
  }

 private:
  std::string_view serialize(const K& key, const N& ns) {
    overflow_.clear();
    DataOutputView out(buffer_, sizeof buffer_, overflow_);
    TypeSerializer<K>::serialize(key, out);
    TypeSerializer<N>::serialize(ns, out);
    return {reinterpret_cast<const char*>(out.data()), out.size()};
  }
  void add(TimeDomain domain, const K& key, const N& ns, int64_t time) {
    struct KeyGroupOf {
      const K* key;
      const KeyGroupAssigner* keyGroups;
    } ctx{&key, &keyGroups_};
    queue_.add(
        domain, time, serialize(key, ns),
        [](const void* c) {
          const auto* k = static_cast<const KeyGroupOf*>(c);
          return k->keyGroups->keyGroupOf(*k->key);
        },
        &ctx);
  }
  static Timer decode(int64_t ts, std::string_view bytes) {
    Timer t;
    t.timestamp = ts;
    DataInputView in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    TypeSerializer<K>::deserialize(t.key, in);
    TypeSerializer<N>::deserialize(t.ns, in);
    if (in.remaining() != 0) {
      in.failAt(in.position(), "timer bytes left over after its key and namespace");
    }
    return t;
  }
  void fire(const Callback& callback, int64_t ts, std::string_view bytes) {
    callback(decode(ts, bytes));
  }

  window::TimerQueue queue_;
  KeyGroupAssigner keyGroups_{128};
  Callback onEventTime_;
  Callback onProcessingTime_;
  uint8_t buffer_[64] = {};
  std::vector<uint8_t> overflow_;
};

}  // namespace sluice::internal
