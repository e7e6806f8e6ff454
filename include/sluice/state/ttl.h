// Time-to-live for keyed state: values stored with their last-access time,
// and decorators over the storage primitives that expire, refresh and clean
// up entries following a StateTtlConfig. Backend-independent: the decorated
// primitive stores TtlValue<T> wherever it stores values.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sluice/core/clock.h>
#include <sluice/core/serializer.h>
#include <sluice/core/status.h>
#include <sluice/state/internal_state.h>
#include <sluice/state/snapshot.h>
#include <sluice/state/state.h>

namespace sluice {

// A stored value and the time it was last written (or read, with
// kOnReadAndWrite). Serialized timestamp first (i64), then the value: the
// layout snapshot.h's ttl helpers and RocksDB's compaction filter rely on.
template <class T>
struct TtlValue {
  T value{};
  int64_t lastAccessTimestamp = 0;
  bool operator==(const TtlValue&) const = default;
};

template <class T>
struct TypeSerializer<TtlValue<T>> {
  static constexpr size_t kMinEncodedSize = 8;
  static void serialize(const TtlValue<T>& v, DataOutputView& out) {
    out.writeI64(v.lastAccessTimestamp);
    TypeSerializer<T>::serialize(v.value, out);
  }
  static void deserialize(TtlValue<T>& into, DataInputView& in) {
    into.lastAccessTimestamp = in.readI64();
    TypeSerializer<T>::deserialize(into.value, in);
  }
  static std::string schema() { return "ttl<" + TypeSerializer<T>::schema() + ">"; }
};

// ---------------------------------------------------------------------------
// TTL decorators
//
// TtlValueState, TtlListState and TtlMapState wrap a primitive that stores
// TtlValue<T> and present the plain primitive, with the semantics of Flink's
// TtlValueState / TtlListState / TtlMapState (AbstractTtlDecorator):
//
// Time. `now` is the Clock's currentTimeMillis(), read once per call (once
// per step of a map iterator). An entry last accessed at `ts` has expired
// once ts + ttl <= now (ttl::expired in snapshot.h).
//
// Timestamps. Every list element and every map entry carries its own. Each
// write (update, add, addAll, put) stores what it writes with timestamp
// `now`. With kOnReadAndWrite a read that finds an unexpired entry also
// rewrites it with timestamp `now`; with kOnCreateAndWrite reads never
// write.
//
// Reading an expired entry (cleanup on access). The read removes the entry
// from storage, then
//   kNeverReturnExpired           it sees nothing, as if the entry were absent;
//   kReturnExpiredIfNotCleanedUp  it returns the expired value, this once.
// Expired entries nobody reads stay stored until a cleanup strategy drops
// them: cleanupFullSnapshot leaves them out of snapshots, RocksDB's
// compaction filter drops them when it compacts.
//
// Per primitive:
//   value  value() as above. Reducing and aggregating state are built on a
//          TtlValueState (keyed_state.h), so their add() reads the current
//          value through it: an invisible expired value is replaced by the
//          added one, a returned expired value is combined with it (as
//          Flink's TtlReduceFunction / TtlAggregateFunction).
//   list   get() returns the elements in order, leaving out the expired ones
//          under kNeverReturnExpired (returning them this once under
//          kReturnExpiredIfNotCleanedUp). When any had expired, the list is
//          rewritten without them (cleared when none is left); with
//          kOnReadAndWrite the kept elements are rewritten with `now`.
//          An empty update() clears the state; an empty addAll() does
//          nothing. mergeNamespaces() moves the stored elements with their
//          own timestamps: a merge neither refreshes nor drops anything.
//   map    get() and contains() as above, per user key (contains() is a
//          read: it refreshes and cleans up like get()). iterator() skips
//          expired entries and removes them as it passes them (returning
//          each once under kReturnExpiredIfNotCleanedUp), and with
//          kOnReadAndWrite refreshes each entry it returns; its remove()
//          removes the entry next() returned, even after hasNext().
//          isEmpty() is true when iterator() would return nothing: under
//          kNeverReturnExpired it removes the expired entries it finds and
//          refreshes nothing.
//
// Where this differs from Flink: Flink's list get() under kOnCreateAndWrite
// rewrites the list only once every element has expired (and keeps
// returning still-stored expired elements under
// kReturnExpiredIfNotCleanedUp until then); here a partially expired list is
// cleaned on access like any other entry. Flink's TtlMapState.isEmpty() ignores
// expiry; here it agrees with iterator().
//
// Threading and ownership: as the wrapped primitive (task thread only); the
// decorator owns it, the caller keeps the Clock alive.

namespace internal {

// What the three decorators share: the config, the clock and Flink's
// check-and-update step for one stored entry.
class TtlDecoratorBase {
 protected:
  TtlDecoratorBase(const StateTtlConfig& config, const Clock& clock)
      : ttlMillis_(config.getTtl().count()),
        updateOnRead_(config.getUpdateType() == StateTtlConfig::UpdateType::kOnReadAndWrite),
        returnExpired_(config.getStateVisibility() ==
                       StateTtlConfig::StateVisibility::kReturnExpiredIfNotCleanedUp),
        clock_(&clock) {}

