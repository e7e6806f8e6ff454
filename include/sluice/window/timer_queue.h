// TimerQueue: the timers of one keyed operator, as Flink's
// InternalTimerService keeps them, without knowing the key or namespace type.
//
// A timer is (domain, timestamp, key bytes | namespace bytes) with the key
// group of its key. Event-time timers fire when the watermark passes them,
// processing-time timers when the clock does; each fires once, in order of
// (timestamp, bytes). At most one timer exists per (domain, timestamp,
// bytes). The typed InternalTimerService<K, N> (internal/timer_service.h)
// serializes keys and namespaces into the bytes and back.
//
// Each domain keeps its timers twice: ordered for firing, and in a hash index
// for the de-duplication check that every registration makes. Registering a
// timer that exists (the common case: a window's timer is registered again
// for every element) costs one hash probe, no allocation.
//
// Timers are keyed state: snapshot() / restore() write and read them with
// their key groups, so that checkpoints carry them and a rescaled subtask
// takes exactly the timers of its key groups.
//
// Threading: the task thread only. Callbacks run on it, between records.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <sluice/core/key_hash.h>
#include <sluice/graph/operator.h>

namespace sluice::window {

class TimerQueue {
 public:
  // Called with each due timer, in order; `bytes` is valid during the call.
  using Callback = std::function<void(int64_t timestamp, std::string_view bytes)>;
  // The key group of the timer being added (computed only when it is new).
  using KeyGroupFn = int32_t (*)(const void* context);

  TimerQueue();
  ~TimerQueue();
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  void init(OperatorContext& context, Callback onEventTime, Callback onProcessingTime);

  int64_t currentWatermark() const { return watermark_; }
  int64_t currentProcessingTime() const;

  // Adds the timer unless it exists; returns whether it was added. A new
  // processing-time timer arms the task's timer for the earliest one.
  bool add(TimeDomain domain, int64_t timestamp, std::string_view bytes, KeyGroupFn keyGroup,
           const void* keyGroupContext);
  void remove(TimeDomain domain, int64_t timestamp, std::string_view bytes);

  // Fires every event-time timer at or before `watermark`, in order. Timers
  // registered while firing that are due fire too.
  void advanceWatermark(int64_t watermark);

  size_t size(TimeDomain domain) const;
  // Timers the queue has memory for (live, dead, free or held for a
  // snapshot in flight), in both domains.
  size_t allocatedTimers() const;
  // Visits each timer of the domain in firing order.
  void forEach(TimeDomain domain,
               const std::function<void(int64_t timestamp, std::string_view bytes)>& fn) const;

  // Every timer, with its domain and key group: [u32 count] then per timer
  // [u8 domain][i32 key group][i64 timestamp][u32 n][n bytes].
  std::string snapshot() const;
  // The same snapshot, taken now and written later by the function
  // returned, on any thread (the checkpoint's asynchronous part): taking
  // it copies the heaps' pointers, not the timers. Until the function has
  // run or is destroyed, timers that fire or are removed are not reused,
  // and the function keeps what it reads alive past the queue.
  std::function<std::string()> snapshotLater();
  // The snapshots in flight (defined in timer_queue.cc).
  struct SnapshotLedger;
  // Adds the timers of `snapshot` whose key group is in `range`. Throws
  // SerializationError naming what is wrong with a damaged snapshot.
  void restore(std::string_view snapshot, KeyGroupRange range);

 private:
  struct Domain;
  Domain& domain(TimeDomain d) const;
  void scheduleProcessing();
  void onProcessingTimer(int64_t at);
  // Fires (and gives back) d's timers due at `time` or before, in order.
  void fireUpTo(Domain& d, int64_t time, const Callback& callback);

  OperatorContext* context_ = nullptr;
  std::shared_ptr<SnapshotLedger> ledger_;  // the asynchronous snapshots in flight
  Callback onEventTime_;
  Callback onProcessingTime_;
  std::unique_ptr<Domain> event_;
  std::unique_ptr<Domain> processing_;
  int64_t watermark_ = kMinTimestamp;
  int64_t scheduledAt_ = kMaxTimestamp;
};

}  // namespace sluice::window
