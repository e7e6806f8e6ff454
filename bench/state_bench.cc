// state-bench: per-operation cost of keyed state, per backend (hashmap,
// rocksdb, tiered), with 10K and 10M int64 keys, and the tiered backend with
// its state at 10x its memory budget. See bench/README.md ("State").
//
// Every operation sets the current key the way a keyed operator does
// (KeyedStateHandler::setCurrentKey): the key is serialized with
// TypeSerializer<int64_t> into a reused buffer, its key group is
// assignToKeyGroup(key, 128), and backend.setCurrentKey() gets both. Keys are
// drawn uniformly at random from the populated key space, so the 10M rows
// measure cache-missing access, not a hot working set.
//
// Benchmarks (one op each):
//   ValueGetUpdate  value() then update(value + 1) on an existing key
//   ListAdd         add() of one int64 (lists grow over the run)
//   MapPut          put() of one of the user keys of an existing key
//                   (overwrites: every key's map is populated beforehand
//                   with 4 user keys, 2 with 10M keys)
//   MapGet          get() of one of those user keys of an existing key
//   CheckpointPause/tiered/1M/{full,incremental}
//                   the synchronous part of a tiered checkpoint (canonical
//                   or native) with 1M dirty int64 values cached, real time;
//                   the asynchronous part as write_ms
//   SnapshotWrite   a canonical keyed snapshot of 1M entries (int64 key,
//                   int64 value; checksums included) into memory, bytes/s
//   SnapshotChecksum  the XXH3-64 pass alone over those snapshot bytes: its
//                   share of SnapshotWrite is what the checksums cost a
//                   checkpoint (issue 15)
//   ValueGetUpdate/tiered/{zipf1.0,uniform}/10xBudget
//                   value() + update() on the tiered backend with 4M keys
//                   whose cached form would take 10x its budget (the budget
//                   is calibrated from the bytes per cached entry), keys
//                   drawn from a Zipf distribution (s = 1.0, hot keys
//                   scattered over the key space) or uniformly; after a
//                   warm-up of 8M (Zipf) or 2M (uniform) operations, timed
//                   for at least 20 s
//
// One backend per (backend type, key count) is built on first use and kept
// while the benchmarks of that pair run (they are registered together), then
// replaced by the next pair's; each state is populated once, before the first
// benchmark that needs it, outside the timed loop (RocksDB then flushes and
// compacts, so reads start from a settled database). RocksDB gets its own
// managed-memory budget of kRocksDbBudget (block cache + memtables) and a
// fresh directory under /tmp that is removed afterwards. The tiered backend
// runs with its default budget (256 MiB: 10K keys fit), and in the 10x rows
// with the calibrated budget and kTieredRocksDbBudget for its RocksDB.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <benchmark/benchmark.h>

#include <sluice/core/key_hash.h>
#include <sluice/core/serializer.h>
#include <sluice/internal/keyed_state.h>
#include <sluice/state/keyed_state_backend.h>
#include <sluice/state/snapshot.h>
#include <sluice/state/state.h>

#include "core/checksum.h"
#include "state/rocksdb_keyed_backend.h"
#include "state/tiered_keyed_backend.h"

namespace {

using sluice::StateBackendType;
using sluice::VoidNamespace;

constexpr int32_t kMaxParallelism = 128;
// Map state: user keys per key (a power of two). Fewer with 10M keys, where
// 4 would mean 40M entries: minutes of RocksDB puts to populate and ~5 GiB
// of hashmap tables.
int64_t userKeysFor(int64_t keys) { return keys >= 1'000'000 ? 2 : 4; }
constexpr int64_t kRocksDbBudget = 256ll << 20;  // managed memory of the rocksdb backend
// The tiered rows at 10x the budget: keys, and the RocksDB behind the cache.
constexpr int64_t kTieredKeys = 4'000'000;
constexpr int64_t kTieredRocksDbBudget = 64ll << 20;
constexpr double kZipfExponent = 1.0;

double rssMiB(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(status, line)) {
    if (line.rfind(prefix, 0) == 0)
      return std::strtod(line.c_str() + prefix.size(), nullptr) / 1024.0;
  }
  return 0;
}

// splitmix64: a cheap, well-mixed stream of random keys.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) (Lemire's multiply-shift; the bias is negligible).
  int64_t below(int64_t n) {
    return static_cast<int64_t>(
        (static_cast<unsigned __int128>(next()) * static_cast<uint64_t>(n)) >> 64);
  }
};

