// The sliced window operator: tumbling, sliding and cumulating event-time
// windows, and tumbling and sliding processing-time windows, with an incremental
// function (reduce, aggregate, the field aggregations), with or without a
// window function, the default trigger and no evictor. WindowedStream picks
// it over the general WindowOperator (window_operator.h) when
// `pipeline.window.slicing` is on and the job's state backend is `hashmap`;
// both give the same results (docs/windows.md lists the few differences).
//
// Instead of one accumulator per key and window, kept in the state backend
// with a timer per key and window, it keeps one accumulator per key and
// slice (window::Slicing: a window is a run of whole slices) in an in-memory
// table of its own: a flat hash map from the key to its newest slice (inline
// in the map's slot) and its number, under which the key's older slices
// are kept. An element on time goes to its key's newest slice: one hash
// probe and the function's add, in place, no serialization and no timer.
// Which keys have data in which slice, and which windows the watermark fires
// and cleans up, the window::SliceScheduler keeps once for the whole
// operator. A window fires with the merge of its slices: a tumbling window
// is one slice; consecutive sliding windows of a key share a
// window::TwoStacks, so each window costs a few merges whatever its number
// of slices; cumulating windows keep a running merge per cycle.
//
// Flink's semantics are the general operator's, step for step: lateness
// (allowed lateness, the late side output, numLateRecordsDropped), an
// element within the allowed lateness re-firing every window of it that
// fired already, windows firing in order of their end when the watermark
// reaches end - 1, output timestamps window.maxTimestamp(), a
// ProcessWindowFunction's context (window, watermark, windowState,
// globalState, side outputs) and its clear() at the window's cleanup.
//
// State. A snapshot holds the table as the entries of keyed state
// "window-slices" (one value per key: the watermark the key has seen, its
// slices, the windows it has still to fire again), serialized and handed to
// the snapshot (or, on a backend that cannot take them, put into the state
// and removed once the checkpoint completes); a restore loads the entries of the
// subtask's key groups and removes them, so rescaling redistributes slices
// by key group as any keyed state. The slicing itself is operator state
// ("window-slices-layout"), checked on restore. A snapshot of the general
// operator with tumbling windows is taken over (window::sliced_state.h).
//
// Processing time (spec.windows.processingTime): an element goes to the
// slice of the clock's time when it arrives (never late), and the
// scheduler is advanced by processing-time timers instead of the watermark:
// one task timer per pending window end (registered when the window gets
// its first slice, or restored), which fires and cleans up the window at its
// maxTimestamp, as ProcessingTimeTrigger and the general operator's cleanup
// timer do. The timers fire windows through some time (firedThrough_); an
// element whose time is in a window that fired already (it arrives in the
// window's last millisecond after the timer ran, or the clock went back)
// finds that window purged in the general operator, which starts it anew
// and fires it again at once with the new elements alone. Here such a
// window gets an accumulator of its own (refires_, keyed state
// "window-slices-refire" in a snapshot) that the next timer run fires and
// cleans up; the element still goes to its slice for the windows that have
// not fired. The watermark is only forwarded. Timers pending at the end of
// input do not fire. The general operator's processing-time state cannot be
// taken over.
//
// Like WindowOperator, it is one class per (key, input, accumulator, value,
// output) types: the incremental function (SliceFunction) and the window
// function (InternalWindowFunction) are run-time strategies. Task thread only.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <sluice/core/assert.h>
#include <sluice/core/flat_hash_map.h>
#include <sluice/core/owned.h>
#include <sluice/internal/window_operator.h>
#include <sluice/window/slice_scheduler.h>
#include <sluice/window/sliced_state.h>
#include <sluice/window/slicing.h>
#include <sluice/window/two_stacks.h>

namespace sluice::internal {

// --- the incremental function, as slices use it ------------------------------

// A slice's accumulator ACC from elements IN; what a window function gets is V.
template <class IN, class ACC, class V>
class SliceFunction {
 public:
  virtual ~SliceFunction() = default;
  // A fresh copy for one subtask.
  virtual std::unique_ptr<SliceFunction> clone() const = 0;
  // The user's function, for open/close.
  virtual RichFunction* rich() { return nullptr; }
  // The accumulator of a new slice, from its first element.
  virtual void first(ACC& acc, const IN& value) = 0;
  virtual void add(ACC& acc, const IN& value) = 0;
  // acc = acc ⊕ later, `acc` holding the earlier elements.
  virtual void merge(ACC& acc, const ACC& later) = 0;
  virtual V result(const ACC& acc) = 0;
  // The general window operator's state of window `window` of the backend's
  // current key ("window-contents"), taken over and removed; nullopt when
  // there is none. openGeneralState() first.
  virtual void openGeneralState(KeyedStateBackend& backend) = 0;
  virtual std::optional<ACC> takeGeneralState(const TimeWindow& window) = 0;
};

// reduce() and the field aggregations: the running value is the accumulator.
template <class T, class F>
class ReduceSlices final : public SliceFunction<T, T, T> {
 public:
  explicit ReduceSlices(F f) : f_(std::move(f)) {}
  std::unique_ptr<SliceFunction<T, T, T>> clone() const override {
    return internal::makeOwned<ReduceSlices>(f_);
  }
  RichFunction* rich() override { return richOf(f_); }
  void first(T& acc, const T& value) override { acc = value; }
  void add(T& acc, const T& value) override {
    if constexpr (InPlaceReducer<F, T>) {
      if (f_.apply(acc, value)) acc = value;
    } else {
      acc = invokeReduce(f_, acc, value);
    }
  }
  void merge(T& acc, const T& later) override { add(acc, later); }
  T result(const T& acc) override { return acc; }
  void openGeneralState(KeyedStateBackend& backend) override {
    general_ = &getOrCreateReducingState<TimeWindow>(
        backend,
        ReducingStateDescriptor<T>(window::kGeneralWindowState, [this](const T& a, const T& b) {
          return invokeReduce(f_, a, b);
        }));
  }
  std::optional<T> takeGeneralState(const TimeWindow& window) override {
    general_->setCurrentNamespace(window);
    std::optional<T> v = general_->get();
    if (v) general_->clear();
    return v;
  }

 private:
  F f_;
  InternalReducingState<TimeWindow, T>* general_ = nullptr;
};

// aggregate(): the AggregateFunction's accumulator.
template <class IN, class ACC, class OUT, class AGG>
class AggregateSlices final : public SliceFunction<IN, ACC, OUT> {
 public:
  explicit AggregateSlices(AGG agg) : agg_(std::move(agg)) {}
  std::unique_ptr<SliceFunction<IN, ACC, OUT>> clone() const override {
    return internal::makeOwned<AggregateSlices>(agg_);
  }
  RichFunction* rich() override { return richOf(agg_); }
  void first(ACC& acc, const IN& value) override {
    acc = agg_.add(value, agg_.createAccumulator());
  }
  void add(ACC& acc, const IN& value) override { acc = agg_.add(value, std::move(acc)); }
  void merge(ACC& acc, const ACC& later) override { acc = agg_.merge(std::move(acc), later); }
  OUT result(const ACC& acc) override { return agg_.getResult(acc); }
  void openGeneralState(KeyedStateBackend& backend) override {
    // Non-owning: the operator owns the function.
    std::shared_ptr<AggregateFunction<IN, ACC, OUT>> fn(std::shared_ptr<void>(), &agg_);
    general_ = &getOrCreateAggregatingState<TimeWindow>(
        backend, AggregatingStateDescriptor<IN, ACC, OUT>(window::kGeneralWindowState, fn));
  }
  std::optional<ACC> takeGeneralState(const TimeWindow& window) override {
    general_->setCurrentNamespace(window);
    std::optional<ACC> v = general_->getInternal();
    if (v) general_->clear();
    return v;
  }

