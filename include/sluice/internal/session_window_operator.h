// The session window operator: event-time session windows with a static gap
// (EventTimeSessionWindows::withGap) and an incremental function (reduce,
// aggregate, the field aggregations), with or without a window function,
// the default trigger and no evictor. WindowedStream picks it over the
// general WindowOperator (window_operator.h) when `pipeline.window.slicing`
// is on and the job's state backend is `hashmap`; both give the same results.
//
// The general operator keeps, per key, a MergingWindowSet in keyed state, an
// accumulator per window in keyed state (the window serialized as namespace
// on every element) and, per window, a firing and a cleanup timer that every
// merge deletes and registers again. This operator keeps a table of its own
// in memory: a flat hash map from the key to its number, and per key its
// open sessions {start, end, accumulator, whether it still has to fire},
// sorted by start. Sessions are disjoint and never touch (Flink's
// TimeWindow.intersects counts touching windows as intersecting), so an
// element's window [ts, ts + gap) merges with a contiguous run of them,
// found by a scan of the key's few sessions, and the merge happens in place.
// What is due when, the window::SessionQueue keeps once for the whole
// operator, with lazy invalidation instead of timer deletes.
//
// Flink's semantics are the general operator's, step for step:
//   - merging: the accumulators of the merged sessions merge into the
//     earliest one's (the earliest, then the merge of the later ones in
//     order, as the state backend's mergeNamespaces does), then the element
//     is added; a merge whose result would already be cleaned up fails with
//     Flink's error;
//   - firing (EventTimeTrigger): a session fires when the watermark reaches
//     end - 1; an element (on time or within the allowed lateness) that
//     lands in a session whose end - 1 the watermark has passed fires it at
//     once, with what it holds now; a session that grew past the watermark
//     by a merge fires again when the watermark reaches its new end;
//   - cleanup at end - 1 + allowedLateness (saturating; at the end of time
//     never), where a ProcessWindowFunction's clear() runs;
//   - an element whose own new session is already late (cleanup time <=
//     watermark) and that joins no session goes to the late side output, or
//     counts in numLateRecordsDropped;
//   - output timestamps end - 1; the ProcessWindowFunction's context:
//     window, watermark, windowState() (namespaced by the session window,
//     as the general operator does for merging windows; Flink refuses
//     per-window state for merging windows), globalState(), side outputs.
// Windows that fire at the same watermark fire in order of their firing
// time, then by key number (Flink does not order timers of equal timestamp).
//
// State. A snapshot holds the table as the entries of keyed state
// "window-sessions" (one value per key: its sessions), handed to it as the
// sliced operator's slices are; a restore loads the entries
// of the subtask's key groups and removes them, so rescaling redistributes
// sessions by key group as any keyed state. A snapshot of the general
// operator with event-time sessions (its "merging-window-set",
// "window-contents" and event-time timers) is taken over.
//
// One class per (key, input, accumulator, value, output) types: the
// incremental function (SliceFunction) and the window function
// (InternalWindowFunction) are run-time strategies. Task thread only.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sluice/core/assert.h>
#include <sluice/core/flat_hash_map.h>
#include <sluice/core/owned.h>
#include <sluice/internal/slicing_window_operator.h>
#include <sluice/internal/window_operator.h>
#include <sluice/window/merging_window_set.h>
#include <sluice/window/session_queue.h>
#include <sluice/window/sliced_state.h>

namespace sluice::internal {

// A key's entry in keyed state "window-sessions", written while a snapshot
// is taken: its sessions, ascending, each with whether it still has to fire
// (it has not fired since its end last moved past the watermark).
template <class ACC>
struct StoredSession {
  int64_t start = 0;
  int64_t end = 0;
  bool firePending = false;
  ACC acc{};
};
template <class ACC>
struct StoredSessions {
  std::vector<StoredSession<ACC>> sessions;
};

}  // namespace sluice::internal