sluice::KeyedBackendParams benchParams() {
  sluice::KeyedBackendParams params;
  params.operatorName = "state-bench";
  params.maxParallelism = kMaxParallelism;
  params.keyGroupRange = sluice::KeyGroupRange{0, kMaxParallelism - 1};
  params.keySchema = sluice::TypeSerializer<int64_t>::schema();
  params.keyLength = [](const uint8_t* data, size_t size) -> size_t {
    sluice::DataInputView in(data, size);
    int64_t scratch = 0;
    sluice::TypeSerializer<int64_t>::deserialize(scratch, in);
    return in.position();
  };
  return params;
}

// The tiered backend's bytes per cached int64 value entry (tables and
// entries, as it counts them), measured on 200K keys with room for all.
double tieredBytesPerEntry() {
  char pattern[] = "/tmp/sluice-state-bench-XXXXXX";
  if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
  sluice::KeyedBackendParams params = benchParams();
  params.localDir = pattern;
  params.managedMemoryBytes = 16 << 20;
  params.tieredMemoryBytes = 1ll << 30;
  constexpr int64_t kKeys = 200'000;
  double perEntry = 0;
  {
    auto backend = sluice::createKeyedStateBackend(StateBackendType::kTiered, std::move(params));
    auto& value = sluice::getOrCreateValueState<VoidNamespace>(
        *backend, sluice::ValueStateDescriptor<int64_t>("value"));
    std::vector<uint8_t> bytes;
    for (int64_t k = 0; k < kKeys; ++k) {
      bytes.clear();
      sluice::DataOutputView out(bytes);
      sluice::TypeSerializer<int64_t>::serialize(k, out);
      backend->setCurrentKey(bytes.data(), bytes.size(),
                             sluice::assignToKeyGroup(k, kMaxParallelism));
      value.update(k);
    }
    const auto stats = static_cast<sluice::TieredKeyedStateBackend&>(*backend).cacheStats();
    perEntry = static_cast<double>(stats.usedBytes) / static_cast<double>(stats.entries);
    backend->dispose();
  }
  std::error_code ec;
  std::filesystem::remove_all(pattern, ec);
  return perEntry;
}

// The tiered budget at which kTieredKeys values take 10x of it.
int64_t tieredTenthBudget() {
  static const int64_t budget = [] {
    const double perEntry = tieredBytesPerEntry();
    const auto b = static_cast<int64_t>(perEntry * static_cast<double>(kTieredKeys) / 10);
    std::fprintf(stderr,
                 "state-bench: tiered: %.1f bytes per cached value entry; %lld keys take "
                 "%.1f MiB cached; 10x rows use a budget of %.1f MiB\n",
                 perEntry, static_cast<long long>(kTieredKeys),
                 perEntry * static_cast<double>(kTieredKeys) / (1 << 20),
                 static_cast<double>(b) / (1 << 20));
    return b;
  }();
  return budget;
}

// One backend with its states, and what has been populated so far.
class Fixture {
 public:
  // tieredBudget 0: the default (state.backend.tiered.memory).
  Fixture(StateBackendType type, int64_t keys, int64_t tieredBudget = 0)
      : type_(type), keys_(keys), tieredBudget_(tieredBudget), userKeys_(userKeysFor(keys)) {
    sluice::KeyedBackendParams params = benchParams();
    if (type != StateBackendType::kHashMap) {
      char pattern[] = "/tmp/sluice-state-bench-XXXXXX";
      if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
      tmpDir_ = pattern;
      params.localDir = tmpDir_;
      params.managedMemoryBytes = kRocksDbBudget;
    }
    if (type == StateBackendType::kTiered && tieredBudget > 0) {
      params.tieredMemoryBytes = tieredBudget;
      params.managedMemoryBytes = kTieredRocksDbBudget;
    }
    backend_ = sluice::createKeyedStateBackend(type, std::move(params));
    value_ = &sluice::getOrCreateValueState<VoidNamespace>(
        *backend_, sluice::ValueStateDescriptor<int64_t>("value"));
    list_ = &sluice::getOrCreateListState<VoidNamespace>(
        *backend_, sluice::ListStateDescriptor<int64_t>("list"));
    map_ = &sluice::getOrCreateMapState<VoidNamespace>(
        *backend_, sluice::MapStateDescriptor<int64_t, int64_t>("map"));
  }

