#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include <sluice/core/flat_hash_map.h>
#include <sluice/core/serializer.h>
#include <sluice/core/status.h>
#include <sluice/window/timer_queue.h>

namespace sluice::window {

namespace {

// memcmp(a, b, n) == 0, inline and eight bytes at a time (keys are short).
inline bool bytesEqual(const uint8_t* a, const uint8_t* b, size_t n) {
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

uint64_t hashOf(int64_t ts, const uint8_t* p, size_t n) {
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

// A timer's key | namespace bytes: inline when short (the usual int64 or
// small-tuple key with a window), on the heap otherwise, so that adding a
// timer allocates nothing in the common case.
class TimerBytes {
 public:
  static constexpr size_t kInline = 32;
  TimerBytes() = default;
  TimerBytes(const TimerBytes&) = delete;
  TimerBytes& operator=(const TimerBytes&) = delete;
  ~TimerBytes() { release(); }
  void assign(const uint8_t* p, size_t n) {
    release();
    size_ = static_cast<uint32_t>(n);
    if (n > kInline) {
      heap_ = new uint8_t[n];
      std::memcpy(heap_, p, n);
    } else if (n != 0) {
      std::memcpy(inline_, p, n);
    }
  }
  void release() {
    if (size_ > kInline) delete[] heap_;
    size_ = 0;
  }
  const uint8_t* data() const { return size_ > kInline ? heap_ : inline_; }
  size_t size() const { return size_; }
  std::string_view view() const {
    return std::string_view(reinterpret_cast<const char*>(data()), size_);
  }

 private:
  uint32_t size_ = 0;
  union {
    uint8_t inline_[kInline];
    uint8_t* heap_;
  };
};

// One stored timer. Lives in a Domain's slab at a stable address from add
// until it leaves the domain's heap.
struct Timer {
  int64_t timestamp = 0;
  // The first 16 bytes of `bytes` as two big-endian words (zero-padded):
  // they order as the bytes do, and ties of timestamp (every timer of one
  // window end) are mostly decided on them without reading `bytes`.
  uint64_t prefix[2] = {0, 0};
  uint64_t hash = 0;
  int32_t keyGroup = 0;
  // 0 while live; once removed (it stays in the heap until it reaches the
  // top or the heap is compacted), the domain's epoch at its removal. An
  // asynchronous snapshot reads it off the task thread to tell which of
  // the timers it took were live when it was taken.
  std::atomic<uint64_t> removedAt{0};
  TimerBytes bytes;  // key | namespace: identity and tie-break

  bool live() const { return removedAt.load(std::memory_order_relaxed) == 0; }

  void set(int64_t ts, const uint8_t* data, size_t n, uint64_t h, int32_t group) {
    timestamp = ts;
    hash = h;
    keyGroup = group;
    bytes.assign(data, n);
    uint8_t padded[16] = {};
    if (n != 0) std::memcpy(padded, data, std::min(n, sizeof padded));
    for (int w = 0; w < 2; ++w) {
      uint64_t v = 0;
      for (int i = 0; i < 8; ++i) v = (v << 8) | padded[w * 8 + i];
      prefix[w] = v;
    }
  }
};

// Lexicographic order of the bytes, eight bytes at a time, after the
// prefixes were equal.
inline bool bytesLess(const TimerBytes& a, const TimerBytes& b) {
  const size_t n = std::min(a.size(), b.size());
  const uint8_t* x = a.data();
  const uint8_t* y = b.data();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t u, v;
    std::memcpy(&u, x + i, 8);
    std::memcpy(&v, y + i, 8);
    if (u != v) {
      if constexpr (std::endian::native == std::endian::little) {
        u = __builtin_bswap64(u);
        v = __builtin_bswap64(v);
      }
      return u < v;  // big-endian words order as their bytes do
    }
  }
  for (; i < n; ++i) {
    if (x[i] != y[i]) return x[i] < y[i];
  }
  return a.size() < b.size();
}

// Firing order: (timestamp, bytes).
inline bool firesBefore(const Timer& a, const Timer& b) {
  if (a.timestamp != b.timestamp) return a.timestamp < b.timestamp;
  if (a.prefix[0] != b.prefix[0]) return a.prefix[0] < b.prefix[0];
  if (a.prefix[1] != b.prefix[1]) return a.prefix[1] < b.prefix[1];
  return bytesLess(a.bytes, b.bytes);
}

// Sorts `timers` into firing order. The sort compares copies of each
// timer's timestamp and prefixes, so that it reads a timer itself (a random
// access each) only for ties the prefixes do not decide: sorting the
// pointers by firesBefore took two cache misses per comparison, a third of
// a 1M-timer snapshot.
void sortByFiring(std::vector<const Timer*>& timers) {
  struct Item {
    int64_t timestamp;
    uint64_t prefix[2];
    const Timer* timer;
  };
  std::vector<Item> items;
  items.reserve(timers.size());
  for (const Timer* t : timers) items.push_back({t->timestamp, {t->prefix[0], t->prefix[1]}, t});
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    if (a.timestamp != b.timestamp) return a.timestamp < b.timestamp;
    if (a.prefix[0] != b.prefix[0]) return a.prefix[0] < b.prefix[0];
    if (a.prefix[1] != b.prefix[1]) return a.prefix[1] < b.prefix[1];
    return bytesLess(a.timer->bytes, b.timer->bytes);
  });
  for (size_t i = 0; i < items.size(); ++i) timers[i] = items[i].timer;
}

// The snapshot format of TimerQueue::snapshot() for the timers of both
// domains, each in firing order.
std::string writeTimers(const std::vector<const Timer*>& event,
                        const std::vector<const Timer*>& processing) {
  size_t size = 4;
  for (const auto* timers : {&event, &processing}) {
    for (const Timer* t : *timers) size += 17 + t->bytes.size();
  }
  std::vector<uint8_t> bytes;
  bytes.reserve(size);
  DataOutputView out(bytes);
  out.writeU32(static_cast<uint32_t>(event.size() + processing.size()));
  auto write = [&](const Timer& t, TimeDomain d) {
    out.writeU8(static_cast<uint8_t>(d));
    out.writeI32(t.keyGroup);
    out.writeI64(t.timestamp);
    out.writeU32(static_cast<uint32_t>(t.bytes.size()));
    out.writeBytes(t.bytes.data(), t.bytes.size());
  };
  for (const Timer* t : event) write(*t, TimeDomain::EVENT_TIME);
  for (const Timer* t : processing) write(*t, TimeDomain::PROCESSING_TIME);
  return std::string(bytes.begin(), bytes.end());
}

// A timer being looked up, not yet (or never) stored.
struct Probe {
  int64_t timestamp;
  const uint8_t* data;
  size_t size;
  uint64_t hash;
};

// One slot of the de-duplication index: the timer's hash, timestamp and,
// when they fit, its bytes inline, so that finding an existing timer touches
// one cache line of the index and nothing else.
constexpr size_t kInlineBytes = 24;
struct IndexKey {
  uint64_t hash = 0;
  int64_t timestamp = 0;
  uint32_t size = 0;
  uint8_t bytes[kInlineBytes] = {};
  const Timer* timer = nullptr;  // set once the timer is stored