 private:
  AGG agg_;
  InternalAggregatingState<TimeWindow, IN, ACC, OUT>* general_ = nullptr;
};

// A key's entry in keyed state "window-slices", written while a snapshot is
// taken: the watermark its slices had seen, its slices (index, accumulator)
// in ascending order, and the windows it has to fire again. The first two
// slices are inline, so that the entry of a key with one window open (or
// two, around a window's end) is written without allocating.
template <class ACC>
struct StoredSlices {
  int64_t watermark = kMinTimestamp;
  uint32_t count = 0;
  std::pair<int64_t, ACC> first[2];
  std::vector<std::pair<int64_t, ACC>> more;
  std::vector<TimeWindow> refire;

  void clear() {
    count = 0;
    more.clear();
    refire.clear();
  }
  void add(int64_t id, const ACC& acc) {
    if (count < 2) {
      first[count] = {id, acc};
    } else {
      more.emplace_back(id, acc);
    }
    ++count;
  }
  std::pair<int64_t, ACC>& at(uint32_t i) { return i < 2 ? first[i] : more[i - 2]; }
};

}  // namespace sluice::internal

namespace sluice {

template <class ACC>
struct TypeSerializer<internal::StoredSlices<ACC>> {
  using Stored = internal::StoredSlices<ACC>;
  static constexpr size_t kMinEncodedSize = 10;
  static void serialize(const Stored& v, DataOutputView& out) {
    out.writeI64(v.watermark);
    out.writeVarUint(v.count);
    for (uint32_t i = 0; i < v.count; ++i) {
      const auto& slice = i < 2 ? v.first[i] : v.more[i - 2];
      out.writeI64(slice.first);
      TypeSerializer<ACC>::serialize(slice.second, out);
    }
    out.writeVarUint(v.refire.size());
    for (const TimeWindow& w : v.refire) TypeSerializer<TimeWindow>::serialize(w, out);
  }
  static void deserialize(Stored& v, DataInputView& in) {
    v.clear();
    v.watermark = in.readI64();
    const uint64_t count = in.readVarUintFor("slice count");
    for (uint64_t i = 0; i < count; ++i) {
      const size_t at = in.position();
      const int64_t id = in.readI64();
      ACC acc{};
      TypeSerializer<ACC>::deserialize(acc, in);
      if (in.remaining() == 0 && i + 1 < count) in.failAt(at, "slices missing");
      v.add(id, acc);
    }
    const uint64_t refire = in.readVarUintFor("window count");
    for (uint64_t i = 0; i < refire; ++i) {
      TimeWindow w;
      TypeSerializer<TimeWindow>::deserialize(w, in);
      v.refire.push_back(w);
    }
  }
  static std::string schema() {
    return "SlicedWindowKey{watermark:int64,slices:list<tuple<int64," +
           TypeSerializer<ACC>::schema() + ">>,refire:list<" +
           TypeSerializer<TimeWindow>::schema() + ">}";
  }
};

}  // namespace sluice

namespace sluice::internal {

// Key types the table can hold (others keep the general operator).
template <class K>
concept SliceableKey = TableKey<K>;

// What the API passes to a TableWindowOperator (below).
template <class K, class IN, class ACC, class V, class OUT>
struct TableWindowSpec {
  std::string assignerName;  // the assigner's toString(), for errors
  int64_t allowedLateness = 0;
  std::string lateDataTag;  // empty: late elements are dropped and counted
  std::function<K(const IN&)> key;
  std::shared_ptr<const SliceFunction<IN, ACC, V>> function;
  std::shared_ptr<const InternalWindowFunction<V, OUT, K, TimeWindow>> windowFunction;
};

template <class K, class IN, class ACC, class V, class OUT>
struct SlicingWindowSpec : TableWindowSpec<K, IN, ACC, V, OUT> {
  window::AlignedWindows windows;
};

// What the sliced and the session window operator share. Both keep their
// windows in a table of their own; a snapshot holds it as the entries of
// keyed state `stateName` (one `Stored` per key): where the backend takes
// that (KeyedStateBackend::addToNextSnapshot, hashmap), a copy of the table
// handed to the snapshot, which serializes it when it is written
// (handFrozen); else put into the state (writeStored) and removed again
// once the checkpoint completed or at the next snapshot.
// Here: the user's incremental and window functions, that keyed state, the
// window function's operator state, and what a fired window is emitted
// through (the ProcessWindowFunction context, side outputs, collector).
// `Derived` gives the context its clocks (see WindowProcessContext).
template <class K, class IN, class ACC, class V, class OUT, class Stored, class Derived>
class TableWindowOperator : public OneInputOperator<IN, OUT> {
 protected:
  using W = TimeWindow;
  using Function = InternalWindowFunction<V, OUT, K, W>;
  using ProcessCtxImpl = WindowProcessContext<typename Function::Context, W, Derived>;

  explicit TableWindowOperator(const TableWindowSpec<K, IN, ACC, V, OUT>& spec)
      : fn_(spec.function->clone()),
        windowFunction_(spec.windowFunction->clone()),
        passThrough_(dynamic_cast<const PassThroughWindowFunction<V, K, W>*>(
                         spec.windowFunction.get()) != nullptr),
        lateDataTag_(spec.lateDataTag) {}

  // Opens the keyed state, the window function's operator state and the
  // state the table is written into.
  KeyedStateBackend& initializeTableState(const OperatorStateRestore* restore,
                                          const char* stateName) {
    keyed_.initialize(this->context(), restore);
    KeyedStateBackend& backend = keyed_.backend();
    this->streamingContext().setKeyedStateBackend(&backend);
    functionState_.initializeBackend(this->context(), restore);
    functionState_.initializeCheckpointed(windowFunction_->checkpointed(), &backend);
    stored_ =
        &getOrCreateValueState<VoidNamespace>(backend, ValueStateDescriptor<Stored>(stateName));
    storedName_ = stateName;
    entries_.prepare(backend, keyed_.keyGroups());
    return backend;
  }
  // Whether the snapshot takes the table as a copy it serializes itself
  // (handFrozen), where the backend takes that; else each key's entry is
  // put into the state (writeStored).
  bool handsFrozen() const { return entries_.prepared(); }
  // Hands the next snapshot `frozen`, the table's copy, which
  // `fill(frozen, add)` turns into add(key, Stored) calls on the thread
  // that writes it (SnapshotEntries::handTo).
  template <class Frozen, class Fill>
  void handFrozen(Frozen frozen, Fill fill) {
    entries_.template handTo<Stored>(keyed_.backend(), storedName_, std::move(frozen),
                                     std::move(fill));
  }
  // Puts scratch_ into the state as `key`'s entry for the snapshot being
  // taken (where the backend takes no frozen copy).
  void writeStored(const K& key) {
    keyed_.setCurrentKey(key);
    stored_->update(scratch_);
    written_.push_back(key);
  }
  // The snapshot, once every key's entry is written or handed over.
  OperatorStateSnapshot finishSnapshot(int64_t checkpointId) {
    OperatorStateSnapshot s;
    s.keyedState = keyed_.snapshot(checkpointId);
    s.operatorState =
        functionState_.snapshotCheckpointed(windowFunction_->checkpointed(), checkpointId);
    return s;
  }
  // Removes what the last snapshot wrote from the backend: the whole state
  // at once where the backend can (the state holds nothing else: restored
  // entries were taken out when the operator started), else key by key.
  void removeWritten() { removeWrittenFrom(storedName_, stored_, written_); }
  // `state` may be null when nothing was written (a state the operator
  // does not use).
  template <class T>
  void removeWrittenFrom(const char* name, InternalValueState<VoidNamespace, T>* state,
                         std::vector<K>& written) {
    if (written.empty()) return;
    if (!keyed_.backend().clearState(name)) {
      for (const K& key : written) {
        keyed_.setCurrentKey(key);
        state->clear();
      }
    }
    written.clear();
  }