namespace sluice {

template <class ACC>
struct TypeSerializer<internal::StoredSessions<ACC>> {
  using Stored = internal::StoredSessions<ACC>;
  static constexpr size_t kMinEncodedSize = 1;
  static void serialize(const Stored& v, DataOutputView& out) {
    out.writeVarUint(v.sessions.size());
    for (const auto& s : v.sessions) {
      out.writeI64(s.start);
      out.writeI64(s.end);
      out.writeBool(s.firePending);
      TypeSerializer<ACC>::serialize(s.acc, out);
    }
  }
  static void deserialize(Stored& v, DataInputView& in) {
    v.sessions.clear();
    const uint64_t count = in.readVarUintFor("session count");
    for (uint64_t i = 0; i < count; ++i) {
      const size_t at = in.position();
      internal::StoredSession<ACC> s;
      s.start = in.readI64();
      s.end = in.readI64();
      s.firePending = in.readBool();
      TypeSerializer<ACC>::deserialize(s.acc, in);
      if (s.end <= s.start) in.failAt(at, "session window with end <= start");
      if (in.remaining() == 0 && i + 1 < count) in.failAt(at, "sessions missing");
      v.sessions.push_back(std::move(s));
    }
  }
  static std::string schema() {
    return "SessionWindowKey{sessions:list<tuple<int64,int64,bool," +
           TypeSerializer<ACC>::schema() + ">>}";
  }
};

}  // namespace sluice