  IndexKey() = default;
  explicit IndexKey(const Probe& p) : hash(p.hash), timestamp(p.timestamp) {
    size = static_cast<uint32_t>(p.size);
    if (p.size <= kInlineBytes && p.size != 0) std::memcpy(bytes, p.data, p.size);
  }
  const uint8_t* data() const { return size <= kInlineBytes ? bytes : timer->bytes.data(); }
  friend bool operator==(const IndexKey& k, const Probe& p) {
    return k.hash == p.hash && k.timestamp == p.timestamp && k.size == p.size &&
           bytesEqual(k.data(), p.data, p.size);
  }
  friend bool operator==(const IndexKey& a, const IndexKey& b) {
    return a.hash == b.hash && a.timestamp == b.timestamp && a.size == b.size &&
           bytesEqual(a.data(), b.data(), a.size);
  }
};

struct IndexHash {
  uint64_t operator()(const IndexKey& k) const { return k.hash; }
  uint64_t operator()(const Probe& p) const { return p.hash; }
};

Probe probeOf(const Timer& t) { return Probe{t.timestamp, t.bytes.data(), t.bytes.size(), t.hash}; }

}  // namespace

// The asynchronous snapshots of a queue in flight, by sequence (1, 2, ...).
// Finishing (any thread) and asking which is the oldest (the task thread)
// go through the lock, which orders a snapshot's reads of a timer before
// its reuse; anyInFlight() is the task thread's lock-free check for none,
// finished() tells it without the lock whether anything finished since it
// last looked (nothing held becomes reusable otherwise).
struct TimerQueue::SnapshotLedger {
  uint64_t taken = 0;  // task thread: the newest snapshot's sequence
  std::atomic<int> inFlight{0};
  std::atomic<uint64_t> finishedCount{0};
  std::mutex mu;
  std::set<uint64_t> running;