  // Emits the result of `key`'s `window`, whose accumulator is `acc`, with
  // timestamp `maxTimestamp`: as is without a window function, else through it.
  void emitWindow(const K& key, const W& window, int64_t maxTimestamp, const ACC& acc) {
    if constexpr (std::is_same_v<V, OUT>) {
      if (passThrough_) {
        this->record_.value = fn_->result(acc);
        this->record_.timestamp = maxTimestamp;
        this->output().collect(std::move(this->record_));
        return;
      }
    }
    keyed_.setCurrentKey(key);
    processCtx_.window_ = window;
    values_.clear();
    values_.push_back(fn_->result(acc));
    collector_.setTimestampFrom(true, maxTimestamp);
    windowFunction_->process(key, processCtx_.window_, processCtx_, values_, collector_);
  }
  // `key`'s `window` is purged for good: the window function's clear().
  void clearWindow(const K& key, const W& window) {
    keyed_.setCurrentKey(key);
    processCtx_.window_ = window;
    windowFunction_->clear(processCtx_);
  }
  void lateRecord(const StreamRecord<IN>& r) { emitLateRecord(lateOutput_, this->context(), r); }

 public:
  void notifyCheckpointComplete(int64_t checkpointId) override {
    (void)checkpointId;
    removeWritten();
  }
  void open() override {
    if (!lateDataTag_.empty()) {
      lateOutput_ = static_cast<Output<IN>*>(this->context().sideOutput(lateDataTag_));
    }
    processCtx_.op = static_cast<Derived*>(this);
    sideOutputs_.setContext(&this->context());
    processCtx_.setSideOutputs(&sideOutputs_);
    windowStore_ = ScopedStateStore<W>(&keyed_.backend(), &processCtx_.window_);
    globalStore_ = ScopedStateStore<VoidNamespace>(&keyed_.backend(), &kVoid_);
    collector_.setOutput(&this->output());
    this->record_.hasTimestamp = true;
    openRich(fn_->rich(), this->streamingContext());
    openRich(windowFunction_->rich(), this->streamingContext());
  }
  void close() override {
    closeRich(windowFunction_->rich());
    closeRich(fn_->rich());
    keyed_.dispose();
  }

 protected:
  std::unique_ptr<SliceFunction<IN, ACC, V>> fn_;
  std::unique_ptr<Function> windowFunction_;
  // No window function: results go out as they are, nothing is told of clears.
  const bool passThrough_;
  const std::string lateDataTag_;