  int64_t now() const { return clock_->currentTimeMillis(); }
  bool expired(const auto& ttlValue, int64_t at) const {
    return ttl::expired(ttlValue.lastAccessTimestamp, ttlMillis_, at);
  }

  // The user value of `stored` as a read sees it: refreshed through
  // `rewrite` (kOnReadAndWrite), or removed through `remove` when expired.
  template <class T, class Rewrite, class Remove>
  std::optional<T> readChecked(std::optional<TtlValue<T>> stored, Rewrite&& rewrite,
                               Remove&& remove) const {
    if (!stored) return std::nullopt;
    const int64_t t = now();
    if (expired(*stored, t)) {
      remove();
      if (!returnExpired_) return std::nullopt;
    } else if (updateOnRead_) {
      stored->lastAccessTimestamp = t;
      rewrite(std::as_const(*stored));
    }
    return std::optional<T>(std::move(stored->value));
  }

  const int64_t ttlMillis_;
  const bool updateOnRead_;
  const bool returnExpired_;
  const Clock* const clock_;
};

}  // namespace internal

template <class N, class V>
class TtlValueState final : public InternalValueState<N, V>, private internal::TtlDecoratorBase {
 public:
  TtlValueState(std::unique_ptr<InternalValueState<N, TtlValue<V>>> original,
                const StateTtlConfig& config, const Clock& clock)
      : TtlDecoratorBase(config, clock), original_(std::move(original)) {}

  void setCurrentNamespace(const N& ns) override { original_->setCurrentNamespace(ns); }
  std::optional<V> value() override {
    return readChecked(
        original_->value(), [&](const TtlValue<V>& v) { original_->update(v); },
        [&] { original_->clear(); });
  }
  void update(const V& value) override { original_->update(TtlValue<V>{value, now()}); }
  void clear() override { original_->clear(); }

 private:
  std::unique_ptr<InternalValueState<N, TtlValue<V>>> original_;
};

template <class N, class E>
class TtlListState final : public InternalListState<N, E>, private internal::TtlDecoratorBase {
 public:
  TtlListState(std::unique_ptr<InternalListState<N, TtlValue<E>>> original,
               const StateTtlConfig& config, const Clock& clock)
      : TtlDecoratorBase(config, clock), original_(std::move(original)) {}

  void setCurrentNamespace(const N& ns) override { original_->setCurrentNamespace(ns); }

  std::vector<E> get() override {
    std::vector<TtlValue<E>> stored = original_->get();
    std::vector<E> result;
    if (stored.empty()) return result;
    const int64_t t = now();
    size_t numExpired = 0;
    for (const TtlValue<E>& e : stored) numExpired += expired(e, t) ? 1 : 0;
    result.reserve(returnExpired_ ? stored.size() : stored.size() - numExpired);

    if (numExpired == 0 && !updateOnRead_) {
      // Nothing to write back: hand the stored elements out as they are.
      for (TtlValue<E>& e : stored) result.push_back(std::move(e.value));
      return result;
    }
    if (numExpired == stored.size()) {
      original_->clear();
      if (returnExpired_) {
        for (TtlValue<E>& e : stored) result.push_back(std::move(e.value));
      }
      return result;
    }
    std::vector<TtlValue<E>> kept;
    kept.reserve(stored.size() - numExpired);
    for (TtlValue<E>& e : stored) {
      if (expired(e, t)) {
        if (returnExpired_) result.push_back(std::move(e.value));
        continue;
      }
      result.push_back(e.value);
      kept.push_back(TtlValue<E>{std::move(e.value), updateOnRead_ ? t : e.lastAccessTimestamp});
    }
    original_->update(kept);
    return result;
  }

  void add(const E& value) override { original_->add(TtlValue<E>{value, now()}); }
  void addAll(const std::vector<E>& values) override {
    if (values.empty()) return;
    original_->addAll(withTimestamp(values));
  }
  void update(const std::vector<E>& values) override { original_->update(withTimestamp(values)); }
  void clear() override { original_->clear(); }

  // Moves the stored elements, each with its own timestamp (as Flink).
  void mergeNamespaces(const N& target, const std::vector<N>& sources) override {
    original_->mergeNamespaces(target, sources);
  }