  bool anyInFlight() const { return inFlight.load(std::memory_order_acquire) != 0; }
  uint64_t start() {
    std::lock_guard lock(mu);
    running.insert(++taken);
    inFlight.fetch_add(1, std::memory_order_relaxed);
    return taken;
  }
  void finish(uint64_t sequence) {
    std::lock_guard lock(mu);
    running.erase(sequence);
    finishedCount.fetch_add(1, std::memory_order_release);
    inFlight.fetch_sub(1, std::memory_order_release);
  }
  uint64_t finished() const { return finishedCount.load(std::memory_order_acquire); }
  // Timers held with a tag below it may be reused.
  uint64_t oldestInFlight() {
    std::lock_guard lock(mu);
    return running.empty() ? std::numeric_limits<uint64_t>::max() : *running.begin();
  }
};

// The timers of one domain: a binary min-heap in firing order over timers
// kept in a slab (stable addresses, reused slots), and the de-duplication
// index from (timestamp, bytes) to the timer. A removed timer leaves the
// index at once and the heap lazily: it is marked dead and dropped when it
// comes to the top, or when dead timers outnumber live ones (a job that keeps
// moving a far timer forward). Adding and firing are O(log n), removing
// O(1), all without allocating once the slab and heap have grown.
//
// While asynchronous snapshots are in flight (the ledger, shared by both
// domains and the snapshots), timers that leave the heap are held, not
// reused: a snapshot taken before may read them. Each is tagged with the
// sequence of the newest snapshot taken then and reused once every snapshot
// up to that one has finished. The slab is shared with the snapshots, which
// may outlive the queue.
struct TimerQueue::Domain {
  explicit Domain(std::shared_ptr<SnapshotLedger> l) : ledger(std::move(l)) {}

  std::shared_ptr<std::deque<Timer>> slab = std::make_shared<std::deque<Timer>>();
  std::vector<Timer*> freeTimers;
  // Left the heap while snapshots were in flight: (the newest snapshot's
  // sequence then, timer), in that order.
  std::vector<std::pair<uint64_t, Timer*>> held;
  std::shared_ptr<SnapshotLedger> ledger;
  uint64_t finishedSeen = 0;  // ledger->finished() when held was last looked at
  // Removals stamp a timer with it; every snapshot moves it on.
  uint64_t epoch = 1;
  std::vector<Timer*> heap;  // live and dead timers
  size_t live = 0;
  FlatHashMap<IndexKey, Timer*, IndexHash> index;
  // The last timer add() saw exist or inserted; cleared by every removal.
  bool memoValid = false;
  int64_t memoTime = 0;
  std::vector<uint8_t> memo;

  size_t size() const { return live; }
  bool empty() const { return live == 0; }
  // The first live timer; the domain must not be empty.
  const Timer& top() {
    dropDeadTop();
    return *heap.front();
  }

  // Stores a timer unless an equal one exists; returns whether it did.
  bool insert(int64_t ts, const uint8_t* data, size_t n, uint64_t h, int32_t keyGroup) {
    const Probe probe{ts, data, n, h};
    auto [slot, added] = index.tryEmplace(probe);
    if (!added) return false;
    Timer* t;
    if (freeTimers.empty() && !held.empty()) reclaimHeld();
    if (freeTimers.empty()) {
      t = &slab->emplace_back();
    } else {
      t = freeTimers.back();
      freeTimers.pop_back();
    }
    t->set(ts, data, n, h, keyGroup);
    t->removedAt.store(0, std::memory_order_relaxed);
    slot->key.timer = t;
    slot->value = t;
    heap.push_back(t);
    std::push_heap(heap.begin(), heap.end(), later);
    ++live;
    return true;
  }
  // Removes the timer `probe` names, if stored.
  void remove(const Probe& probe) {
    auto* found = index.find(probe);
    if (found == nullptr) return;
    Timer* t = found->value;
    index.erase(probe);
    t->removedAt.store(epoch, std::memory_order_relaxed);
    --live;
    if (heap.size() > 64 && heap.size() > 2 * live) compact();
  }
  // Takes the first live timer out of the heap and the index; the caller
  // gives it back with release() once done with it.
  Timer* popFirst() {
    memoValid = false;
    dropDeadTop();
    Timer* t = heap.front();
    std::pop_heap(heap.begin(), heap.end(), later);
    heap.pop_back();
    index.erase(probeOf(*t));
    --live;
    return t;
  }
  void release(Timer* t) {
    if (ledger->anyInFlight()) {
      held.emplace_back(ledger->taken, t);
      return;
    }
    if (!held.empty()) reclaimHeld();
    free(t);
  }
  // Every live timer, in firing order.
  std::vector<const Timer*> sorted() const {
    std::vector<const Timer*> all;
    all.reserve(live);
    for (const Timer* t : heap) {
      if (t->live()) all.push_back(t);
    }
    sortByFiring(all);
    return all;
  }
  // For a snapshot: every timer of the heap, live or dead, and the epoch
  // that tells them apart (see PendingSnapshot).
  std::vector<const Timer*> takeHeap() {
    std::vector<const Timer*> all(heap.begin(), heap.end());
    ++epoch;
    return all;
  }