namespace sluice::internal {

// What the API passes to the operator.
template <class K, class IN, class ACC, class V, class OUT>
struct SessionWindowSpec : TableWindowSpec<K, IN, ACC, V, OUT> {
  int64_t gap = 1;
};

template <class K, class IN, class ACC, class V, class OUT>
class SessionWindowOperator final
    : public TableWindowOperator<K, IN, ACC, V, OUT, StoredSessions<ACC>,
                                 SessionWindowOperator<K, IN, ACC, V, OUT>> {
  using Base = TableWindowOperator<K, IN, ACC, V, OUT, StoredSessions<ACC>, SessionWindowOperator>;
  using typename Base::Function;
  using typename Base::ProcessCtxImpl;
  using typename Base::W;
  using Stored = StoredSessions<ACC>;
  using Base::collector_;
  using Base::fn_;
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
  // Nothing due (a key without sessions, or whose sessions end at the end of time).
  static constexpr int64_t kNotDue = kMaxTimestamp;

 public:
  explicit SessionWindowOperator(SessionWindowSpec<K, IN, ACC, V, OUT> spec)
      : Base(spec), spec_(std::move(spec)), cleanup_(true, spec_.allowedLateness) {}

  void initializeState(const OperatorStateRestore* restore) override {
    KeyedStateBackend& backend = this->initializeTableState(restore, window::kSessionWindowState);
    if (restore != nullptr) {
      if (window::hasKeyedEntries(backend, window::kSlicedWindowState)) {
        throw SluiceException("operator '" + this->operatorName() +
                              "': the restored state holds the window slices of the sliced "
                              "window operator ('" +
                              std::string(window::kSlicedWindowState) +
                              "'), not sessions; restore it into the windows it was taken with");
      }
      takeOverGeneralState(*restore);
      loadSessions();
    }
  }

  // The sessions go to the snapshot: as a frozen copy where the backend
  // takes one, else into the state (see TableWindowOperator).
  OperatorStateSnapshot snapshotState(int64_t checkpointId) override {
    this->removeWritten();
    if (this->handsFrozen()) {
      FrozenSessions frozen;
      frozen.keys.reserve(frozenKeys_);
      frozen.sessions.reserve(frozenSessions_);
      forEachKeyWithSessions([&](const KeyState& ks) {
        frozen.keys.emplace_back(ks.key, static_cast<uint32_t>(ks.sessions.size()));
        for (const Session& x : ks.sessions) {
          frozen.sessions.push_back(StoredSession<ACC>{x.start, x.end, x.firePending, x.acc});
        }
      });
      frozenKeys_ = frozen.keys.size();
      frozenSessions_ = frozen.sessions.size();
      this->handFrozen(std::move(frozen), [](FrozenSessions& f, auto&& add) {
        Stored s;
        auto next = f.sessions.begin();
        for (const auto& [key, n] : f.keys) {
          s.sessions.assign(next, next + n);
          next += n;
          add(key, s);
        }
      });
    } else {
      forEachKeyWithSessions([&](const KeyState& ks) {
        scratch_.sessions.clear();
        for (const Session& x : ks.sessions) {
          scratch_.sessions.push_back(StoredSession<ACC>{x.start, x.end, x.firePending, x.acc});
        }
        this->writeStored(ks.key);
      });
    }
    return this->finishSnapshot(checkpointId);
  }

  void processElement(const StreamRecord<IN>& r) override {
    if (!r.hasTimestamp || r.timestamp == kMinTimestamp) [[unlikely]]
      throwNoTimestamp(spec_.assignerName);
    const int64_t ts = r.timestamp;
    const int64_t end = saturatingAdd(ts, spec_.gap);
    const K key = spec_.key(r.value);
    auto* slot = index_.find(key);
    if (slot == nullptr) [[unlikely]] {
      // A new key: a new session, unless it is late already.
      if (cleanup_.isWindowLate(end - 1, watermark_)) {
        lateElement(r);
        return;
      }
      const uint32_t k = addKey(key);
      std::vector<Session>& ss = keys_[k].sessions;
      ss.emplace_back();
      ss.back().start = ts;
      ss.back().end = end;
      fn_->first(ss.back().acc, r.value);
      onElement(k, 0);
      return;
    }
    const uint32_t k = slot->value;
    std::vector<Session>& ss = keys_[k].sessions;
    // The sessions [i, j) intersect [ts, end): end >= start and end' >= ts.
    size_t i = 0;
    while (i < ss.size() && ss[i].end < ts) ++i;
    size_t j = i;
    while (j < ss.size() && ss[j].start <= end) ++j;
    if (i == j) {
      if (cleanup_.isWindowLate(end - 1, watermark_)) {
        lateElement(r);
        return;
      }
      Session& s = *ss.emplace(ss.begin() + static_cast<std::ptrdiff_t>(i));
      s.start = ts;
      s.end = end;
      fn_->first(s.acc, r.value);
      onElement(k, i);
      return;
    }
    Session& s = ss[i];
    const int64_t start = std::min(ts, s.start);
    const int64_t newEnd = std::max(end, ss[j - 1].end);
    if (j - i == 1 && start == s.start && newEnd == s.end) [[likely]] {
      // Inside one session: no merge.
      if (cleanup_.isWindowLate(s.end - 1, watermark_)) [[unlikely]] {
        // Only a session that ends at the end of time outlives its cleanup
        // time; as Flink, the element is skipped and the session forgotten.
        ss.erase(ss.begin() + static_cast<std::ptrdiff_t>(i));
        if (ss.empty()) freeKey(k);
        lateElement(r);
        return;
      }
      fn_->add(s.acc, r.value);
      onElement(k, i);
      return;
    }
    // A merge: of the new window with one session it extends, or with
    // several it bridges.
    if (cleanup_.isMergeResultLate(newEnd - 1, watermark_, kMinTimestamp)) [[unlikely]] {
      cleanup_.failMergeResult(watermark_, kMinTimestamp, W(start, newEnd).toString());
    }
    if (j - i > 1) {
      ACC later = std::move(ss[i + 1].acc);
      for (size_t m = i + 2; m < j; ++m) fn_->merge(later, ss[m].acc);
      fn_->merge(s.acc, later);
      ss.erase(ss.begin() + static_cast<std::ptrdiff_t>(i + 1),
               ss.begin() + static_cast<std::ptrdiff_t>(j));
    }
    Session& merged = ss[i];
    merged.start = start;
    merged.end = newEnd;
    // The merged windows' timers are gone; the result's firing timer is
    // registered if it has not fired yet (EventTimeTrigger.onMerge).
    merged.firePending = merged.end - 1 > watermark_;
    fn_->add(merged.acc, r.value);
    onElement(k, i);
  }

  void processWatermark(int input, Watermark watermark) override {
    watermark_ = watermark.timestamp;
    while (!queue_.empty() && queue_.top().time <= watermark_) {
      const window::SessionQueue::Entry e = queue_.top();
      queue_.pop();
      KeyState& ks = keys_[e.key];
      if (!ks.used || ks.scheduled != e.time) continue;  // scheduled anew since
      ks.scheduled = kNotDue;
      const int64_t due = dueOf(ks);
      if (due > e.time) {  // its sessions grew since: later (perhaps still now)
        schedule(e.key, due);
        continue;
      }
      SLUICE_ASSERT(due == e.time, "a key is never due before its scheduled time");
      runDue(e.key, due);
      if (keys_[e.key].sessions.empty()) {
        freeKey(e.key);
      } else {
        schedule(e.key, dueOf(keys_[e.key]));
      }
    }
    OneInputOperator<IN, OUT>::processWatermark(input, watermark);
  }

  // For tests: keys with sessions, sessions, entries in the schedule.
  size_t numKeys() const { return index_.size(); }
  size_t numSessions() const {
    size_t n = 0;
    for (const KeyState& ks : keys_) n += ks.sessions.size();
    return n;
  }
  size_t queueSize() const { return queue_.size(); }

 private:
  struct Session {
    int64_t start = 0;
    int64_t end = 0;
    // Its firing timer is registered: it has not fired since its end - 1
    // last moved past the watermark.
    bool firePending = false;
    ACC acc{};
  };
  struct KeyState {
    K key{};
    std::vector<Session> sessions;  // ascending, disjoint, not touching
    // The time of its live entry in the schedule, kNotDue if none.
    int64_t scheduled = kNotDue;
    bool used = false;
  };

  int64_t processingTimeForContext() { return this->context().clock().currentTimeMillis(); }
  int64_t watermarkForContext() const { return watermark_; }

  // The sessions as a snapshot takes them where the backend takes a frozen
  // copy (TableWindowOperator::handFrozen): per key with sessions, its key
  // and how many of `sessions` (in key order) are its.
  struct FrozenSessions {
    std::vector<std::pair<K, uint32_t>> keys;
    std::vector<StoredSession<ACC>> sessions;
  };
  template <class F>
  void forEachKeyWithSessions(F&& f) const {
    for (const KeyState& ks : keys_) {
      if (ks.used && !ks.sessions.empty()) f(ks);
    }
  }

  // --- the table -------------------------------------------------------------

  uint32_t addKey(const K& key) {
    uint32_t k;
    if (!freeKeys_.empty()) {
      k = freeKeys_.back();
      freeKeys_.pop_back();
    } else {
      k = static_cast<uint32_t>(keys_.size());
      keys_.emplace_back();
    }
    index_.tryEmplace(key).first->value = k;
    KeyState& ks = keys_[k];
    ks.key = key;
    ks.used = true;
    ks.scheduled = kNotDue;
    return k;
  }
  // Its entries in the schedule, if any, are skipped when they come up (or
  // serve the key that gets the number next, which is checked anyway).
  void freeKey(uint32_t k) {
    KeyState& ks = keys_[k];
    index_.erase(ks.key);
    ks.used = false;
    ks.sessions.clear();
    ks.scheduled = kNotDue;
    freeKeys_.push_back(k);
  }

  // --- timers ----------------------------------------------------------------

  // When session s has its next timer: its firing, else its cleanup.
  int64_t dueOf(const Session& s) const {
    const int64_t maxTimestamp = s.end - 1;
    if (s.firePending) return maxTimestamp;
    return cleanup_.needsCleanupTimer(maxTimestamp) ? cleanup_.cleanupTime(maxTimestamp) : kNotDue;
  }
  int64_t dueOf(const KeyState& ks) const {
    int64_t due = kNotDue;
    for (const Session& s : ks.sessions) due = std::min(due, dueOf(s));
    return due;
  }
  void schedule(uint32_t k, int64_t due) {
    KeyState& ks = keys_[k];
    if (due >= ks.scheduled) return;  // an earlier entry covers it (or nothing is due)
    ks.scheduled = due;
    queue_.push(due, k);
  }

  // The timers of key k at `time`, session by session: a firing timer (at
  // end - 1, if registered) fires; a cleanup timer clears the session.
  void runDue(uint32_t k, int64_t time) {
    std::vector<Session>& ss = keys_[k].sessions;
    for (size_t i = 0; i < ss.size();) {
      Session& s = ss[i];
      const int64_t maxTimestamp = s.end - 1;
      const bool fires = s.firePending && maxTimestamp == time;
      const bool cleans =
          cleanup_.needsCleanupTimer(maxTimestamp) && cleanup_.cleanupTime(maxTimestamp) == time;
      if (fires) {
        s.firePending = false;
        emit(k, s);
      }
      if (cleans) {
        clearSession(k, ss[i]);
        ss.erase(ss.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      ++i;
    }
  }

  // --- elements --------------------------------------------------------------

  // EventTimeTrigger.onElement on session i of key k, which the element
  // went into: it fires at once if the watermark passed its end - 1, else
  // its firing timer is (still) registered.
  void onElement(uint32_t k, size_t i) {
    Session& s = keys_[k].sessions[i];
    if (s.end - 1 <= watermark_) {
      emit(k, s);
    } else {
      s.firePending = true;
    }
    schedule(k, dueOf(keys_[k].sessions[i]));
  }

  void lateElement(const StreamRecord<IN>& r) {
    if (!cleanup_.isElementLate(r.timestamp, watermark_)) return;
    this->lateRecord(r);
  }

  // --- firing ----------------------------------------------------------------

  void emit(uint32_t k, const Session& s) {
    this->emitWindow(keys_[k].key, W(s.start, s.end), s.end - 1, s.acc);
  }
  void clearSession(uint32_t k, const Session& s) {
    if (passThrough_) return;  // nothing to tell
    this->clearWindow(keys_[k].key, W(s.start, s.end));
  }

  // --- state -----------------------------------------------------------------

  // Adds restored sessions of `key` (ascending, disjoint) to the table.
  void restoreKey(const K& key, std::vector<Session> sessions) {
    if (sessions.empty()) return;
    std::sort(sessions.begin(), sessions.end(),
              [](const Session& a, const Session& b) { return a.start < b.start; });
    for (size_t i = 1; i < sessions.size(); ++i) {
      if (sessions[i].start <= sessions[i - 1].end) {
        window::failGeneralStateImport(
            this->operatorName(), "the restored sessions " +
                                      W(sessions[i - 1].start, sessions[i - 1].end).toString() +
                                      " and " + W(sessions[i].start, sessions[i].end).toString() +
                                      " of one key intersect");
      }
    }
    SLUICE_ASSERT(index_.find(key) == nullptr, "a key's sessions are restored once");
    const uint32_t k = addKey(key);
    keys_[k].sessions = std::move(sessions);
    schedule(k, dueOf(keys_[k]));
  }

  // Restored sessions of this subtask's key groups move into the table.
  void loadSessions() {
    KeyedStateBackend& backend = keyed_.backend();
    std::vector<K> keys;
    backend.forEachKey(window::kSessionWindowState, [&](std::string_view bytes, int32_t) {
      keys.push_back(KeyedStateHandler<K>::deserializeKey(bytes));
    });
    for (const K& key : keys) {
      keyed_.setCurrentKey(key);
      std::optional<Stored> stored = stored_->value();
      stored_->clear();
      if (!stored) continue;
      std::vector<Session> sessions;
      for (auto& s : stored->sessions) {
        sessions.push_back(Session{s.start, s.end, s.firePending, std::move(s.acc)});
      }
      restoreKey(key, std::move(sessions));
    }
  }

  // A snapshot of the general window operator with event-time sessions:
  // each window of a key's merging window set becomes a session with the
  // accumulator of its state window; it has still to fire if it has an
  // event-time timer at its maxTimestamp.
  void takeOverGeneralState(const OperatorStateRestore& restore) {
    KeyedStateBackend& backend = keyed_.backend();
    if (!window::hasKeyedEntries(backend, window::kGeneralWindowState)) return;
    const std::string& name = this->operatorName();
    if (!window::hasKeyedEntries(backend, window::kMergingWindowSetState)) {
      window::failGeneralStateImport(name,
                                     "its windows are not session windows (it has no merging "
                                     "window set)");
    }
    fn_->openGeneralState(backend);
    InternalTimerService<K, W>& timers = generalTimers_;
    timers.initForOperator(
        this->context(), [](const TimerData<K, W>&) {}, [](const TimerData<K, W>&) {}, &restore);
    if (timers.numProcessingTimeTimers() != 0) {
      window::failGeneralStateImport(name,
                                     "it has processing-time timers (processing-time sessions "
                                     "or a trigger other than the default)");
    }
    struct Fires {
      std::vector<W> windows;
    };
    FlatHashMap<K, Fires, TableKeyHash<K>> fires;
    timers.forEachTimer(TimeDomain::EVENT_TIME, [&](const TimerData<K, W>& t) {
      if (t.timestamp == t.ns.maxTimestamp()) {
        fires.tryEmplace(t.key).first->value.windows.push_back(t.ns);
      }
    });
    std::vector<K> keys;
    backend.forEachKey(window::kMergingWindowSetState, [&](std::string_view bytes, int32_t) {
      keys.push_back(KeyedStateHandler<K>::deserializeKey(bytes));
    });
    window::MergingWindowSet set;
    set.init(backend);
    for (const K& key : keys) {
      keyed_.setCurrentKey(key);
      set.load();
      std::vector<Session> sessions;
      const auto* pending = fires.find(key);
      for (const auto& [w, stateWindow] : set) {
        std::optional<ACC> acc = fn_->takeGeneralState(stateWindow);
        if (!acc) continue;
        const bool fire = pending != nullptr &&
                          std::find(pending->value.windows.begin(), pending->value.windows.end(),
                                    w) != pending->value.windows.end();
        sessions.push_back(Session{w.getStart(), w.getEnd(), fire, std::move(*acc)});
      }
      std::vector<W> windows;
      for (const auto& entry : set) windows.push_back(entry.first);
      for (const W& w : windows) set.erase(w);
      set.persist();
      restoreKey(key, std::move(sessions));
    }
    if (window::hasKeyedEntries(backend, window::kGeneralWindowState)) {
      window::failGeneralStateImport(name,
                                     "some window contents belong to no session of its merging "
                                     "window sets");
    }
  }

  SessionWindowSpec<K, IN, ACC, V, OUT> spec_;
  window::WindowCleanup cleanup_;

  FlatHashMap<K, uint32_t, TableKeyHash<K>> index_;
  std::vector<KeyState> keys_;
  // The sizes of the last frozen copy, reserved for the next.
  size_t frozenKeys_ = 0;
  size_t frozenSessions_ = 0;
  std::vector<uint32_t> freeKeys_;
  window::SessionQueue queue_;
  int64_t watermark_ = kMinTimestamp;
};

}  // namespace sluice::internal