  ~Fixture() {
    backend_->dispose();
    backend_.reset();
    if (!tmpDir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(tmpDir_, ec);
    }
  }

  Fixture(const Fixture&) = delete;
  Fixture& operator=(const Fixture&) = delete;

  StateBackendType type() const { return type_; }
  int64_t keys() const { return keys_; }
  int64_t tieredBudget() const { return tieredBudget_; }
  sluice::KeyedStateBackend& backend() { return *backend_; }
  int64_t userKeys() const { return userKeys_; }

  // Exactly what KeyedStateHandler<int64_t>::setCurrentKey does.
  void setCurrentKey(int64_t key) {
    keyBytes_.clear();
    sluice::DataOutputView out(keyBytes_);
    sluice::TypeSerializer<int64_t>::serialize(key, out);
    backend_->setCurrentKey(keyBytes_.data(), keyBytes_.size(),
                            sluice::assignToKeyGroup(key, kMaxParallelism));
  }

  sluice::InternalValueState<VoidNamespace, int64_t>& value() {
    if (!valuePopulated_) {
      populate("value", [&](int64_t k) { value_->update(k); });
      valuePopulated_ = true;
    }
    return *value_;
  }
  sluice::InternalListState<VoidNamespace, int64_t>& list() { return *list_; }
  sluice::InternalMapState<VoidNamespace, int64_t, int64_t>& map() {
    if (!mapPopulated_) {
      populate("map", [&](int64_t k) {
        for (int64_t u = 0; u < userKeys_; ++u) map_->put(u, k + u);
      });
      mapPopulated_ = true;
    }
    return *map_;
  }

  // Memory counters for a benchmark's report; for tiered, also what the
  // cache did per operation since `before`.
  void report(benchmark::State& state,
              const sluice::TieredKeyedStateBackend::CacheStats* before = nullptr) {
    state.counters["rss_MiB"] = rssMiB("VmRSS");
    if (type_ == StateBackendType::kRocksDb) {
      auto usage = static_cast<const sluice::RocksDbKeyedStateBackend&>(*backend_).memoryUsage();
      state.counters["cache_MiB"] = static_cast<double>(usage.blockCacheUsage) / (1 << 20);
    }
    if (type_ == StateBackendType::kTiered) {
      const auto stats = tieredStats();
      state.counters["cache_MiB"] = static_cast<double>(stats.usedBytes) / (1 << 20);
      state.counters["budget_MiB"] = static_cast<double>(stats.budgetBytes) / (1 << 20);
      state.counters["peak_MiB"] = static_cast<double>(stats.peakUsedBytes) / (1 << 20);
      state.counters["entries"] = static_cast<double>(stats.entries);
      if (before != nullptr && state.iterations() > 0) {
        const auto ops = static_cast<double>(state.iterations());
        state.counters["loads_per_op"] = static_cast<double>(stats.loads - before->loads) / ops;
        state.counters["evictions_per_op"] =
            static_cast<double>(stats.evictions - before->evictions) / ops;
      }
    }
  }
  sluice::TieredKeyedStateBackend::CacheStats tieredStats() const {
    return static_cast<const sluice::TieredKeyedStateBackend&>(*backend_).cacheStats();
  }

 private:
  // The keys in RocksDB's order, [key group | serialized key] (hashmap: any
  // order does; 0..keys-1). In that order RocksDB's memtable inserts are
  // sequential and the flushed files do not overlap, so populating 10M keys
  // takes a fraction of the time random order would, and compaction is cheap.
  std::vector<int64_t> populateOrder() const {
    std::vector<int64_t> order(static_cast<size_t>(keys_));
    if (type_ != StateBackendType::kRocksDb) {
      for (int64_t k = 0; k < keys_; ++k) order[static_cast<size_t>(k)] = k;
      return order;
    }
    // (key group, key bytes as a big-endian number), compared as one number.
    std::vector<unsigned __int128> sortKeys(static_cast<size_t>(keys_));
    std::vector<uint8_t> bytes;
    for (int64_t k = 0; k < keys_; ++k) {
      bytes.clear();
      sluice::DataOutputView out(bytes);
      sluice::TypeSerializer<int64_t>::serialize(k, out);
      if (bytes.size() != 8) throw std::runtime_error("expected 8-byte serialized int64 keys");
      uint64_t be = 0;
      for (uint8_t b : bytes) be = be << 8 | b;
      const auto group = static_cast<uint64_t>(sluice::assignToKeyGroup(k, kMaxParallelism));
      sortKeys[static_cast<size_t>(k)] = static_cast<unsigned __int128>(group) << 64 | be;
    }
    std::sort(sortKeys.begin(), sortKeys.end());
    for (size_t i = 0; i < sortKeys.size(); ++i) {
      auto be = static_cast<uint64_t>(sortKeys[i]);
      uint8_t raw[8];
      for (int b = 7; b >= 0; --b, be >>= 8) raw[b] = static_cast<uint8_t>(be);
      sluice::DataInputView in(raw, sizeof raw);
      sluice::TypeSerializer<int64_t>::deserialize(order[i], in);
    }
    return order;
  }