 private:
  // The heap's order, for the std heap functions (a max-heap of "fires later").
  static bool later(const Timer* a, const Timer* b) { return firesBefore(*b, *a); }
  void free(Timer* t) {
    t->bytes.release();
    freeTimers.push_back(t);
  }
  // Frees the held timers no snapshot in flight may still read. Takes the
  // ledger's lock only when a snapshot finished since the last look (an
  // insert while snapshots run would otherwise lock per timer).
  void reclaimHeld() {
    const uint64_t finished = ledger->finished();
    if (finished == finishedSeen) return;
    finishedSeen = finished;
    const uint64_t oldest = ledger->oldestInFlight();
    size_t n = 0;
    while (n < held.size() && held[n].first < oldest) free(held[n++].second);
    held.erase(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(n));
  }
  void dropDeadTop() {
    while (!heap.front()->live()) {
      Timer* dead = heap.front();
      std::pop_heap(heap.begin(), heap.end(), later);
      heap.pop_back();
      release(dead);
    }
  }
  void compact() {
    size_t kept = 0;
    for (Timer* t : heap) {
      if (t->live()) {
        heap[kept++] = t;
      } else {
        release(t);
      }
    }
    heap.resize(kept);
    std::make_heap(heap.begin(), heap.end(), later);
  }
};

TimerQueue::TimerQueue()
    : ledger_(std::make_shared<SnapshotLedger>()),
      event_(std::make_unique<Domain>(ledger_)),
      processing_(std::make_unique<Domain>(ledger_)) {}

TimerQueue::~TimerQueue() = default;

void TimerQueue::init(OperatorContext& context, Callback onEventTime, Callback onProcessingTime) {
  context_ = &context;
  onEventTime_ = std::move(onEventTime);
  onProcessingTime_ = std::move(onProcessingTime);
}

TimerQueue::Domain& TimerQueue::domain(TimeDomain d) const {
  return d == TimeDomain::EVENT_TIME ? *event_ : *processing_;
}

int64_t TimerQueue::currentProcessingTime() const { return context_->clock().currentTimeMillis(); }

bool TimerQueue::add(TimeDomain which, int64_t timestamp, std::string_view bytes,
                     KeyGroupFn keyGroup, const void* keyGroupContext) {
  Domain& d = domain(which);
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  // The same timer as the last call (a window operator registers its
  // trigger's timer and its cleanup timer back to back, often the same).
  if (d.memoValid && d.memoTime == timestamp && d.memo.size() == bytes.size() &&
      bytesEqual(d.memo.data(), data, bytes.size())) {
    return false;
  }
  d.memoValid = true;
  d.memoTime = timestamp;
  d.memo.assign(data, data + bytes.size());
  const uint64_t h = hashOf(timestamp, data, bytes.size());
  if (d.index.find(Probe{timestamp, data, bytes.size(), h}) != nullptr) return false;
  d.insert(timestamp, data, bytes.size(), h, keyGroup(keyGroupContext));
  if (which == TimeDomain::PROCESSING_TIME) scheduleProcessing();
  return true;
}

void TimerQueue::remove(TimeDomain which, int64_t timestamp, std::string_view bytes) {
  Domain& d = domain(which);
  d.memoValid = false;
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  d.remove(Probe{timestamp, data, bytes.size(), hashOf(timestamp, data, bytes.size())});
}

void TimerQueue::advanceWatermark(int64_t watermark) {
  watermark_ = watermark;
  fireUpTo(*event_, watermark, onEventTime_);
}

void TimerQueue::fireUpTo(Domain& d, int64_t time, const Callback& callback) {
  while (!d.empty() && d.top().timestamp <= time) {
    Timer* t = d.popFirst();
    // Given back even when the callback throws (the task fails then).
    struct Release {
      Domain& d;
      Timer* t;
      ~Release() { d.release(t); }
    } release{d, t};
    callback(t->timestamp, t->bytes.view());
  }
}

size_t TimerQueue::size(TimeDomain which) const { return domain(which).size(); }