 private:
  std::vector<TtlValue<E>> withTimestamp(const std::vector<E>& values) const {
    const int64_t t = now();
    std::vector<TtlValue<E>> out;
    out.reserve(values.size());
    for (const E& v : values) out.push_back(TtlValue<E>{v, t});
    return out;
  }

  std::unique_ptr<InternalListState<N, TtlValue<E>>> original_;
};

template <class N, class UK, class UV>
class TtlMapState final : public InternalMapState<N, UK, UV>, private internal::TtlDecoratorBase {
 public:
  TtlMapState(std::unique_ptr<InternalMapState<N, UK, TtlValue<UV>>> original,
              const StateTtlConfig& config, const Clock& clock)
      : TtlDecoratorBase(config, clock), original_(std::move(original)) {}

  void setCurrentNamespace(const N& ns) override { original_->setCurrentNamespace(ns); }

  std::optional<UV> get(const UK& key) override {
    return readChecked(
        original_->get(key), [&](const TtlValue<UV>& v) { original_->put(key, v); },
        [&] { original_->remove(key); });
  }
  void put(const UK& key, const UV& value) override {
    original_->put(key, TtlValue<UV>{value, now()});
  }
  void remove(const UK& key) override { original_->remove(key); }
  bool contains(const UK& key) override { return get(key).has_value(); }
  bool isEmpty() override {
    if (returnExpired_) return original_->isEmpty();
    const int64_t t = now();
    for (auto it = original_->iterator(); it->hasNext();) {
      if (!expired(it->next().second, t)) return false;
      it->remove();
    }
    return true;
  }
  void clear() override { original_->clear(); }
  std::unique_ptr<MapStateIterator<UK, UV>> iterator() override {
    return std::make_unique<Iterator>(*this, original_->iterator());
  }

 private:
  // Skips (and removes) expired entries of the wrapped iterator. Looks ahead
  // at most one stored entry, so remove() goes through the wrapped iterator
  // when it still stands on the returned entry and through the state
  // otherwise.
  class Iterator final : public MapStateIterator<UK, UV> {
   public:
    Iterator(TtlMapState& state, std::unique_ptr<MapStateIterator<UK, TtlValue<UV>>> original)
        : state_(state), original_(std::move(original)) {}

    bool hasNext() override {
      while (!pending_ && original_->hasNext()) {
        std::pair<UK, TtlValue<UV>> entry = original_->next();
        // The wrapped iterator has moved past the entry next() returned.
        if (last_ == Last::kUnderIterator) last_ = Last::kBehindIterator;
        pendingRemoved_ = false;
        const int64_t t = state_.now();
        if (state_.expired(entry.second, t)) {
          original_->remove();
          pendingRemoved_ = true;
          if (!state_.returnExpired_) continue;
        } else if (state_.updateOnRead_) {
          entry.second.lastAccessTimestamp = t;
          state_.original_->put(entry.first, entry.second);
        }
        pending_.emplace(std::move(entry.first), std::move(entry.second.value));
      }
      return pending_.has_value();
    }

    std::pair<UK, UV> next() override {
      if (!hasNext()) {
        throw SluiceException("MapStateIterator::next() called after the last entry");
      }
      std::pair<UK, UV> result = std::move(*pending_);
      pending_.reset();
      if (pendingRemoved_) {
        last_ = Last::kRemoved;
      } else {
        last_ = Last::kUnderIterator;
        lastKey_ = result.first;
      }
      return result;
    }

    void remove() override {
      switch (last_) {
        case Last::kNone: throw SluiceException("MapStateIterator::remove() called before next()");
        case Last::kRemoved: return;
        case Last::kUnderIterator: original_->remove(); break;
        case Last::kBehindIterator: state_.original_->remove(*lastKey_); break;
      }
      last_ = Last::kRemoved;
    }

   private:
    // Where the entry the last next() returned is.
    enum class Last : uint8_t {
      kNone,            // next() has not been called
      kUnderIterator,   // the wrapped iterator's current entry
      kBehindIterator,  // passed by the wrapped iterator; remove by key
      kRemoved,         // already gone from storage
    };

    TtlMapState& state_;
    std::unique_ptr<MapStateIterator<UK, TtlValue<UV>>> original_;
    std::optional<std::pair<UK, UV>> pending_;  // found by hasNext(), not yet returned
    bool pendingRemoved_ = false;               // pending_ was expired and is removed
    Last last_ = Last::kNone;
    std::optional<UK> lastKey_;
  };

  std::unique_ptr<InternalMapState<N, UK, TtlValue<UV>>> original_;
};

}  // namespace sluice