  template <class F>
  void populate(const char* what, F&& put) {
    const auto start = std::chrono::steady_clock::now();
    for (int64_t k : populateOrder()) {
      setCurrentKey(k);
      put(k);
    }
    const auto populated = std::chrono::steady_clock::now();
    // RocksDB: flush and compact, so every run starts from the same settled
    // database (and no compaction left over from populating runs meanwhile).
    if (type_ == StateBackendType::kRocksDb) {
      static_cast<sluice::RocksDbKeyedStateBackend&>(*backend_).compactAll();
    }
    if (type_ == StateBackendType::kTiered) {
      auto& tiered = static_cast<sluice::TieredKeyedStateBackend&>(*backend_);
      tiered.flush();
      tiered.rocksDb().compactAll();
    }
    const auto end = std::chrono::steady_clock::now();
    std::fprintf(stderr,
                 "state-bench: populated %s state of %s with %lld keys in %.1f s (+%.1f s "
                 "compaction)\n",
                 what, sluice::stateBackendTypeName(type_), static_cast<long long>(keys_),
                 std::chrono::duration<double>(populated - start).count(),
                 std::chrono::duration<double>(end - populated).count());
  }

  StateBackendType type_;
  int64_t keys_;
  int64_t tieredBudget_;
  int64_t userKeys_;
  std::string tmpDir_;
  std::unique_ptr<sluice::KeyedStateBackend> backend_;
  std::vector<uint8_t> keyBytes_;
  sluice::InternalValueState<VoidNamespace, int64_t>* value_ = nullptr;
  sluice::InternalListState<VoidNamespace, int64_t>* list_ = nullptr;
  sluice::InternalMapState<VoidNamespace, int64_t, int64_t>* map_ = nullptr;
  bool valuePopulated_ = false;
  bool mapPopulated_ = false;
};

// The one live fixture; asking for another (backend, keys) pair frees it
// first, so at most one populated backend is in memory at a time.
std::unique_ptr<Fixture>& currentFixture() {
  static std::unique_ptr<Fixture> fixture;
  return fixture;
}

Fixture& fixtureFor(StateBackendType type, int64_t keys, int64_t tieredBudget = 0) {
  auto& f = currentFixture();
  if (!f || f->type() != type || f->keys() != keys || f->tieredBudget() != tieredBudget) {
    f.reset();
    malloc_trim(0);  // hand the freed tables back, so the next rss_MiB is its own
    f = std::make_unique<Fixture>(type, keys, tieredBudget);
  }
  return *f;
}

void BM_ValueGetUpdate(benchmark::State& state, StateBackendType type, int64_t keys) {
  Fixture& f = fixtureFor(type, keys);
  auto& value = f.value();
  Rng rng{static_cast<uint64_t>(keys)};
  int64_t missing = 0;
  for (auto _ : state) {
    f.setCurrentKey(rng.below(f.keys()));
    std::optional<int64_t> v = value.value();
    if (!v) [[unlikely]] {
      ++missing;
      v = 0;
    }
    value.update(*v + 1);
  }
  if (missing != 0) state.SkipWithError("ValueGetUpdate: a populated key had no value");
  state.SetItemsProcessed(state.iterations());
  f.report(state);
}

