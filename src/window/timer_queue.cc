#include <algorithm>
#include <bit>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include <sluice/core/flat_hash_map.h>
#include <sluice/core/serializer.h>
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

// Lexicographic order of the bytes, as vector's operator< has it, but eight
// bytes at a time: timers of one window end all share a timestamp, so
// inserting one compares bytes at every level of the tree.
inline bool bytesLess(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
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

struct Entry {
  int64_t timestamp = 0;
  // The first 16 bytes of `bytes` as two big-endian words (zero-padded):
  // they order as the bytes do, and ties of timestamp (every timer of one
  // window end) are mostly decided on them without reading `bytes`.
  uint64_t prefix[2] = {0, 0};
  std::vector<uint8_t> bytes;  // key | namespace: identity and tie-break
  int32_t keyGroup = 0;
  uint64_t hash = 0;
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
    return bytesLess(bytes, o.bytes);
  }
};

using Queue = std::set<Entry>;
using Ref = Queue::const_iterator;

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
  const Entry* entry = nullptr;  // set once the entry is stored

  IndexKey() = default;
  explicit IndexKey(const Probe& p) : hash(p.hash), timestamp(p.timestamp) {
    size = static_cast<uint32_t>(p.size);
    if (p.size <= kInlineBytes && p.size != 0) std::memcpy(bytes, p.data, p.size);
  }
  const uint8_t* data() const { return size <= kInlineBytes ? bytes : entry->bytes.data(); }
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

}  // namespace

struct TimerQueue::Domain {
  Queue queue;
  FlatHashMap<IndexKey, Ref, IndexHash> index;
  // The last timer add() saw exist or inserted; cleared by every removal.
  bool memoValid = false;
  int64_t memoTime = 0;
  std::vector<uint8_t> memo;

  void insert(Entry e) {
    auto [it, inserted] = queue.insert(std::move(e));
    if (!inserted) return;
    const Probe probe{it->timestamp, it->bytes.data(), it->bytes.size(), it->hash};
    auto [slot, added] = index.tryEmplace(probe);
    slot->key.entry = &*it;
    slot->value = it;
    (void)added;
  }
  Entry pop() {
    memoValid = false;
    Ref first = queue.begin();
    index.erase(Probe{first->timestamp, first->bytes.data(), first->bytes.size(), first->hash});
    return std::move(queue.extract(first).value());
  }
};

TimerQueue::TimerQueue()
    : event_(std::make_unique<Domain>()), processing_(std::make_unique<Domain>()) {}

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
      std::memcmp(d.memo.data(), data, bytes.size()) == 0) {
    return false;
  }
  d.memoValid = true;
  d.memoTime = timestamp;
  d.memo.assign(data, data + bytes.size());
  const uint64_t h = hashOf(timestamp, data, bytes.size());
  const Probe probe{timestamp, data, bytes.size(), h};
  if (d.index.find(probe) != nullptr) return false;
  Entry e;
  e.timestamp = timestamp;
  e.setBytes(std::vector<uint8_t>(data, data + bytes.size()));
  e.keyGroup = keyGroup(keyGroupContext);
  e.hash = h;
  d.insert(std::move(e));
  if (which == TimeDomain::PROCESSING_TIME) scheduleProcessing();
  return true;
}

void TimerQueue::remove(TimeDomain which, int64_t timestamp, std::string_view bytes) {
  Domain& d = domain(which);
  d.memoValid = false;
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const Probe probe{timestamp, data, bytes.size(), hashOf(timestamp, data, bytes.size())};
  auto* found = d.index.find(probe);
  if (found == nullptr) return;
  Ref r = found->value;
  d.index.erase(probe);
  d.queue.erase(r);
}

void TimerQueue::advanceWatermark(int64_t watermark) {
  watermark_ = watermark;
  Domain& d = *event_;
  while (!d.queue.empty() && d.queue.begin()->timestamp <= watermark) {
    Entry e = d.pop();
    onEventTime_(e.timestamp,
                 std::string_view(reinterpret_cast<const char*>(e.bytes.data()), e.bytes.size()));
  }
}

size_t TimerQueue::size(TimeDomain which) const { return domain(which).queue.size(); }

void TimerQueue::forEach(
    TimeDomain which,
    const std::function<void(int64_t timestamp, std::string_view bytes)>& fn) const {
  for (const Entry& e : domain(which).queue) {
    fn(e.timestamp,
       std::string_view(reinterpret_cast<const char*>(e.bytes.data()), e.bytes.size()));
  }
}

std::string TimerQueue::snapshot() const {
  std::vector<uint8_t> bytes;
  DataOutputView out(bytes);
  out.writeU32(static_cast<uint32_t>(event_->queue.size() + processing_->queue.size()));
  auto write = [&](const Entry& e, TimeDomain d) {
    out.writeU8(static_cast<uint8_t>(d));
    out.writeI32(e.keyGroup);
    out.writeI64(e.timestamp);
    out.writeU32(static_cast<uint32_t>(e.bytes.size()));
    out.writeBytes(e.bytes.data(), e.bytes.size());
  };
  for (const Entry& e : event_->queue) write(e, TimeDomain::EVENT_TIME);
  for (const Entry& e : processing_->queue) write(e, TimeDomain::PROCESSING_TIME);
  return std::string(bytes.begin(), bytes.end());
}

void TimerQueue::restore(std::string_view snapshot, KeyGroupRange range) {
  DataInputView in(reinterpret_cast<const uint8_t*>(snapshot.data()), snapshot.size());
  const uint32_t count = in.readU32();
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
    std::vector<uint8_t> bytes(n);
    in.readBytes(bytes.data(), n);
    if (!range.contains(keyGroup)) continue;
    Entry e;
    e.timestamp = ts;
    e.keyGroup = keyGroup;
    e.hash = hashOf(ts, bytes.data(), bytes.size());
    e.setBytes(std::move(bytes));
    domain(static_cast<TimeDomain>(domainTag)).insert(std::move(e));
  }
  if (!processing_->queue.empty()) scheduleProcessing();
}

// Keeps one task timer armed for the earliest processing-time timer.
void TimerQueue::scheduleProcessing() {
  if (processing_->queue.empty()) return;
  const int64_t first = processing_->queue.begin()->timestamp;
  if (first >= scheduledAt_) return;
  scheduledAt_ = first;
  context_->registerProcessingTimer(first, [this](int64_t at) { onProcessingTimer(at); });
}

void TimerQueue::onProcessingTimer(int64_t at) {
  if (at == scheduledAt_) scheduledAt_ = kMaxTimestamp;
  const int64_t now = context_->clock().currentTimeMillis();
  Domain& d = *processing_;
  while (!d.queue.empty() && d.queue.begin()->timestamp <= now) {
    Entry e = d.pop();
    onProcessingTime_(e.timestamp, std::string_view(reinterpret_cast<const char*>(e.bytes.data()),
                                                    e.bytes.size()));
  }
  scheduleProcessing();
}

}  // namespace sluice::window