  KeyedStateHandler<K> keyed_;
  FunctionStateHandler functionState_;
  InternalValueState<VoidNamespace, Stored>* stored_ = nullptr;
  Stored scratch_;
  const char* storedName_ = nullptr;  // stored_'s state name
  std::vector<K> written_;            // keys the last snapshot wrote into stored_
  // Where the backend takes them (hashmap), a snapshot takes a frozen copy.
  SnapshotEntries<K> entries_;
  InternalTimerService<K, W> generalTimers_;  // a restored general operator's, to take over
  Output<IN>* lateOutput_ = nullptr;
  std::vector<V> values_;
  SideOutputs sideOutputs_;
  ProcessCtxImpl processCtx_;
  ScopedStateStore<W> windowStore_;
  ScopedStateStore<VoidNamespace> globalStore_;
  const VoidNamespace kVoid_{};
  TimestampedCollector<OUT> collector_;
};

template <class K, class IN, class ACC, class V, class OUT>
class SlicingWindowOperator final
    : public TableWindowOperator<K, IN, ACC, V, OUT, StoredSlices<ACC>,
                                 SlicingWindowOperator<K, IN, ACC, V, OUT>>,
      private window::SliceScheduler::Listener {
  using Base = TableWindowOperator<K, IN, ACC, V, OUT, StoredSlices<ACC>, SlicingWindowOperator>;
  using typename Base::Function;
  using typename Base::ProcessCtxImpl;
  using typename Base::W;
  using WindowId = window::WindowId;
  using Stored = StoredSlices<ACC>;
  using Base::collector_;
  using Base::fn_;
  using Base::functionState_;
  using Base::generalTimers_;
  using Base::keyed_;
  using Base::lateOutput_;
  using Base::passThrough_;
  using Base::processCtx_;
  using Base::scratch_;
  using Base::sideOutputs_;
  using Base::stored_;
  using Base::values_;
  using Base::windowFunction_;
  friend ProcessCtxImpl;

 public:
  explicit SlicingWindowOperator(SlicingWindowSpec<K, IN, ACC, V, OUT> spec)
      : Base(spec),
        spec_(std::move(spec)),
        slicing_(spec_.windows),
        processingTime_(spec_.windows.processingTime),
        cleanup_(!processingTime_, spec_.allowedLateness),
        combines_(spec_.windows.kind != window::AlignedKind::kTumbling) {
    scheduler_.init(slicing_, cleanup_, !passThrough_);
  }

  void initializeState(const OperatorStateRestore* restore) override {
    KeyedStateBackend& backend = this->initializeTableState(restore, window::kSlicedWindowState);
    if (processingTime_) {
      storedRefires_ = &getOrCreateValueState<VoidNamespace>(
          backend, ValueStateDescriptor<StoredRefires>(window::kSlicedWindowRefireState));
    }
    checkLayout();
    if (restore != nullptr) {
      takeOverGeneralState(*restore);
      loadSlices();
      if (processingTime_) {
        loadRefires();
        // Keys restored from a later time than the operator's take the
        // slow path until a timer fired windows through that time.
        if (restoredAhead_) registerTimer(maxRestoredWatermark_);
      }
    }
  }

  // The slices go to the snapshot (handFrozen or writeStored); the windows to fire
  // again go into keyed state and out of it once the checkpoint completed
  // (its snapshot is written by then, so removing them copies nothing), or
  // at the next snapshot.
  OperatorStateSnapshot snapshotState(int64_t checkpointId) override {
    this->removeWritten();
    removeWrittenRefires();
    if (this->handsFrozen()) {
      FrozenSlices frozen;
      frozen.keys.reserve(frozenKeys_);
      frozen.slices.reserve(frozenSlices_);
      forEachKeyWithSlices([&](const K& key, Entry& e) { freeze(key, e, frozen); });
      frozenKeys_ = frozen.keys.size();
      frozenSlices_ = frozen.slices.size();
      this->handFrozen(std::move(frozen),
                       [](FrozenSlices& f, auto&& add) { FrozenSlices::fill(f, add); });
    } else {
      forEachKeyWithSlices([&](const K& key, Entry& e) {
        toStored(e, scratch_);
        this->writeStored(key);
      });
    }
    refires_.forEach([&](const K& key, std::vector<std::pair<WindowId, ACC>>& windows) {
      StoredRefires stored;
      stored.first = firedThrough_;
      if (auto* found = index_.find(key)) {
        stored.first = std::max(stored.first, keys_[found->value.k].restoredWatermark);
      }
      for (const auto& [w, acc] : windows) stored.second.emplace_back(slicing_.window(w), acc);
      keyed_.setCurrentKey(key);
      storedRefires_->update(stored);
      writtenRefires_.push_back(key);
    });
    return this->finishSnapshot(checkpointId);
  }
  void notifyCheckpointComplete(int64_t checkpointId) override {
    Base::notifyCheckpointComplete(checkpointId);
    removeWrittenRefires();
  }

  ~SlicingWindowOperator() override { *alive_ = false; }
  void close() override {
    *alive_ = false;
    Base::close();
  }

  // A batch's records, each key extracted a few records ahead so that its
  // table slot is fetched while the records before it are added. Only for
  // keys that are cheap to copy; event time only.
  void processElements(const StreamRecord<IN>* records, size_t n) override {
    if constexpr (std::is_trivially_copyable_v<K> && sizeof(K) <= 16) {
      if (!processingTime_ && n > kAhead) {
        K keys[kAhead];
        for (size_t i = 0; i < kAhead; ++i) {
          keys[i] = spec_.key(records[i].value);
          index_.prefetch(keys[i]);
        }
        for (size_t i = 0; i < n; ++i) {
          K& ring = keys[i % kAhead];
          const K key = ring;
          if (i + kAhead < n) {
            ring = spec_.key(records[i + kAhead].value);
            index_.prefetch(ring);
          }
          eventTimeElement(records[i], key);
        }
        return;
      }
    }
    for (size_t i = 0; i < n; ++i) processElement(records[i]);
  }
  void processElement(const StreamRecord<IN>& r) override {
    if (processingTime_) {
      processingTimeElement(r);
      return;
    }
    eventTimeElement(r, spec_.key(r.value));
  }

  void processWatermark(int input, Watermark watermark) override {
    watermark_ = watermark.timestamp;
    if (processingTime_) {  // only forwarded: processing-time timers fire windows
      OneInputOperator<IN, OUT>::processWatermark(input, watermark);
      return;
    }
    invalidateCache();
    if (restoredAhead_ && watermark_ >= maxRestoredWatermark_) restoredAhead_ = false;
    scheduler_.advance(watermark_, *this);
    sweepEmptyKeys();
    OneInputOperator<IN, OUT>::processWatermark(input, watermark);
  }

  // For tests: keys with slices, keys in the table (with and without
  // slices), slices with data.
  size_t numKeys() const { return index_.size() - emptyKeys_; }
  size_t tableSize() const { return index_.size(); }
  size_t numSlices() const { return scheduler_.numSlices(); }

 private:
  // No slice: no timestamp is in slice INT64_MIN (the minimum timestamp is
  // refused, and slices are at least 1 ms long).
  static constexpr int64_t kNoSlice = INT64_MIN;
  struct Slice {
    int64_t id = kNoSlice;
    ACC acc{};
  };
  // A key's slot in the table: its number and its newest slice (id kNoSlice
  // when it has none, which happens only while it is being added).
  struct Entry {
    uint32_t k = 0;
    Slice newest;
  };
  // The rest of a key, by number.
  struct KeyState {
    K key{};
    std::vector<Slice> older;  // the slices before the newest, ascending ids
    // The watermark this key's restored state had seen: windows ending (and
    // cleaned up) at or before it fired (were cleaned up) before the restore.
    int64_t restoredWatermark = kMinTimestamp;
    bool used = false;
    bool empty = false;  // in the table without slices, counted in emptyKeys_
  };
  // A key's slices in ascending order: the older ones, then the newest.
  class Slices {
   public:
    Slices(Entry& e, KeyState& ks) : e_(e), older_(ks.older) {}
    size_t size() const { return older_.size() + (e_.newest.id == kNoSlice ? 0 : 1); }
    const Slice& operator[](size_t i) const { return i < older_.size() ? older_[i] : e_.newest; }

   private:
    Entry& e_;
    std::vector<Slice>& older_;
  };
  // Sliding and cumulating windows: the merge of a key's slices up to
  // `through` (a window id), from the first slice of the last window fired.
  struct Combined {
    window::TwoStacks<ACC> stacks;
    WindowId through = 0;
    bool valid = false;
  };

  int64_t processingTimeForContext() { return this->context().clock().currentTimeMillis(); }
  int64_t watermarkForContext() const { return watermark_; }

  // The table as a snapshot takes it where the backend takes a frozen copy
  // (TableWindowOperator::handFrozen): what toStored() makes of each key
  // with slices, unserialized. Per key its key, the watermark of its entry
  // and how many of `slices` (in key order) are its; the windows some keys
  // fire again, by key index, ascending.
  struct FrozenSlices {
    struct Key {
      K key;
      int64_t watermark;
      uint32_t slices;
    };
    std::vector<Key> keys;
    std::vector<std::pair<int64_t, ACC>> slices;
    std::vector<std::pair<uint32_t, std::vector<TimeWindow>>> refires;

    // Each key's entry, as toStored() makes it, to `add` (on the thread
    // that writes the snapshot).
    template <class Add>
    static void fill(FrozenSlices& f, Add&& add) {
      Stored s;
      size_t slice = 0;
      size_t refire = 0;
      for (uint32_t i = 0; i < f.keys.size(); ++i) {
        const Key& k = f.keys[i];
        s.clear();
        s.watermark = k.watermark;
        for (uint32_t n = 0; n < k.slices; ++n, ++slice) {
          s.add(f.slices[slice].first, f.slices[slice].second);
        }
        if (refire < f.refires.size() && f.refires[refire].first == i) {
          s.refire = std::move(f.refires[refire++].second);
        }
        add(k.key, s);
      }
    }
  };
  // Appends `e`'s key's entry to `frozen`.
  void freeze(const K& key, Entry& e, FrozenSlices& frozen) {
    KeyState& ks = keys_[e.k];
    const Slices slices(e, ks);
    const auto index = static_cast<uint32_t>(frozen.keys.size());
    frozen.keys.push_back({key, storedWatermark(ks), static_cast<uint32_t>(slices.size())});
    for (size_t i = 0; i < slices.size(); ++i) {
      frozen.slices.emplace_back(slices[i].id, slices[i].acc);
    }
    if (auto it = refire_.find(e.k); it != refire_.end()) [[unlikely]] {
      std::vector<TimeWindow> windows;
      for (WindowId w : it->second) windows.push_back(slicing_.window(w));
      frozen.refires.emplace_back(index, std::move(windows));
    }
  }
  // Calls f(key, entry) for every key with slices, in table order, i.e.
  // at random in keys_: each key's KeyState is fetched kAhead keys before.
  template <class F>
  void forEachKeyWithSlices(F&& f) {
    constexpr size_t kAhead = 8;
    std::array<std::pair<const K*, Entry*>, kAhead> ahead;
    size_t seen = 0;
    index_.forEach([&](const K& key, Entry& e) {
      if (e.newest.id == kNoSlice) return;
      __builtin_prefetch(&keys_[e.k]);
      auto& slot = ahead[seen++ % kAhead];
      if (seen > kAhead) f(*slot.first, *slot.second);
      slot = {&key, &e};
    });
    for (size_t i = seen > kAhead ? seen - kAhead : 0; i < seen; ++i) {
      f(*ahead[i % kAhead].first, *ahead[i % kAhead].second);
    }
  }
  // The watermark a key's stored entry records: for processing time, the
  // time the windows fired through.
  int64_t storedWatermark(const KeyState& ks) const {
    return std::max(ks.restoredWatermark, processingTime_ ? firedThrough_ : watermark_);
  }

  // --- the table -------------------------------------------------------------

  // The table's entry of `key`, added (without slices) when it has none.
  // Valid until the next key is added or removed.
  Entry& entry(const K& key) {
    auto [slot, added] = index_.tryEmplace(key);
    if (added) [[unlikely]] {
      uint32_t k;
      if (!freeKeys_.empty()) {
        k = freeKeys_.back();
        freeKeys_.pop_back();
      } else {
        k = static_cast<uint32_t>(keys_.size());
        keys_.emplace_back();
        if (combines_) combined_.emplace_back();
      }
      slot->value.k = k;
      keys_[k].key = key;
      keys_[k].used = true;
    }
    return slot->value;
  }
  // The entry of key number k (which has slices).
  Entry& entryOf(uint32_t k) {
    auto* slot = index_.find(keys_[k].key);
    SLUICE_ASSERT(slot != nullptr, "a key with slices is in the table");
    return slot->value;
  }
  void freeKey(uint32_t k) {
    KeyState& ks = keys_[k];
    index_.erase(ks.key);
    ks.used = false;
    ks.empty = false;
    ks.restoredWatermark = kMinTimestamp;
    ks.older.clear();
    if (combines_) {
      combined_[k].stacks.clear();
      combined_[k].valid = false;
    }
    refire_.erase(k);
    freeKeys_.push_back(k);
  }
  // Appends a slice newer than all of the key's (restore).
  void appendSlice(Entry& e, Slice slice) {
    if (e.newest.id != kNoSlice) {
      keys_[e.k].older.push_back(std::move(e.newest));
    } else if (keys_[e.k].empty) {
      keys_[e.k].empty = false;
      --emptyKeys_;
    }
    e.newest = std::move(slice);
    scheduler_.keysOf(e.newest.id, scheduleFrom()).push_back(e.k);
    if (processingTime_) registerWindowTimers(e.newest.id);
  }
  template <class F>
  void forEachKey(F&& f) {
    for (uint32_t k = 0; k < keys_.size(); ++k) {
      if (keys_[k].used) f(k);
    }
  }

  // Adds `value` to slice j of the key of `e`.
  void addToSlice(Entry& e, int64_t j, const IN& value) {
    const uint32_t k = e.k;
    if (e.newest.id == j) {
      fn_->add(e.newest.acc, value);
    } else if (e.newest.id < j) {  // a new newest slice (kNoSlice is below any j)
      if (e.newest.id != kNoSlice) {
        keys_[k].older.push_back(std::move(e.newest));
      } else if (keys_[k].empty) {
        keys_[k].empty = false;
        --emptyKeys_;
      }
      e.newest.id = j;
      fn_->first(e.newest.acc, value);
      keysOf(j).push_back(k);
    } else {
      std::vector<Slice>& older = keys_[k].older;
      auto it = std::lower_bound(older.begin(), older.end(), j,
                                 [](const Slice& s, int64_t id) { return s.id < id; });
      if (it != older.end() && it->id == j) {
        fn_->add(it->acc, value);
      } else {
        it = older.insert(it, Slice{j, ACC{}});
        fn_->first(it->acc, value);
        keysOf(j).push_back(k);
      }
    }
    if (combines_ && combined_[k].valid && j <= combined_[k].through) combined_[k].valid = false;
  }
  std::vector<uint32_t>& keysOf(int64_t j) {
    if (j != cacheSlice_ || cacheFirst_ > cacheLast_) return scheduler_.keysOf(j, scheduleFrom());
    if (cacheKeys_ == nullptr) cacheKeys_ = &scheduler_.keysOf(j, scheduleFrom());
    return *cacheKeys_;
  }
  // The time from which a new slice's windows are scheduled: the watermark,
  // or the processing time the windows fired through (a window that fired
  // already fires again from refires_).
  int64_t scheduleFrom() const { return processingTime_ ? firedThrough_ : watermark_; }

  // --- processing time -------------------------------------------------------

  void processingTimeElement(const StreamRecord<IN>& r) {
    const int64_t now = this->context().clock().currentTimeMillis();
    if (now <= firedThrough_ || restoredAhead_) [[unlikely]] {
      processingTimeAfterFiring(r, now);
      return;
    }
    if (now < cacheFirst_ || now > cacheLast_) [[unlikely]] {
      cacheSlice_ = slicing_.sliceOf(now);
      cacheFirst_ = slicing_.firstTimestamp(cacheSlice_);
      cacheLast_ = slicing_.lastTimestamp(cacheSlice_);
      cacheKeys_ = nullptr;
      registerWindowTimers(cacheSlice_);
    }
    Entry& e = entry(spec_.key(r.value));
    if (e.newest.id == cacheSlice_) [[likely]] {
      fn_->add(e.newest.acc, r.value);
      return;
    }
    addToSlice(e, cacheSlice_, r.value);
  }
  // An element when some window of its time may have fired already: the
  // clock is at or before the time the timers fired windows through, or
  // keys were restored from a later time than that. Each window of the
  // element's time that fired (for its key) fires again with what came
  // after; the others get it through its slice.
  void processingTimeAfterFiring(const StreamRecord<IN>& r, int64_t now) {
    const K key = spec_.key(r.value);
    int64_t fired = firedThrough_;
    if (restoredAhead_) {
      if (auto* found = index_.find(key)) {
        fired = std::max(fired, keys_[found->value.k].restoredWatermark);
      }
    }
    const int64_t j = slicing_.sliceOf(now);
    bool open = false;
    const WindowId last = slicing_.lastWindowOf(j);
    for (WindowId w = slicing_.firstWindowOf(j); w <= last; w += slicing_.windowStep()) {
      if (!slicing_.isWindow(w)) continue;
      if (slicing_.maxTimestamp(w) > fired) {
        open = true;
      } else {
        addRefire(key, w, r.value);
      }
    }
    if (!open) return;
    invalidateCache();  // slice j is not cached as on time
    registerWindowTimers(j);
    addToSlice(entry(key), j, r.value);
  }
  // Adds `value` to `key`'s accumulator of fired window w, which fires
  // again at the next timer run.
  void addRefire(const K& key, WindowId w, const IN& value) {
    std::vector<std::pair<WindowId, ACC>>& windows = refires_.tryEmplace(key).first->value;
    for (auto& [id, acc] : windows) {
      if (id == w) {
        fn_->add(acc, value);
        return;
      }
    }
    windows.emplace_back(w, ACC{});
    fn_->first(windows.back().second, value);
    refireOrder_.emplace_back(w, key);
    registerTimer(slicing_.maxTimestamp(w));
  }
  // Fires and cleans up the accumulators of fired windows ending at or
  // before t, by window end, then in the order they started.
  void fireRefires(int64_t t) {
    std::vector<std::pair<WindowId, K>> due;
    auto pending =
        std::stable_partition(refireOrder_.begin(), refireOrder_.end(),
                              [&](const auto& e) { return slicing_.maxTimestamp(e.first) > t; });
    due.assign(std::make_move_iterator(pending), std::make_move_iterator(refireOrder_.end()));
    refireOrder_.erase(pending, refireOrder_.end());
    std::stable_sort(due.begin(), due.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [w, key] : due) {
      auto* slot = refires_.find(key);
      SLUICE_ASSERT(slot != nullptr, "a window to fire again has its accumulator");
      std::vector<std::pair<WindowId, ACC>>& windows = slot->value;
      auto it =
          std::find_if(windows.begin(), windows.end(), [&](const auto& e) { return e.first == w; });
      SLUICE_ASSERT(it != windows.end(), "a window to fire again has its accumulator");
      const ACC acc = std::move(it->second);
      windows.erase(it);
      if (windows.empty()) refires_.erase(key);
      this->emitWindow(key, slicing_.window(w), slicing_.maxTimestamp(w), acc);
      if (!passThrough_) this->clearWindow(key, slicing_.window(w));
    }
  }
  // A task timer at the maxTimestamp of each window of slice j that has not
  // fired.
  void registerWindowTimers(int64_t j) {
    const WindowId last = slicing_.lastWindowOf(j);
    for (WindowId w = slicing_.firstWindowOf(j); w <= last; w += slicing_.windowStep()) {
      if (!slicing_.isWindow(w)) continue;
      const int64_t at = slicing_.maxTimestamp(w);
      if (at > firedThrough_) registerTimer(at);
    }
  }
  // A task timer at `at`, unless one is pending for that time already.
  void registerTimer(int64_t at) {
    if (!timers_.insert(at).second) return;
    this->context().registerProcessingTimer(at, [this, alive = alive_](int64_t t) {
      if (*alive) onProcessingTimer(t);
    });
  }
  // Fires and cleans up the windows ending at or before t.
  void onProcessingTimer(int64_t t) {
    timers_.erase(t);
    firedThrough_ = std::max(firedThrough_, t);
    if (restoredAhead_ && firedThrough_ >= maxRestoredWatermark_) restoredAhead_ = false;
    // The cached slice may have been dropped: the next element re-registers.
    invalidateCache();
    if (!refireOrder_.empty()) fireRefires(t);
    scheduler_.advance(t, *this);
    sweepEmptyKeys();
  }

  // --- elements --------------------------------------------------------------

  static constexpr size_t kAhead = 8;
  // An event-time element of `key`.
  void eventTimeElement(const StreamRecord<IN>& r, const K& key) {
    if (!r.hasTimestamp) [[unlikely]]
      throwNoTimestamp(spec_.assignerName);
    const int64_t ts = r.timestamp;
    if (ts < cacheFirst_ || ts > cacheLast_) [[unlikely]] {
      if (ts == kMinTimestamp) throwNoTimestamp(spec_.assignerName);
      moveCache(ts);
    }
    if (!cacheOnTime_) [[unlikely]] {
      lateElement(r);
      return;
    }
    Entry& e = entry(key);
    if (e.newest.id == cacheSlice_) [[likely]] {
      fn_->add(e.newest.acc, r.value);
      return;
    }
    addToSlice(e, cacheSlice_, r.value);
  }

  // The slice of `ts` becomes the cached one: its timestamps, and whether an
  // element in it is on time (no window of it fired yet, no key restored
  // with a later watermark), so that it only needs adding.
  void moveCache(int64_t ts) {
    cacheSlice_ = slicing_.sliceOf(ts);
    cacheFirst_ = std::max(slicing_.firstTimestamp(cacheSlice_), kMinTimestamp + 1);
    cacheLast_ = slicing_.lastTimestamp(cacheSlice_);
    cacheKeys_ = nullptr;
    cacheOnTime_ =
        !restoredAhead_ && slicing_.maxTimestamp(slicing_.firstWindowOf(cacheSlice_)) > watermark_;
  }
  void invalidateCache() {
    cacheFirst_ = kMaxTimestamp;
    cacheLast_ = kMinTimestamp;
    cacheKeys_ = nullptr;
  }

  // An element with a window that fired or is late already (or of a key
  // restored with a later watermark than the operator's): what the general
  // operator does for each of its windows, with the key's watermark.
  void lateElement(const StreamRecord<IN>& r) {
    const K key = spec_.key(r.value);
    const int64_t j = cacheSlice_;
    int64_t keyWatermark = kMinTimestamp;
    if (auto* found = index_.find(key)) keyWatermark = keys_[found->value.k].restoredWatermark;
    const int64_t lateness = std::max(watermark_, keyWatermark);
    windows_.clear();
    const WindowId last = slicing_.lastWindowOf(j);
    for (WindowId w = slicing_.firstWindowOf(j); w <= last; w += slicing_.windowStep()) {
      if (slicing_.isWindow(w) && !cleanup_.isWindowLate(slicing_.maxTimestamp(w), lateness)) {
        windows_.push_back(w);
      }
    }
    if (windows_.empty()) {
      if (cleanup_.isElementLate(r.timestamp, lateness)) {
        this->lateRecord(r);
      }
      return;
    }
    Entry& e = entry(key);
    const uint32_t k = e.k;
    addToSlice(e, j, r.value);
    // Latest window first, as the assigners list them.
    for (auto it = windows_.rbegin(); it != windows_.rend(); ++it) {
      const int64_t maxTimestamp = slicing_.maxTimestamp(*it);
      if (maxTimestamp <= watermark_) {
        if (std::optional<ACC> acc = mergeSlices(k, *it)) emit(k, *it, *acc);
      } else if (maxTimestamp <= keys_[k].restoredWatermark) {
        std::vector<WindowId>& again = refire_[k];
        if (std::find(again.begin(), again.end(), *it) == again.end()) again.push_back(*it);
      }
    }
  }

  // --- firing ----------------------------------------------------------------

  void fireWindow(WindowId w, uint32_t k) override {
    if (slicing_.maxTimestamp(w) <= keys_[k].restoredWatermark && !takeRefire(k, w)) return;
    if (!combines_) {  // tumbling: the window is slice w, usually the key's oldest
      for (const Slice& s : keys_[k].older) {
        if (s.id == w) {
          emit(k, w, s.acc);
          return;
        }
      }
      const Entry& e = entryOf(k);
      if (e.newest.id == w) emit(k, w, e.newest.acc);
      return;
    }
    if (std::optional<ACC> acc = combine(k, w)) emit(k, w, *acc);
  }
  void cleanupWindow(WindowId w, uint32_t k) override {
    if (cleanup_.cleanupTime(slicing_.maxTimestamp(w)) <= keys_[k].restoredWatermark) return;
    this->clearWindow(keys_[k].key, slicing_.window(w));
  }
  void dropSlice(int64_t j, uint32_t k) override {
    std::vector<Slice>& older = keys_[k].older;
    if (!older.empty()) {
      SLUICE_ASSERT(older.front().id == j, "a key's oldest slice is the one the scheduler drops");
      older.erase(older.begin());
      return;
    }
    Entry& e = entryOf(k);
    SLUICE_ASSERT(e.newest.id == j, "a key's oldest slice is the one the scheduler drops");
    (void)j;
    // The key stays in the table, without slices, as it is likely to come
    // back; sweepEmptyKeys() removes it if it does not.
    e.newest = Slice{};
    KeyState& ks = keys_[k];
    ks.empty = true;
    ks.restoredWatermark = kMinTimestamp;
    ++emptyKeys_;
    if (combines_) {
      combined_[k].stacks.clear();
      combined_[k].valid = false;
    }
    refire_.erase(k);
  }
  // Removes the keys without slices once they are as many as those with
  // (and more than a few): a key coming back every window stays, memory
  // stays bounded by twice the live keys, and each sweep is paid for by the
  // keys that emptied since the last one.
  // A key restored from a later time than the operator's (processing time:
  // with windows to fire again) stays until the operator got there.
  void sweepEmptyKeys() {
    if (emptyKeys_ < 1024 || emptyKeys_ < index_.size() - emptyKeys_) return;
    const int64_t progress = processingTime_ ? firedThrough_ : watermark_;
    size_t kept = 0;
    forEachKey([&](uint32_t k) {
      if (!keys_[k].empty) return;
      if (keys_[k].restoredWatermark > progress) {
        ++kept;
      } else {
        freeKey(k);
      }
    });
    emptyKeys_ = kept;
  }
  bool takeRefire(uint32_t k, WindowId w) {
    auto it = refire_.find(k);
    if (it == refire_.end()) return false;
    auto pos = std::find(it->second.begin(), it->second.end(), w);
    if (pos == it->second.end()) return false;
    it->second.erase(pos);
    if (it->second.empty()) refire_.erase(it);
    return true;
  }

  // The merge of key k's slices in window w, one by one (windows that fire
  // out of the watermark's order: late elements).
  std::optional<ACC> mergeSlices(uint32_t k, WindowId w) {
    const WindowId first = slicing_.firstSliceOf(w);
    const Slices slices(entryOf(k), keys_[k]);
    std::optional<ACC> acc;
    for (size_t i = 0; i < slices.size(); ++i) {
      const Slice& s = slices[i];
      if (s.id < first) continue;
      if (s.id > w) break;
      if (acc) {
        fn_->merge(*acc, s.acc);
      } else {
        acc = s.acc;
      }
    }
    return acc;
  }
  // The same for the next window in the watermark's order, through the
  // key's TwoStacks: evict the slices before the window, push the new ones.
  std::optional<ACC> combine(uint32_t k, WindowId w) {
    Combined& c = combined_[k];
    const Slices slices(entryOf(k), keys_[k]);
    const WindowId first = slicing_.firstSliceOf(w);
    auto merge = [this](ACC& a, const ACC& b) { fn_->merge(a, b); };
    if (!c.valid || w < c.through) {
      c.stacks.clear();
      c.through = first - 1;
      c.valid = true;
    }
    c.stacks.evictBefore(first < kMinTimestamp ? kMinTimestamp : static_cast<int64_t>(first),
                         merge);
    size_t from = slices.size();
    while (from > 0 && slices[from - 1].id > c.through) --from;
    for (size_t i = from; i < slices.size() && slices[i].id <= w; ++i) {
      if (slices[i].id >= first) c.stacks.push(slices[i].id, slices[i].acc, merge);
    }
    c.through = w;
    return c.stacks.query(merge);
  }

  void emit(uint32_t k, WindowId w, const ACC& acc) {
    this->emitWindow(keys_[k].key, slicing_.window(w), slicing_.maxTimestamp(w), acc);
  }

  // --- state -----------------------------------------------------------------

  void toStored(Entry& e, Stored& s) {
    const uint32_t k = e.k;
    KeyState& ks = keys_[k];
    const Slices slices(e, ks);
    s.clear();
    s.watermark = storedWatermark(ks);
    for (size_t i = 0; i < slices.size(); ++i) s.add(slices[i].id, slices[i].acc);
    if (auto it = refire_.find(k); it != refire_.end()) {
      for (WindowId w : it->second) s.refire.push_back(slicing_.window(w));
    }
  }
  // The slicing in operator state: a restore must cut windows the same way.
  void checkLayout() {
    ListState<std::string>& layout = functionState_.backend().getUnionListState(
        ListStateDescriptor<std::string>(window::kSlicedWindowLayoutState));
    const std::string current = spec_.windows.describe();
    for (const std::string& restored : layout.get()) {
      if (restored != current) window::failLayoutChanged(this->operatorName(), restored, current);
    }
    layout.update({current});
  }

  // Processing time: restored accumulators of windows to fire again. The
  // key's windows fired through the time stored with them, which the key
  // keeps as its restored watermark (in the table, without slices if it
  // has none) so that none of them fires again from a slice.
  void loadRefires() {
    takeRestored(window::kSlicedWindowRefireState, *storedRefires_,
                 [&](const K& key, StoredRefires& stored) {
                   Entry& e = entry(key);
                   const uint32_t k = e.k;
                   if (e.newest.id == kNoSlice && !keys_[k].empty) {
                     keys_[k].empty = true;
                     ++emptyKeys_;
                   }
                   restoreKey(k, stored.first);
                   for (auto& [window, acc] : stored.second) {
                     const WindowId id = restoredWindowId(window);
                     refires_.tryEmplace(key).first->value.emplace_back(id, std::move(acc));
                     refireOrder_.emplace_back(id, key);
                     registerTimer(slicing_.maxTimestamp(id));
                   }
                 });
  }
  void removeWrittenRefires() {
    this->removeWrittenFrom(window::kSlicedWindowRefireState, storedRefires_, writtenRefires_);
  }

  // Each restored entry of keyed state `name` (this subtask's key groups),
  // taken out of the backend: f(key, value).
  template <class T, class F>
  void takeRestored(const char* name, InternalValueState<VoidNamespace, T>& state, F&& f) {
    keyed_.backend().forEachKey(name, [&](std::string_view bytes, int32_t) {
      const K key = KeyedStateHandler<K>::deserializeKey(bytes);
      keyed_.setCurrentKey(key);
      std::optional<T> value = state.value();
      state.clear();
      if (value) f(key, *value);
    });
  }
  // The id of a restored window, which must be one of this job's windows.
  WindowId restoredWindowId(const TimeWindow& w) {
    WindowId id;
    if (!slicing_.idOf(w, id)) {
      window::failLayoutChanged(this->operatorName(), "a window " + w.toString(),
                                spec_.windows.describe());
    }
    return id;
  }

  // Restored slices of this subtask's key groups move into the table.
  void loadSlices() {
    takeRestored(window::kSlicedWindowState, *stored_, [&](const K& key, Stored& stored) {
      if (stored.count == 0) return;
      std::vector<std::pair<int64_t, ACC>> slices;
      for (uint32_t i = 0; i < stored.count; ++i) slices.push_back(std::move(stored.at(i)));
      std::sort(slices.begin(), slices.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      Entry& e = entry(key);
      const uint32_t k = e.k;
      for (auto& [j, acc] : slices) appendSlice(e, Slice{j, std::move(acc)});
      restoreKey(k, stored.watermark);
      for (const TimeWindow& w : stored.refire) refire_[k].push_back(restoredWindowId(w));
    });
  }
  void restoreKey(uint32_t k, int64_t watermark) {
    keys_[k].restoredWatermark = std::max(keys_[k].restoredWatermark, watermark);
    if (watermark > (processingTime_ ? firedThrough_ : watermark_)) {
      restoredAhead_ = true;
      maxRestoredWatermark_ = std::max(maxRestoredWatermark_, watermark);
    }
  }

  // A snapshot of the general window operator (tumbling windows): each
  // (key, window) its timers name becomes a slice; a window with a timer at
  // its maxTimestamp has still to fire, the others fired already.
  void takeOverGeneralState(const OperatorStateRestore& restore) {
    KeyedStateBackend& backend = keyed_.backend();
    if (!window::hasKeyedEntries(backend, window::kGeneralWindowState)) return;
    const std::string& name = this->operatorName();
    if (processingTime_) {
      window::failGeneralStateImport(name,
                                     "its windows are processing-time windows, whose state the "
                                     "sliced operator cannot take over");
    }
    if (spec_.windows.kind != window::AlignedKind::kTumbling) {
      window::failGeneralStateNotSliceable(name, spec_.windows.describe());
    }
    fn_->openGeneralState(backend);
    generalTimers_.initForOperator(
        this->context(), [](const TimerData<K, W>&) {}, [](const TimerData<K, W>&) {}, &restore);
    if (generalTimers_.numProcessingTimeTimers() != 0) {
      window::failGeneralStateImport(name,
                                     "it has processing-time timers (a trigger other than "
                                     "the default)");
    }
    struct Windows {
      std::vector<std::pair<W, bool>> windows;  // window, has to fire
    };
    FlatHashMap<K, Windows, TableKeyHash<K>> byKey;
    generalTimers_.forEachTimer(TimeDomain::EVENT_TIME, [&](const TimerData<K, W>& t) {
      auto& ws = byKey.tryEmplace(t.key).first->value.windows;
      const bool fires = t.timestamp == t.ns.maxTimestamp();
      auto it = std::find_if(ws.begin(), ws.end(), [&](const auto& e) { return e.first == t.ns; });
      if (it == ws.end()) {
        ws.emplace_back(t.ns, fires);
      } else {
        it->second = it->second || fires;
      }
    });
    byKey.forEach([&](const K& key, Windows& ws) {
      keyed_.setCurrentKey(key);
      int64_t fired = kMinTimestamp;
      std::vector<std::pair<WindowId, ACC>> slices;
      std::vector<WindowId> pending;
      for (const auto& [w, fires] : ws.windows) {
        std::optional<ACC> acc = fn_->takeGeneralState(w);
        if (!acc) continue;
        WindowId id;
        if (!slicing_.idOf(w, id)) {
          window::failGeneralStateImport(
              name, "its window " + w.toString() + " is not one of " + spec_.windows.describe());
        }
        slices.emplace_back(id, std::move(*acc));
        if (fires) {
          pending.push_back(id);
        } else {
          fired = std::max(fired, w.maxTimestamp());
        }
      }
      if (slices.empty()) return;
      std::sort(slices.begin(), slices.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      Entry& e = entry(key);
      const uint32_t k = e.k;
      for (auto& [id, acc] : slices) {
        // Tumbling: a window is a slice.
        appendSlice(e, Slice{static_cast<int64_t>(id), std::move(acc)});
      }
      restoreKey(k, fired);
      for (WindowId id : pending) {
        if (slicing_.maxTimestamp(id) <= fired) refire_[k].push_back(id);
      }
    });
    if (window::hasKeyedEntries(backend, window::kGeneralWindowState)) {
      window::failGeneralStateImport(
          name, "some windows have no timer (their cleanup time is the end of time)");
    }
  }

  SlicingWindowSpec<K, IN, ACC, V, OUT> spec_;
  window::Slicing slicing_;
  const bool processingTime_;
  window::WindowCleanup cleanup_;
  const bool combines_;  // sliding or cumulating: windows merge slices
  window::SliceScheduler scheduler_;

  FlatHashMap<K, Entry, TableKeyHash<K>> index_;
  std::vector<KeyState> keys_;
  std::vector<Combined> combined_;  // per key, when combines_
  std::vector<uint32_t> freeKeys_;
  size_t emptyKeys_ = 0;
  // Per key: windows that fired before the restore and have to fire again
  // (an element came in before the watermark caught up). Rare.
  std::map<uint32_t, std::vector<WindowId>> refire_;

  int64_t watermark_ = kMinTimestamp;
  // Processing time: the times of the task timers registered and not fired
  // yet (one per pending window end), and whether the operator is still
  // there for them (cleared at close).
  std::set<int64_t> timers_;
  // Processing time: the latest time a timer fired windows through; the
  // accumulators of fired windows that got elements again, per key, and
  // the order they started in; in a snapshot, keyed state
  // "window-slices-refire" (per key: the time its windows fired through,
  // and those windows with their accumulators), and the keys written there.
  using StoredRefires = std::pair<int64_t, std::vector<std::pair<TimeWindow, ACC>>>;
  int64_t firedThrough_ = kMinTimestamp;
  FlatHashMap<K, std::vector<std::pair<WindowId, ACC>>, TableKeyHash<K>> refires_;
  std::vector<std::pair<WindowId, K>> refireOrder_;
  InternalValueState<VoidNamespace, StoredRefires>* storedRefires_ = nullptr;
  std::vector<K> writtenRefires_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // The sizes of the last frozen copy, reserved for the next.
  size_t frozenKeys_ = 0;
  size_t frozenSlices_ = 0;
  // Some key was restored with a watermark ahead of the operator's.
  bool restoredAhead_ = false;
  int64_t maxRestoredWatermark_ = kMinTimestamp;

  // The slice of the last element: its timestamps, its scheduler key list
  // (once looked up), whether elements in it only need adding.
  int64_t cacheSlice_ = 0;
  int64_t cacheFirst_ = kMaxTimestamp;
  int64_t cacheLast_ = kMinTimestamp;
  bool cacheOnTime_ = false;
  std::vector<uint32_t>* cacheKeys_ = nullptr;

  std::vector<WindowId> windows_;
};

}  // namespace sluice::internal