void BM_ListAdd(benchmark::State& state, StateBackendType type, int64_t keys) {
  Fixture& f = fixtureFor(type, keys);
  auto& list = f.list();
  Rng rng{static_cast<uint64_t>(keys) + 1};
  int64_t i = 0;
  for (auto _ : state) {
    f.setCurrentKey(rng.below(f.keys()));
    list.add(i++);
  }
  state.SetItemsProcessed(state.iterations());
  f.report(state);
}

void BM_MapPut(benchmark::State& state, StateBackendType type, int64_t keys) {
  Fixture& f = fixtureFor(type, keys);
  auto& map = f.map();
  Rng rng{static_cast<uint64_t>(keys) + 2};
  int64_t i = 0;
  for (auto _ : state) {
    const uint64_t r = rng.next();
    f.setCurrentKey(static_cast<int64_t>(
        (static_cast<unsigned __int128>(r) * static_cast<uint64_t>(f.keys())) >> 64));
    map.put(static_cast<int64_t>(r & (f.userKeys() - 1)), i++);
  }
  state.SetItemsProcessed(state.iterations());
  f.report(state);
}

void BM_MapGet(benchmark::State& state, StateBackendType type, int64_t keys) {
  Fixture& f = fixtureFor(type, keys);
  auto& map = f.map();
  Rng rng{static_cast<uint64_t>(keys) + 3};
  int64_t missing = 0;
  for (auto _ : state) {
    const uint64_t r = rng.next();
    f.setCurrentKey(static_cast<int64_t>(
        (static_cast<unsigned __int128>(r) * static_cast<uint64_t>(f.keys())) >> 64));
    std::optional<int64_t> v = map.get(static_cast<int64_t>(r & (f.userKeys() - 1)));
    if (!v) [[unlikely]]
      ++missing;
    benchmark::DoNotOptimize(v);
  }
  if (missing != 0) state.SkipWithError("MapGet: a populated user key had no value");
  state.SetItemsProcessed(state.iterations());
  f.report(state);
}

// 2^25 key draws, cycled by the benchmark loop: Zipf(kZipfExponent) ranks
// over `keys` (by inverting the CDF), each rank mapped to a key by a
// multiplication modulo `keys` so that hot keys spread over key groups; or
// uniform keys. Precomputed, so drawing costs one sequential array read.
// The cycle is longer than a row's warm-up and timed loop together (about
// 30M operations), so the row sees independent draws: a cycle of 2^22, as
// rounds up to twenty-six had, touched only 0.84M of the 4M keys, each in
// the same order every cycle, which favoured some cache policies over
// others (docs/benchmarks.md, "Round twenty-seven").
const std::vector<uint32_t>& keyDraws(int64_t keys, bool zipf) {
  static std::map<std::pair<int64_t, bool>, std::vector<uint32_t>> cache;
  std::vector<uint32_t>& draws = cache[{keys, zipf}];
  if (!draws.empty()) return draws;
  constexpr size_t kDraws = size_t{1} << 25;
  draws.resize(kDraws);
  Rng rng{static_cast<uint64_t>(keys) * 31 + (zipf ? 7 : 0)};
  if (!zipf) {
    for (uint32_t& k : draws) k = static_cast<uint32_t>(rng.below(keys));
    return draws;
  }
  std::vector<double> cdf(static_cast<size_t>(keys));
  double sum = 0;
  for (int64_t r = 0; r < keys; ++r) {
    sum += 1.0 / std::pow(static_cast<double>(r + 1), kZipfExponent);
    cdf[static_cast<size_t>(r)] = sum;
  }
  // guide[j]: the first rank whose CDF reaches j / kGuide of the sum, so a
  // draw searches only between two neighbouring guide entries.
  constexpr size_t kGuide = size_t{1} << 20;
  std::vector<uint32_t> guide(kGuide + 1);
  for (size_t j = 0, r = 0; j <= kGuide; ++j) {
    const double at = sum * static_cast<double>(j) / static_cast<double>(kGuide);
    while (r + 1 < cdf.size() && cdf[r] < at) ++r;
    guide[j] = static_cast<uint32_t>(r);
  }
  // 1,000,003 is prime and divides none of the key counts used: a bijection.
  constexpr uint64_t kSpread = 1'000'003;
  for (uint32_t& k : draws) {
    const double u = static_cast<double>(rng.next() >> 11) * 0x1.0p-53 * sum;
    // One guide entry more on either side: rounding may put u in a
    // neighbouring interval.
    const auto j = std::min(kGuide - 1, static_cast<size_t>(u / sum * static_cast<double>(kGuide)));
    const auto from = cdf.begin() + guide[j == 0 ? 0 : j - 1];
    const auto to = cdf.begin() + guide[std::min(kGuide, j + 2)] + 1;
    const auto rank = static_cast<uint64_t>(std::lower_bound(from, to, u) - cdf.begin());
    k = static_cast<uint32_t>((rank * kSpread) % static_cast<uint64_t>(keys));
  }
  return draws;
}

