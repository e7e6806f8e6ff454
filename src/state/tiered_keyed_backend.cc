// TieredKeyedStateBackend: the cache tables, eviction and write-back,
// snapshots and restore, and the factory (tiered_keyed_backend.h describes
// the design; the storages are in tiered_state.cc).
#include "state/tiered_keyed_backend.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <new>
#include <typeinfo>
#include <utility>

#include <sluice/core/assert.h>
#include <sluice/core/config_options.h>

#include "state/backend_factories.h"

namespace sluice {
namespace tiered {

namespace {

size_t roundUpTo(size_t n, size_t align) { return (n + align - 1) / align * align; }

// A flush writes RocksDB batches of about this many bytes.
constexpr size_t kFlushBatchBytes = 4 << 20;
// A snapshot spills its writes in chunks of about this many bytes (the
// memory the task and the snapshot's writer hold for them at a time).
constexpr size_t kSpillBatchBytes = 1 << 20;

// The bytes before a cached object: the header, and for lists the count of
// elements RocksDB holds.
size_t headerBytesFor(bool listHeader) { return listHeader ? 16 : sizeof(Header); }
size_t alignFor(const internal::StateType& inner) {
  return std::max<size_t>(alignof(uint64_t), inner.align());
}
size_t offsetFor(const internal::StateType& inner, bool listHeader) {
  return roundUpTo(headerBytesFor(listHeader), inner.align());
}

// True for the types whose objects own no heap memory that the backend can
// name for sure: the arithmetic types, bare or with a TTL timestamp.
bool ownsNoHeap(const internal::StateType& type) {
  if (const auto* ttl = dynamic_cast<const internal::TtlType*>(&type)) {
    return ownsNoHeap(ttl->inner());
  }
  const std::type_info* t = type.cppType();
  if (t == nullptr) return false;
  static const std::type_info* const kArithmetic[] = {
      &typeid(bool),  &typeid(char),           &typeid(signed char), &typeid(unsigned char),
      &typeid(short), &typeid(unsigned short), &typeid(int),         &typeid(unsigned),
      &typeid(long),  &typeid(unsigned long),  &typeid(long long),   &typeid(unsigned long long),
      &typeid(float), &typeid(double),         &typeid(char16_t),    &typeid(char32_t)};
  for (const std::type_info* a : kArithmetic) {
    if (*a == *t) return true;
  }
  return false;
}

std::string_view bytesOf(const std::vector<uint8_t>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace

void Ghost::reset(size_t slots) {
  SLUICE_ASSERT(slots == 0 || (slots >= 2 && (slots & (slots - 1)) == 0),
                "Ghost::reset: slots must be 0 or a power of two of at least 2");
  std::vector<uint16_t>(slots, 0).swap(fingerprints_);  // frees a larger array
  shift_ = slots == 0 ? 63 : 64 - std::countr_zero(slots);
}

uint32_t toCharge(int64_t bytes) {
  if (bytes < 0 || bytes > std::numeric_limits<uint32_t>::max()) {
    throw SluiceException("a tiered state cache entry of " + std::to_string(bytes) +
                          " bytes: entries are limited to 4 GiB");
  }
  return static_cast<uint32_t>(bytes);
}

// ---------------------------------------------------------------------------
// CachedType

CachedType::CachedType(std::shared_ptr<const internal::StateType> inner, bool listHeader)
    : StateType(roundUpTo(offsetFor(*inner, listHeader) + inner->size(), alignFor(*inner)),
                alignFor(*inner)),
      inner_(std::move(inner)),
      headerBytes_(headerBytesFor(listHeader)),
      offset_(offsetFor(*inner_, listHeader)) {}

void CachedType::construct(void* at) const {
  std::memset(at, 0, offset_);
  ::new (at) Header();
  inner_->construct(object(at));
}

void CachedType::copyConstruct(void* at, const void* from) const {
  std::memcpy(at, from, headerBytes_);
  inner_->copyConstruct(object(at), object(from));
}

void CachedType::moveConstruct(void* at, void* from) const {
  std::memcpy(at, from, headerBytes_);
  inner_->moveConstruct(object(at), object(from));
}

void CachedType::destroy(void* at) const noexcept { inner_->destroy(object(at)); }

void CachedType::copyAssign(void* to, const void* from) const {
  if (to == from) return;
  inner_->copyAssign(object(to), object(from));
  std::memcpy(to, from, headerBytes_);
}

void CachedType::moveAssign(void* to, void* from) const {
  if (to == from) return;
  inner_->moveAssign(object(to), object(from));
  std::memcpy(to, from, headerBytes_);
}

void CachedType::serialize(const void*, DataOutputView&) const {
  SLUICE_ASSERT(false, "a tiered cache entry is serialized through its inner type only");
}

void CachedType::deserialize(void*, DataInputView&) const {
  SLUICE_ASSERT(false, "a tiered cache entry is deserialized through its inner type only");
}

std::string CachedType::schema() const { return "cached<" + inner_->schema() + ">"; }

bool CachedType::sameAs(const StateType& other) const {
  const auto* o = dynamic_cast<const CachedType*>(&other);
  return o != nullptr && o->headerBytes_ == headerBytes_ && inner_->sameAs(*o->inner_);
}

// ---------------------------------------------------------------------------
// SizeEstimator

SizeEstimator::SizeEstimator(const internal::StateType& type)
    : type_(type), heapFree_(ownsNoHeap(type)) {}

uint32_t SizeEstimator::ofSerialized(size_t n) const {
  if (heapFree_) return 0;
  return toCharge(static_cast<int64_t>(n) + kAllocationOverhead);
}

size_t SizeEstimator::measure(const void* object) {
  uint8_t buffer[256];
  DataOutputView out(buffer, sizeof buffer, overflow_);
  type_.serialize(object, out);
  return out.size();
}

// ---------------------------------------------------------------------------
// Layout

bool Layout::sameAs(const Layout& o) const {
  if (storage != o.storage || !ns->sameAs(*o.ns) || !value->sameAs(*o.value)) return false;
  if ((userKey == nullptr) != (o.userKey == nullptr)) return false;
  return userKey == nullptr || userKey->sameAs(*o.userKey);
}

// ---------------------------------------------------------------------------
// CacheTable

CacheTable::CacheTable(TieredKeyedStateBackend& backend, StateMetaInfo meta, Layout layout,
                       RocksDbKeyedStateBackend::ColumnFamily& cf, size_t numGroups)
    : backend_(backend),
      meta_(std::move(meta)),
      layout_(std::move(layout)),
      cf_(cf),
      groups_(numGroups),
      onProbation_(numGroups, 0),
      salt_(heap::BytesHash{}(meta_.name)) {
  std::shared_ptr<const internal::StateType> stored;
  switch (layout_.storage) {
    case StateStorage::kValue: stored = layout_.value; break;
    case StateStorage::kList: stored = std::make_shared<internal::ListType>(layout_.value); break;
    case StateStorage::kMap:
      mapValue_ = std::make_shared<CachedType>(layout_.value, false);
      stored = std::make_shared<internal::MapType>(layout_.userKey, mapValue_);
      break;
  }
  entry_ = std::make_shared<CachedType>(std::move(stored), layout_.storage == StateStorage::kList);
  entryOffset_ = roundUpTo(sizeof(heap::KeyBytes), entry_->align());
  const size_t stride =
      roundUpTo(entryOffset_ + entry_->size(), std::max(alignof(heap::KeyBytes), entry_->align()));
  newTableBytes_ = static_cast<int64_t>(16 * (stride + 1)) + kTableOverhead;
}

void CacheTable::removePin(const size_t* pin) {
  auto it = std::find(pins_.begin(), pins_.end(), pin);
  if (it != pins_.end()) pins_.erase(it);
}

char* CacheTable::insert(size_t g, std::string_view key, int64_t objectCharge) {
  backend_.resizeGhostIfPlanned();
  heap::ObjectTable* t = groups_[g].get();
  const int64_t keyBytes = keyCharge(key.size());
  int64_t need = objectCharge + keyBytes;
  if (t == nullptr) {
    need += newTableBytes_;
  } else if (t->growsOnInsert()) {
    // Growing allocates the doubled table before the old one goes. When the
    // budget has no room for that, the group makes room among its own
    // entries instead: capacity doubles, so growing on a full budget would
    // trade many entries elsewhere for empty slots here.
    const auto growth = static_cast<int64_t>(t->bytesAt(t->capacity() * 2));
    if (!backend_.fits(need + growth) && backend_.evictInGroup(*this, g)) {
      SLUICE_ASSERT(!t->growsOnInsert(), "evictInGroup left its group full");
    } else {
      need += growth;
    }
  }
  backend_.reserve(need);
  SLUICE_ASSERT(groups_[g].get() == t, "eviction changed the table of a pinned key group");
  if (t == nullptr) {
    groups_[g] = std::make_unique<heap::ObjectTable>(*entry_);
    t = groups_[g].get();
    backend_.charge(tableBytes(*t));
  }
  const auto before = static_cast<int64_t>(t->allocatedBytes());
  auto [slot, inserted] = t->tryEmplace(key);
  SLUICE_ASSERT(inserted, "CacheTable::insert of a key its group already holds");
  const bool proven = backend_.inGhost(ghostHash(g, key));
  CachedType::header(entry(slot)).proven = proven ? 1 : 0;
  onProbation_[g] += proven ? 0 : 1;
  backend_.charge(static_cast<int64_t>(t->allocatedBytes()) - before + keyBytes);
  ++epoch_;
  return slot;
}

void CacheTable::erase(size_t g, std::string_view key) {
  heap::ObjectTable* t = groups_[g].get();
  if (t == nullptr) return;
  char* slot = t->find(key);
  if (slot == nullptr) return;
  const Header& h = CachedType::header(entry(slot));
  const int64_t freed = h.charge + keyCharge(key.size());
  onProbation_[g] -= h.proven == 0 ? 1 : 0;
  t->erase(key);
  backend_.charge(-freed);
  ++epoch_;
}

std::string_view CacheTable::rocksKey(size_t g, std::string_view entryKey) {
  const int32_t kg = backend_.keyGroupRange().startKeyGroup + static_cast<int32_t>(g);
  keyBuf_.clear();
  keyBuf_.push_back(static_cast<char>((kg >> 8) & 0xFF));
  keyBuf_.push_back(static_cast<char>(kg & 0xFF));
  keyBuf_.append(entryKey);
  return keyBuf_;
}

void CacheTable::encodeList(const void* list, size_t from, std::vector<uint8_t>& out) const {
  out.clear();
  const internal::ListType& type = listType();
  const size_t size = internal::ListType::size(list);
  for (size_t i = from; i < size; ++i) {
    const size_t begin = beginListElement(out);
    DataOutputView element(out);
    type.element().serialize(type.at(list, i), element);
    endListElement(out, begin);
  }
}

void CacheTable::writeBack(size_t g, char* slot, WriteBack why) {
  void* e = entry(slot);
  Header& h = CachedType::header(e);
  if ((h.flags & kDirty) == 0) return;
  // A snapshot's writes go into a copy of RocksDB: the entry stays dirty,
  // and what it says RocksDB holds stays true.
  const bool changes = why != WriteBack::kSnapshot;
  RocksDbKeyedStateBackend& rocks = backend_.rocksDb();
  const std::string_view key = keyOf(slot).view();
  void* object = entry_->object(e);
  switch (layout_.storage) {
    case StateStorage::kValue: {
      const std::string_view rk = rocksKey(g, key);
      if ((h.flags & kPresent) != 0) {
        valueBuf_.clear();
        DataOutputView out(valueBuf_);
        storedType().serialize(object, out);
        rocks.batchPut(cf_, rk, bytesOf(valueBuf_));
        if (changes) h.flags |= kStored;
      } else if ((h.flags & kStored) != 0) {
        rocks.batchRemove(cf_, rk);
        if (changes) h.flags &= ~kStored;
      }
      break;
    }
    case StateStorage::kList: {
      const internal::ListType& list = listType();
      const size_t size = internal::ListType::size(object);
      uint32_t& stored = CachedType::storedElements(e);
      const std::string_view rk = rocksKey(g, key);
      if ((h.flags & kComplete) == 0) {
        // Append-only: the elements go on the end of whatever RocksDB holds.
        if (size > 0) {
          encodeList(object, 0, valueBuf_);
          rocks.batchMerge(cf_, rk, bytesOf(valueBuf_));
          if (changes) h.flags |= kStored;
        }
        if (why == WriteBack::kFlush) {
          // Written: the entry keeps nothing to append.
          list.destroy(object);
          list.construct(object);
          backend_.charge(-static_cast<int64_t>(h.charge));
          h.charge = 0;
        }
      } else if ((h.flags & kRewrite) != 0) {
        if (size == 0) {
          if ((h.flags & kStored) != 0) rocks.batchRemove(cf_, rk);
          if (changes) h.flags &= ~kStored;
        } else {
          encodeList(object, 0, valueBuf_);
          rocks.batchPut(cf_, rk, bytesOf(valueBuf_));
          if (changes) h.flags |= kStored;
        }
        if (changes) {
          stored = static_cast<uint32_t>(size);
          h.flags &= ~kRewrite;
        }
      } else if (size > stored) {
        encodeList(object, stored, valueBuf_);
        rocks.batchMerge(cf_, rk, bytesOf(valueBuf_));
        if (changes) {
          stored = static_cast<uint32_t>(size);
          h.flags |= kStored;
        }
      }
      break;
    }
    case StateStorage::kMap: {
      const internal::MapType& map = mapType();
      internal::MapType::Position p;
      while (map.advance(object, p)) {
        // Our own object: the map hands out const pointers only.
        void* value = const_cast<void*>(map.valueAt(p));
        Header& vh = CachedType::header(value);
        if ((vh.flags & kDirty) == 0) continue;
        rocksKey(g, key);
        valueBuf_.clear();
        DataOutputView userKey(valueBuf_);
        map.keyType().serialize(map.keyAt(p), userKey);
        keyBuf_.append(bytesOf(valueBuf_));
        if ((vh.flags & kPresent) != 0) {
          valueBuf_.clear();
          DataOutputView out(valueBuf_);
          mapValue_->inner().serialize(mapValue_->object(value), out);
          rocks.batchPut(cf_, keyBuf_, bytesOf(valueBuf_));
          if (changes) vh.flags |= kStored;
        } else if ((vh.flags & kStored) != 0) {
          rocks.batchRemove(cf_, keyBuf_);
          if (changes) vh.flags &= ~kStored;
        }
        if (changes) vh.flags &= ~kDirty;
      }
      break;
    }
  }
  if (!changes) return;
  h.flags &= ~kDirty;
  backend_.countWriteBack();
}

template <class F>
void CacheTable::forEachEntry(F&& f) {
  for (size_t g = 0; g < groups_.size(); ++g) {
    heap::ObjectTable* t = groups_[g].get();
    if (t == nullptr) continue;
    for (size_t i = 0; i < t->capacity(); ++i) {
      if (char* slot = t->slotAt(i)) f(g, slot);
    }
  }
}

void CacheTable::flush() {
  RocksDbKeyedStateBackend& rocks = backend_.rocksDb();
  forEachEntry([&](size_t g, char* slot) {
    if ((CachedType::header(entry(slot)).flags & kDirty) == 0) return;
    writeBack(g, slot, WriteBack::kFlush);
    if (rocks.pendingBytes() >= kFlushBatchBytes) rocks.writePending();
  });
}

bool CacheTable::anyDirty() const {
  for (const auto& t : groups_) {
    if (t == nullptr) continue;
    for (size_t i = 0; i < t->capacity(); ++i) {
      char* slot = t->slotAt(i);
      if (slot != nullptr && (CachedType::header(entry(slot)).flags & kDirty) != 0) return true;
    }
  }
  return false;
}

void CacheTable::collectForSnapshot(RocksDbKeyedStateBackend::CopyWithWrites& copy) {
  RocksDbKeyedStateBackend& rocks = backend_.rocksDb();
  forEachEntry([&](size_t g, char* slot) {
    writeBack(g, slot, WriteBack::kSnapshot);
    if (rocks.pendingBytes() >= kSpillBatchBytes) rocks.spillPending(copy);
  });
  rocks.spillPending(copy);
}

}  // namespace tiered

// ---------------------------------------------------------------------------
// TieredKeyedStateBackend

using tiered::CachedType;
using tiered::CacheTable;

TieredKeyedStateBackend::TieredKeyedStateBackend(KeyedBackendParams params)
    : KeyedStateBackend(params),
      numGroups_(static_cast<size_t>(std::max(0, keyGroupRange().numberOfKeyGroups()))),
      liveGroups_(numGroups_),
      budget_(params.tieredMemoryBytes),
      slack_(params.tieredMemoryBytes / 64) {
  if (budget_ <= 0) {
    throw SluiceException("tiered state backend of operator '" + params.operatorName +
                          "' (subtask " + std::to_string(params.subtaskIndex) +
                          "): state.backend.tiered.memory must be positive, got " +
                          std::to_string(budget_) + " bytes");
  }
  RocksDbKeyedStateBackend::Tuning tuning;
  tuning.memtableBloomFilter = true;
  tuning.uncompressed = true;
  // 8 rather than 4 (see Tuning): Zipf-keyed get+update at ten times the
  // budget +30%; uniform keys, where nearly every access misses, unchanged;
  // more L0 files to look through cost more than that beyond 8.
  tuning.level0CompactionTrigger = 8;
  tuning.memtableInsertHints = true;
  rocks_ = std::make_unique<RocksDbKeyedStateBackend>(std::move(params), tuning);
}

TieredKeyedStateBackend::~TieredKeyedStateBackend() { dispose(); }

void TieredKeyedStateBackend::dispose() {
  // The state objects (and their storages, which unregister their pins) go
  // first; the cached entries are dropped unwritten: disposing discards the
  // state.
  stateObjects().clear();
  for (const auto& t : tables_) t->groups_.clear();
  tables_.clear();
  byName_.clear();
  ghost_.reset(0);
  ghostPlanned_ = 0;
  nextGhostPlan_ = 0;
  used_ = 0;
  liveGroups_ = 0;
  if (rocks_) rocks_->dispose();
}

std::shared_ptr<CacheTable> TieredKeyedStateBackend::table(const StateMetaInfo& meta,
                                                           tiered::Layout layout) {
  if (liveGroups_ == 0 && numGroups_ != 0) failNoCurrentKey();
  if (auto it = byName_.find(meta.name); it != byName_.end()) {
    CacheTable& existing = *it->second;
    if (!existing.layout().sameAs(layout)) failTableType(meta);
    if (!existing.meta().compatibleWith(meta)) {
      throw StateMigrationException("state '" + meta.name + "' of " + params().operatorName +
                                    " exists as " + existing.meta().describe() +
                                    " and is now requested as " + meta.describe());
    }
    return it->second;
  }
  if (meta.storage() != layout.storage) failTableType(meta);
  const StateMetaInfo* registered = registeredMeta(meta.name);
  if (registered == nullptr || !registered->compatibleWith(meta)) {
    registerStateMeta(meta);  // throws, naming both, when incompatible
  }
  RocksDbKeyedStateBackend::ColumnFamily& cf = rocks_->columnFamily(meta);
  auto t = std::make_shared<CacheTable>(*this, meta, std::move(layout), cf, numGroups_);
  tables_.push_back(t);
  byName_.emplace(meta.name, t);
  return t;
}

TieredKeyedStateBackend::CacheStats TieredKeyedStateBackend::cacheStats() const {
  CacheStats s;
  s.budgetBytes = budget_;
  s.usedBytes = used_;
  s.peakUsedBytes = peak_;
  for (const auto& t : tables_) {
    for (const auto& g : t->groups_) {
      if (g) s.entries += static_cast<int64_t>(g->size());
    }
  }
  s.loads = loads_;
  s.evictions = evictions_;
  s.writeBacks = writeBacks_;
  s.evictionRounds = evictionRounds_;
  return s;
}

// ---------------------------------------------------------------------------
// Eviction

namespace {
constexpr size_t kGroupDone = static_cast<size_t>(-1);

// Whether at most a tenth of the `entries` entries the hand sees are on
// probation: then proven entries without uses may go too.
bool fewOnProbation(size_t onProbation, size_t entries) { return onProbation * 10 <= entries; }
}  // namespace

void TieredKeyedStateBackend::makeRoom(int64_t bytes) {
  if (numGroups_ == 0) return;
  const int64_t want = used_ + bytes - budget_ + slack_;
  ++evictionRounds_;
  int64_t freed = 0;
  // Five passes over every stripe of every group take every entry off
  // probation, count every use down to 0 and then evict everything
  // unpinned: enough for any amount that can be freed at all.
  const size_t maxVisits = 5 * kStripes * tables_.size() * numGroups_ + 1;
  for (size_t visits = 0; freed < want && visits < maxVisits && !tables_.empty(); ++visits) {
    if (hand_.table >= tables_.size()) hand_.table = 0;
    CacheTable& t = *tables_[hand_.table];
    if (heap::ObjectTable* gt = t.groups_[hand_.group].get(); gt != nullptr) {
      // This stripe of the group; its capacity may have changed since the
      // hand stopped inside it.
      const size_t capacity = gt->capacity();
      const size_t from = std::max(hand_.slot, hand_.stripe * capacity / kStripes);
      const size_t to = (hand_.stripe + 1) * capacity / kStripes;
      size_t next = kGroupDone;
      freed += evictRange(t, hand_.group, from, to, want - freed, next);
      if (next != kGroupDone) {
        hand_.slot = next;  // freed enough in the middle of the stripe
        break;
      }
      freed += shrink(t, hand_.group);
    }
    hand_.slot = 0;
    if (++hand_.group < numGroups_) continue;
    hand_.group = 0;
    if (++hand_.table < tables_.size()) continue;
    hand_.table = 0;
    hand_.stripe = (hand_.stripe + 1) % kStripes;
  }
  rocks_->writePending();
  planGhost();
}

bool TieredKeyedStateBackend::pass(CacheTable& t, size_t g, const char* slot, tiered::Header& h,
                                   bool evictProven) {
  if (h.proven == 0) {
    --t.onProbation_[g];
    if ((h.flags & tiered::kUseMask) != 0) {
      h.proven = 1;  // used again while on probation
      --h.flags;
      return false;
    }
    ghost_.add(t.ghostHash(g, CacheTable::keyOf(slot).view()));
    return true;
  }
  if ((h.flags & tiered::kUseMask) != 0) {
    --h.flags;  // one use less: another chance
    return false;
  }
  return evictProven;
}

void TieredKeyedStateBackend::planGhost() {
  if (evictions_ < nextGhostPlan_) return;
  nextGhostPlan_ = evictions_ + static_cast<int64_t>(tables_.size() * numGroups_);
  size_t entries = 0;
  for (const auto& t : tables_) {
    for (const auto& gt : t->groups_) {
      if (gt) entries += gt->size();
    }
  }
  // About an eighth as many slots as entries, within a 32nd of the budget:
  // a larger ghost keeps more of a loop over too many keys (a sequence
  // repeated every 4.2M accesses over 0.84M keys, 10% cached: misses 14.2%
  // without a ghost, 13.8% with an eighth, 12.5% with a half), but also
  // proves more keys of the tail of independent Zipf draws, which then crowd
  // out hotter ones (16.8%, 17.0%, 17.5%; GCLOCK alone 17.7%).
  size_t want = entries < 16 ? 0 : std::bit_ceil(entries / 8);
  while (want != 0 && static_cast<int64_t>(want * sizeof(uint16_t)) > budget_ / 32) want /= 2;
  if (want < 2) want = 0;
  const size_t have = ghost_.slots();
  // Within a factor of two either way, the ghost keeps what it knows.
  if (have != 0 && want != 0 && want <= 2 * have && want * 2 >= have) want = have;
  ghostPlanned_ = want;
}

void TieredKeyedStateBackend::resizeGhost() {
  const size_t want = ghostPlanned_;
  const int64_t delta = static_cast<int64_t>(want * sizeof(uint16_t)) - ghost_.bytes();
  if (delta > 0) {
    reserve(delta);
    if (!fits(delta)) {
      // What is left is pinned: keep the ghost as it is.
      ghostPlanned_ = ghost_.slots();
      return;
    }
  }
  ghost_.reset(want);
  charge(delta);
  // Making room may have planned again: that plan stands, for the next
  // insert to apply.
}

int64_t TieredKeyedStateBackend::evictRange(CacheTable& t, size_t g, size_t from, size_t to,
                                            int64_t want, size_t& next) {
  next = kGroupDone;
  heap::ObjectTable* gt = t.groups_[g].get();
  if (gt == nullptr || t.pinned(g)) return 0;
  to = std::min(to, gt->capacity());
  int64_t freed = 0;
  victims_.clear();
  size_t i = from;
  for (; i < to && freed < want; ++i) {
    char* slot = gt->slotAt(i);
    if (slot == nullptr) continue;
    tiered::Header& h = CachedType::header(t.entry(slot));
    const bool evictProven = fewOnProbation(t.onProbation_[g], gt->size() - victims_.size());
    if (!pass(t, g, slot, h, evictProven)) continue;
    t.writeBack(g, slot, CacheTable::WriteBack::kEvict);
    freed += h.charge + tiered::keyCharge(CacheTable::keyOf(slot).size());
    victims_.push_back(i);
  }
  // All at once: the victims are often neighbours in one probe run.
  if (!victims_.empty()) {
    gt->eraseAll(victims_);
    evictions_ += static_cast<int64_t>(victims_.size());
    ++t.epoch_;
  }
  used_ -= freed;
  if (i < to) next = i;
  return freed;
}

bool TieredKeyedStateBackend::evictInGroup(CacheTable& t, size_t g) {
  heap::ObjectTable* gt = t.groups_[g].get();
  // Pinned by another storage too: its pointer into the group must stay.
  size_t pins = 0;
  for (const size_t* p : t.pins_) pins += *p == g ? 1 : 0;
  if (gt == nullptr || pins > 1) return false;
  const size_t capacity = gt->capacity();
  // Down to 3/4 of the capacity (the table grows above 7/8): room for the
  // next capacity / 8 inserts.
  const size_t excess = gt->size() - std::min(gt->size(), capacity - capacity / 4);
  if (t.localHands_.size() != t.groups_.size()) t.localHands_.assign(t.groups_.size(), 0);
  size_t i = t.localHands_[g] % capacity;
  // CLOCK within the group, from where it stopped last time: mark the
  // victims (writing them back), then rebuild the table without them, one
  // pass instead of a backward shift per removed entry. Five rounds at
  // most: the first takes every entry off probation, the next three may
  // only count uses down.
  int64_t freed = 0;
  size_t victims = 0;
  for (size_t seen = 0; victims < excess && seen < 5 * capacity; ++seen) {
    if (char* slot = gt->slotAt(i)) {
      tiered::Header& h = CachedType::header(t.entry(slot));
      if ((h.flags & tiered::kVictim) != 0) {
        // marked in an earlier round
      } else if (!pass(t, g, slot, h, fewOnProbation(t.onProbation_[g], gt->size() - victims))) {
        // kept
      } else {
        t.writeBack(g, slot, CacheTable::WriteBack::kEvict);
        freed += h.charge + tiered::keyCharge(CacheTable::keyOf(slot).size());
        h.flags |= tiered::kVictim;
        ++victims;
      }
    }
    i = i + 1 == capacity ? 0 : i + 1;
  }
  t.localHands_[g] = i;
  rocks_->writePending();
  gt->rebuild(capacity, [&t](const char* slot) {
    return (CachedType::header(t.entry(const_cast<char*>(slot))).flags & tiered::kVictim) != 0;
  });
  ++t.epoch_;
  evictions_ += static_cast<int64_t>(victims);
  used_ -= freed;
  planGhost();
  return !gt->growsOnInsert();
}

int64_t TieredKeyedStateBackend::shrink(CacheTable& t, size_t g) {
  heap::ObjectTable* gt = t.groups_[g].get();
  if (gt == nullptr || t.pinned(g)) return 0;
  if (gt->size() == 0) {
    const int64_t bytes = CacheTable::tableBytes(*gt);
    t.groups_[g].reset();
    SLUICE_ASSERT(t.onProbation_[g] == 0, "an empty group table with entries on probation");
    ++t.epoch_;
    used_ -= bytes;
    return bytes;
  }
  // Shrink below a quarter of the maximum load (7/8), to about half of it.
  const size_t capacity = gt->capacity();
  if (capacity <= 16 || gt->size() * 32 > capacity * 7) return 0;
  size_t target = 16;
  while (gt->size() * 16 > target * 7) target *= 2;
  if (target >= capacity) return 0;
  const auto before = static_cast<int64_t>(gt->allocatedBytes());
  gt->rehash(target);
  ++t.epoch_;
  const int64_t bytes = before - static_cast<int64_t>(gt->allocatedBytes());
  used_ -= bytes;
  return bytes;
}

void TieredKeyedStateBackend::evictAll() {
  flush();
  for (const auto& t : tables_) {
    // Pinned groups too: the caller holds no pointer from a storage.
    const std::vector<const size_t*> pins = std::move(t->pins_);
    t->pins_.clear();
    for (size_t g = 0; g < numGroups_; ++g) {
      // Flushed: evicting writes nothing. The first passes take entries off
      // probation and count uses down (evicting what has none), the last
      // evicts the rest.
      for (int round = 0; round < 5; ++round) {
        size_t next = kGroupDone;
        evictRange(*t, g, 0, SIZE_MAX, std::numeric_limits<int64_t>::max(), next);
      }
      shrink(*t, g);
    }
    t->pins_ = pins;
  }
}

void TieredKeyedStateBackend::flush() {
  for (const auto& t : tables_) t->flush();
  rocks_->writePending();
}

// ---------------------------------------------------------------------------
// Snapshots and restore

std::shared_ptr<RocksDbKeyedStateBackend::CopyWithWrites> TieredKeyedStateBackend::withDirtyEntries(
    bool native, int64_t checkpointId) {
  rocks_->writePending();  // what eviction collected goes to RocksDB itself
  std::shared_ptr<RocksDbKeyedStateBackend::CopyWithWrites> copy =
      rocks_->beginSnapshotWith(native, checkpointId);
  try {
    for (const auto& t : tables_) t->collectForSnapshot(*copy);
  } catch (...) {
    // Not for RocksDB: the entries stay dirty (a list's merge would be
    // written twice).
    rocks_->discardPending();
    throw;
  }
  return copy;
}

bool TieredKeyedStateBackend::anyDirty() const {
  for (const auto& t : tables_) {
    if (t->anyDirty()) return true;
  }
  return false;
}

// With nothing dirty, RocksDB's own snapshot is the whole state: a canonical
// one then needs no staging checkpoint (whose memtable flush would stop the
// task) and a native one no copy to open on the I/O thread.
std::unique_ptr<KeyedStateSnapshot> TieredKeyedStateBackend::snapshot() {
  rocks_->writePending();
  if (!anyDirty()) return rocks_->snapshot();
  return rocks_->snapshotWith(withDirtyEntries(false, 0));
}

std::unique_ptr<StateSnapshotWriter> TieredKeyedStateBackend::nativeSnapshot(int64_t checkpointId) {
  rocks_->writePending();
  if (!anyDirty()) return rocks_->nativeSnapshot(checkpointId);
  return rocks_->nativeSnapshotWith(withDirtyEntries(true, checkpointId));
}

void TieredKeyedStateBackend::restore(
    const std::vector<const CanonicalSnapshotReader*>& snapshots) {
  if (!tables_.empty() || !registeredMeta_.empty()) {
    throw SluiceException("tiered state backend of " + params().operatorName +
                          ": restore() must come before any state is registered");
  }
  rocks_->restore(snapshots);
  adoptRestoredStates();
}

void TieredKeyedStateBackend::restoreNative(const std::vector<KeyedStateHandleRef>& handles) {
  if (!tables_.empty() || !registeredMeta_.empty()) {
    throw SluiceException("tiered state backend of " + params().operatorName +
                          ": restoreNative() must come before any state is registered");
  }
  rocks_->restoreNative(handles);
  adoptRestoredStates();
}

void TieredKeyedStateBackend::adoptRestoredStates() {
  for (const auto& [name, meta] : rocks_->restoredStates()) restoredMeta_[name] = meta;
}

void TieredKeyedStateBackend::forEachKey(
    const std::string& stateName,
    const std::function<void(std::string_view key, int32_t keyGroup)>& fn) {
  if (auto it = byName_.find(stateName); it != byName_.end()) {
    it->second->flush();
    rocks_->writePending();
  }
  // RocksDB collects the keys before calling `fn`, which may change state.
  rocks_->forEachKey(stateName, fn);
}

void TieredKeyedStateBackend::failNoCurrentKey() const {
  if (liveGroups_ == 0 && numGroups_ != 0) {
    throw SluiceException("the tiered state backend of " + params().operatorName +
                          " was used after dispose()");
  }
  throw SluiceException("keyed state of " + params().operatorName +
                        " accessed without a current key (setCurrentKey was not called)");
}

void TieredKeyedStateBackend::failTableType(const StateMetaInfo& meta) const {
  throw SluiceException("state '" + meta.name + "' of " + params().operatorName +
                        ": cannot create " + meta.describe() +
                        " with these types: the name is in use with other types, or the meta "
                        "does not describe the state's types");
}

// ---------------------------------------------------------------------------
// The factory

namespace internal {

namespace {

class TieredBackendFactory final : public KeyedStateBackendFactory {
 public:
  const char* name() const override { return "tiered"; }
  void configure(KeyedBackendParams& params, OperatorContext& context) const override {
    configureRocksDbParams(params, context);
    const MemorySize budget = context.configuration().get(options::kStateBackendTieredMemory);
    if (budget.bytes == 0 || budget.bytes > static_cast<uint64_t>(INT64_MAX)) {
      throw SluiceException("invalid value '" + budget.toString() +
                            "' for state.backend.tiered.memory: the tiered backend needs a "
                            "positive memory budget");
    }
    params.tieredMemoryBytes = static_cast<int64_t>(budget.bytes);
  }
  std::unique_ptr<KeyedStateBackend> create(KeyedBackendParams params) const override {
    return std::make_unique<TieredKeyedStateBackend>(std::move(params));
  }
};

}  // namespace

std::unique_ptr<KeyedStateBackendFactory> makeTieredBackendFactory() {
  return std::make_unique<TieredBackendFactory>();
}

}  // namespace internal

}  // namespace sluice
