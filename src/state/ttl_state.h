// Time-to-live for keyed state: decorators over a backend's storages that
// store each value with its last-access time (TtlType) and expire, refresh
// and clean up entries following a StateTtlConfig. Backend-independent: the
// decorated storage stores TtlType objects wherever it stores values.
//
// Semantics, those of Flink's TtlValueState / TtlListState / TtlMapState
// (AbstractTtlDecorator):
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
//   value  get() as above. Reducing and aggregating state are built on TTL
//          value storage (internal/keyed_state.h), so their add() reads the
//          current value through it: an invisible expired value is replaced
//          by the added one, a returned expired value is combined with it
//          (as Flink's TtlReduceFunction / TtlAggregateFunction).
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
// Threading and ownership: as the wrapped storage (task thread only); the
// decorator owns it, the caller keeps the Clock alive.
#pragma once

#include <memory>

#include <sluice/core/clock.h>
#include <sluice/state/state.h>
#include <sluice/state/state_storage.h>

#include "state/runtime_types.h"

namespace sluice::internal {

// `original` stores objects of `ttlType` (a TtlType over the user's type).
std::unique_ptr<ValueStorage> makeTtlValueStorage(std::unique_ptr<ValueStorage> original,
                                                  std::shared_ptr<const TtlType> ttlType,
                                                  const StateTtlConfig& config, const Clock& clock);
// `original` stores list elements of `ttlType`.
std::unique_ptr<ListStorage> makeTtlListStorage(std::unique_ptr<ListStorage> original,
                                                std::shared_ptr<const TtlType> ttlType,
                                                const StateTtlConfig& config, const Clock& clock);
// `original` stores map values of `ttlType`; `userKey` is the map's key type.
std::unique_ptr<MapStorage> makeTtlMapStorage(std::unique_ptr<MapStorage> original,
                                              std::shared_ptr<const TtlType> ttlType,
                                              std::shared_ptr<const StateType> userKey,
                                              const StateTtlConfig& config, const Clock& clock);

}  // namespace sluice::internal