// value() + update() with keys from `draws`, after a warm-up the first time
// a fixture runs this distribution: 8M operations for Zipf keys, whose hit
// rate at 10x the budget takes about 6M to settle (an entry starts with no
// uses, so the hot keys that population left out of the cache earn their
// place over several hand passes; the rows measure the steady state), 2M
// for uniform keys, which settle at once.
void BM_ValueGetUpdateDraws(benchmark::State& state, int64_t keys, int64_t budget, bool zipf) {
  Fixture& f = fixtureFor(StateBackendType::kTiered, keys, budget);
  auto& value = f.value();
  const std::vector<uint32_t>& draws = keyDraws(keys, zipf);
  const size_t mask = draws.size() - 1;
  // Every run (Google Benchmark makes several) continues the sequence where
  // the last one stopped: starting over would make the next run hit what
  // the last one cached.
  static std::map<std::pair<const Fixture*, bool>, size_t> positions;
  size_t& i = positions[{&f, zipf}];
  int64_t missing = 0;
  auto step = [&] {
    f.setCurrentKey(static_cast<int64_t>(draws[i++ & mask]));
    std::optional<int64_t> v = value.value();
    if (!v) [[unlikely]] {
      ++missing;
      v = 0;
    }
    value.update(*v + 1);
  };
  static std::set<std::pair<const Fixture*, bool>> warmed;
  if (warmed.insert({&f, zipf}).second) {
    const int warmUp = zipf ? 8'000'000 : 2'000'000;
    for (int n = 0; n < warmUp; ++n) step();
  }
  const auto before = f.tieredStats();
  for (auto _ : state) step();
  if (missing != 0) state.SkipWithError("ValueGetUpdate: a populated key had no value");
  state.SetItemsProcessed(state.iterations());
  f.report(state, &before);
}

// The synchronous part of a tiered checkpoint with 1M dirty entries: every
// value of a 1M-key state cached under a 1 GiB budget is updated (untimed),
// then snapshot() (canonical) or nativeSnapshot() (incremental) is timed,
// as the task thread waits for it (real time). The asynchronous part (the
// writer's nativeSnapshot() or writeTo(), which the I/O thread runs) is
// untimed and reported as write_ms.
void BM_TieredCheckpointPause(benchmark::State& state, bool native) {
  constexpr int64_t kKeys = 1'000'000;
  Fixture& f = fixtureFor(StateBackendType::kTiered, kKeys, int64_t{1} << 30);
  auto& value = f.value();
  int64_t checkpointId = 0;
  int64_t missing = 0;
  double writeSeconds = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (int64_t k = 0; k < kKeys; ++k) {
      f.setCurrentKey(k);
      std::optional<int64_t> v = value.value();
      if (!v) [[unlikely]] {
        ++missing;
        v = 0;
      }
      value.update(*v + 1);
    }
    state.ResumeTiming();
    std::unique_ptr<sluice::StateSnapshotWriter> writer;
    std::unique_ptr<sluice::KeyedStateSnapshot> snapshot;
    if (native) {
      writer = f.backend().nativeSnapshot(++checkpointId);
    } else {
      snapshot = f.backend().snapshot();
    }
    state.PauseTiming();
    const auto start = std::chrono::steady_clock::now();
    if (native) {
      if (writer->nativeSnapshot() == nullptr) state.SkipWithError("no native snapshot");
    } else {
      std::ofstream discard("/dev/null", std::ios::binary);
      snapshot->writeTo(discard);
    }
    writeSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    writer.reset();
    snapshot.reset();
    state.ResumeTiming();
  }
  if (missing != 0) state.SkipWithError("CheckpointPause: a populated key had no value");
  state.SetItemsProcessed(state.iterations() * kKeys);
  state.counters["write_ms"] = writeSeconds * 1e3 / static_cast<double>(state.iterations());
  f.report(state);
}