size_t TimerQueue::allocatedTimers() const {
  return event_->slab->size() + processing_->slab->size();
}

void TimerQueue::forEach(
    TimeDomain which,
    const std::function<void(int64_t timestamp, std::string_view bytes)>& fn) const {
  for (const Timer* t : domain(which).sorted()) fn(t->timestamp, t->bytes.view());
}

std::string TimerQueue::snapshot() const {
  return writeTimers(event_->sorted(), processing_->sorted());
}

namespace {

// The timers an asynchronous snapshot took: each domain's heap (live and
// dead timers) and the epoch it was taken at. A timer was live then if it
// still is or was removed at a later epoch; its other fields do not change
// while the snapshot is in flight (the domains hold what leaves the heap).
struct PendingSnapshot {
  struct Part {
    std::shared_ptr<const std::deque<Timer>> slab;  // keeps the timers alive
    std::vector<const Timer*> timers;
    uint64_t epoch = 0;

    std::vector<const Timer*> liveInOrder() const {
      std::vector<const Timer*> live;
      live.reserve(timers.size());
      for (const Timer* t : timers) {
        const uint64_t removedAt = t->removedAt.load(std::memory_order_relaxed);
        if (removedAt == 0 || removedAt > epoch) live.push_back(t);
      }
      sortByFiring(live);
      return live;
    }
  };
  std::shared_ptr<TimerQueue::SnapshotLedger> ledger;
  uint64_t sequence = 0;
  Part event;
  Part processing;
  bool done = false;

  PendingSnapshot() = default;
  PendingSnapshot(const PendingSnapshot&) = delete;
  PendingSnapshot& operator=(const PendingSnapshot&) = delete;
  ~PendingSnapshot() { finish(); }

  std::string write() {
    if (done) throw SluiceException("a timer snapshot may be written only once");
    std::string bytes = writeTimers(event.liveInOrder(), processing.liveInOrder());
    finish();
    return bytes;
  }
  // The timers are not read again: the queue may reuse them.
  void finish() {
    if (done) return;
    done = true;
    event.timers = {};
    processing.timers = {};
    ledger->finish(sequence);
  }
};

}  // namespace

std::function<std::string()> TimerQueue::snapshotLater() {
  auto pending = std::make_shared<PendingSnapshot>();
  pending->ledger = ledger_;
  pending->sequence = ledger_->start();
  for (auto [domain, part] : {std::pair{event_.get(), &pending->event},
                              std::pair{processing_.get(), &pending->processing}}) {
    part->slab = domain->slab;
    part->epoch = domain->epoch;
    part->timers = domain->takeHeap();
  }
  return [pending] { return pending->write(); };
}

void TimerQueue::restore(std::string_view snapshot, KeyGroupRange range) {
  DataInputView in(reinterpret_cast<const uint8_t*>(snapshot.data()), snapshot.size());
  const uint32_t count = in.readU32();
  std::vector<uint8_t> bytes;
  for (uint32_t i = 0; i < count; ++i) {
    const size_t at = in.position();
    const uint8_t domainTag = in.readU8();
    if (domainTag > 1) in.failAt(at, "invalid timer domain " + std::to_string(domainTag));
    const int32_t keyGroup = in.readI32();
    const int64_t ts = in.readI64();
    const uint32_t n = in.readU32();
    if (n > in.remaining()) {
      in.failAt(at, "timer of " + std::to_string(n) + " bytes exceeds the " +
                        std::to_string(in.remaining()) + " bytes that remain");
    }
    bytes.resize(n);
    in.readBytes(bytes.data(), n);
    if (!range.contains(keyGroup)) continue;
    domain(static_cast<TimeDomain>(domainTag))
        .insert(ts, bytes.data(), n, hashOf(ts, bytes.data(), n), keyGroup);
  }
  if (!processing_->empty()) scheduleProcessing();
}

// Keeps one task timer armed for the earliest processing-time timer.
void TimerQueue::scheduleProcessing() {
  if (processing_->empty()) return;
  const int64_t first = processing_->top().timestamp;
  if (first >= scheduledAt_) return;
  scheduledAt_ = first;
  context_->registerProcessingTimer(first, [this](int64_t at) { onProcessingTimer(at); });
}

void TimerQueue::onProcessingTimer(int64_t at) {
  if (at == scheduledAt_) scheduledAt_ = kMaxTimestamp;
  const int64_t now = context_->clock().currentTimeMillis();
  fireUpTo(*processing_, now, onProcessingTime_);
  scheduleProcessing();
}

}  // namespace sluice::window