// 1M entries over 128 key groups, as a hashmap snapshot writes them.
std::string writeSnapshot() {
  std::ostringstream out;
  sluice::StateMetaInfo meta;
  meta.name = "value";
  meta.namespaceSchema = "void";
  meta.valueSchema = "int64";
  sluice::CanonicalSnapshotWriter writer(out, "int64", kMaxParallelism,
                                         sluice::KeyGroupRange{0, kMaxParallelism - 1}, {meta});
  constexpr int64_t kEntries = 1'000'000;
  std::vector<uint8_t> key, value;
  for (int32_t g = 0; g < kMaxParallelism; ++g) {
    writer.beginKeyGroup(g);
    for (int64_t i = g; i < kEntries; i += kMaxParallelism) {
      key.clear();
      value.clear();
      sluice::DataOutputView k(key), v(value);
      k.writeI64(i);
      v.writeI64(i * 7);
      writer.writeEntry(0, {reinterpret_cast<const char*>(key.data()), key.size()},
                        {reinterpret_cast<const char*>(value.data()), value.size()});
    }
  }
  writer.finish();
  return out.str();
}

void BM_SnapshotWrite(benchmark::State& state) {
  size_t bytes = 0;
  for (auto _ : state) {
    std::string s = writeSnapshot();
    bytes = s.size();
    benchmark::DoNotOptimize(s.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void BM_SnapshotChecksum(benchmark::State& state) {
  const std::string s = writeSnapshot();
  for (auto _ : state) benchmark::DoNotOptimize(sluice::checksum64(s));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * s.size()));
}

// Registered per (backend, keys) pair, so each pair's benchmarks run
// back to back on one fixture.
void registerAll() {
  struct Pair {
    StateBackendType backend;
    int64_t keys;
    double minTime;
  };
  const Pair pairs[] = {
      {StateBackendType::kHashMap, 10'000, 0.5}, {StateBackendType::kHashMap, 10'000'000, 1.0},
      {StateBackendType::kRocksDb, 10'000, 0.5}, {StateBackendType::kRocksDb, 10'000'000, 1.0},
      {StateBackendType::kTiered, 10'000, 0.5},
  };
  for (const Pair& p : pairs) {
    const char* backend = sluice::stateBackendTypeName(p.backend);
    const std::string keys = p.keys >= 1'000'000 ? std::to_string(p.keys / 1'000'000) + "M"
                                                 : std::to_string(p.keys / 1'000) + "K";
    auto add = [&](const char* name, void (*fn)(benchmark::State&, StateBackendType, int64_t)) {
      benchmark::RegisterBenchmark((std::string(name) + "/" + backend + "/" + keys).c_str(), fn,
                                   p.backend, p.keys)
          ->MinTime(p.minTime)
          ->Unit(benchmark::kNanosecond);
    };
    add("ValueGetUpdate", BM_ValueGetUpdate);
    add("ListAdd", BM_ListAdd);
    add("MapPut", BM_MapPut);
    add("MapGet", BM_MapGet);
  }
  // The tiered backend with its state at 10x its budget. The budget is
  // calibrated when the first of these runs.
  for (bool zipf : {true, false}) {
    const std::string name =
        std::string("ValueGetUpdate/tiered/") + (zipf ? "zipf1.0" : "uniform") + "/10xBudget";
    benchmark::RegisterBenchmark(name.c_str(),
                                 [zipf](benchmark::State& state) {
                                   BM_ValueGetUpdateDraws(state, kTieredKeys, tieredTenthBudget(),
                                                          zipf);
                                 })
        // Long enough to span several compactions of the RocksDB behind
        // the cache (each makes the block cache's copies stale).
        ->MinTime(20.0)
        ->Unit(benchmark::kNanosecond);
  }
  for (bool native : {false, true}) {
    const std::string name =
        std::string("CheckpointPause/tiered/1M/") + (native ? "incremental" : "full");
    benchmark::RegisterBenchmark(name.c_str(), BM_TieredCheckpointPause, native)
        ->Iterations(3)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("SnapshotWrite/1M", BM_SnapshotWrite)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("SnapshotChecksum/1M", BM_SnapshotChecksum)
      ->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  registerAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  currentFixture().reset();  // removes the rocksdb directory
  std::fprintf(stderr, "state-bench: peak RSS %.0f MiB\n", rssMiB("VmHWM"));
  return 0;
}
