// FlatHashMap: an open-addressing hash map for per-key operator data on the
// hot path (one running value per key).
//
// Keys and values live inline in one array of slots, probed linearly from a
// position taken from the top bits of a Fibonacci-mixed hash, so a lookup is
// one multiply and usually one cache line; no node allocation, no division.
// Capacity is a power of two and the map grows at 7/8 load. Pointers returned
// by tryEmplace/find are valid until the next insertion or erase. erase()
// shifts the following entries of the probe run back (no tombstones), so
// lookups stay as short after deletions as before. Copying copies every slot.
// Not thread-safe.
//
// K and V must be default-constructible and movable; keys compare with
// Equal (TableKeyEqual<K>: operator==).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <sluice/core/key_hash.h>

namespace sluice {

namespace internal {

inline uint64_t loadU64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline uint32_t loadU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
// The 128-bit product of a and b folded to 64 bits (wyhash's mix).
inline uint64_t foldedMultiply(uint64_t a, uint64_t b) {
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
}

// The table hash of a byte string, inline. Keys of per-key tables are
// mostly short (words, ids): up to 16 bytes are read as two overlapping
// words, with no loop and no call (wyhash's scheme); longer strings take one
// multiply per 16 bytes.
inline uint64_t tableBytesHash(std::string_view s) {
  constexpr uint64_t k0 = 0xa0761d6478bd642fULL;
  constexpr uint64_t k1 = 0xe7037ed1a0b428dbULL;
  const char* p = s.data();
  const size_t n = s.size();
  uint64_t a = 0;
  uint64_t b = 0;
  uint64_t seed = k0;
  if (n >= 8) {
    for (size_t i = 0; n - i > 16; i += 16) {
      seed = foldedMultiply(loadU64(p + i) ^ k1, loadU64(p + i + 8) ^ seed);
    }
    a = n > 16 ? loadU64(p + n - 16) : loadU64(p);
    b = loadU64(p + n - 8);
  } else if (n >= 4) {
    a = loadU32(p);
    b = loadU32(p + n - 4);
  } else if (n > 0) {
    a = (uint64_t{static_cast<uint8_t>(p[0])} << 16) |
        (uint64_t{static_cast<uint8_t>(p[n / 2])} << 8) | static_cast<uint8_t>(p[n - 1]);
  }
  return foldedMultiply(k1 ^ n, foldedMultiply(a ^ k1, b ^ seed));
}

// Byte-string equality, inline for up to 16 bytes (two overlapping words)
// instead of a call to memcmp.
inline bool tableBytesEqual(std::string_view x, std::string_view y) {
  const size_t n = x.size();
  if (n != y.size()) return false;
  const char* p = x.data();
  const char* q = y.data();
  if (n >= 8) {
    if (n > 16) return std::memcmp(p, q, n) == 0;
    return ((loadU64(p) ^ loadU64(q)) | (loadU64(p + n - 8) ^ loadU64(q + n - 8))) == 0;
  }
  if (n >= 4) return ((loadU32(p) ^ loadU32(q)) | (loadU32(p + n - 4) ^ loadU32(q + n - 4))) == 0;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != q[i]) return false;
  }
  return true;
}

}  // namespace internal

// The hash of an in-memory table keyed by K (not Flink's key-group hash):
// internal::tableBytesHash for strings, std::hash where the type has one,
// javaHashCode otherwise.
template <class K>
struct TableKeyHash {
  uint64_t operator()(const K& key) const {
    if constexpr (std::is_same_v<K, std::string>) {
      return internal::tableBytesHash(key);
    } else if constexpr (requires { std::hash<K>{}(key); }) {
      return std::hash<K>{}(key);
    } else {
      return static_cast<uint32_t>(javaHashCode(key));
    }
  }
};

// Key equality of a FlatHashMap: operator==, inline for strings.
template <class K>
struct TableKeyEqual {
  template <class Key>
  bool operator()(const K& a, const Key& b) const {
    if constexpr (std::is_same_v<K, std::string> && std::is_same_v<Key, std::string>) {
      return internal::tableBytesEqual(a, b);
    } else {
      return a == b;
    }
  }
};

// Key types a FlatHashMap with TableKeyHash can hold.
template <class K>
concept TableKey = std::default_initializable<K> && std::equality_comparable<K> &&
    std::copy_constructible<K> && requires(const K& k) {
  javaHashCode(k);
};

template <class K, class V, class Hash, class Equal = TableKeyEqual<K>>
class FlatHashMap {
 public:
  struct Slot {
    K key{};
    V value{};
  };

  explicit FlatHashMap(size_t initialCapacity = 16) { init(roundUp(initialCapacity)); }

  // The slot of `key`, inserting a default value when absent; the bool says
  // whether it was inserted.
  template <class Key>
  std::pair<Slot*, bool> tryEmplace(const Key& key) {
    uint64_t h = mix(hash_(key));
    uint8_t tag = tagOf(h);
    size_t i = h >> shift_;
    for (;;) {
      uint8_t c = ctrl_[i];
      if (c == tag && equal_(slots_[i].key, key)) return {&slots_[i], false};
      if (c == 0) break;
      i = (i + 1) & mask_;
    }
    if (size_ + 1 > (capacity() - capacity() / 8)) {
      grow();
      return tryEmplace(key);
    }
    ctrl_[i] = tag;
    slots_[i].key = K(key);
    ++size_;
    return {&slots_[i], true};
  }

  // Starts loading the cache lines a lookup of `key` reads first.
  template <class Key>
  void prefetch(const Key& key) const {
    const size_t i = mix(hash_(key)) >> shift_;
    __builtin_prefetch(&ctrl_[i]);
    __builtin_prefetch(&slots_[i]);
  }

  template <class Key>
  Slot* find(const Key& key) {
    uint64_t h = mix(hash_(key));
    uint8_t tag = tagOf(h);
    for (size_t i = h >> shift_;; i = (i + 1) & mask_) {
      uint8_t c = ctrl_[i];
      if (c == 0) return nullptr;
      if (c == tag && equal_(slots_[i].key, key)) return &slots_[i];
    }
  }

  template <class Key>
  const Slot* find(const Key& key) const {
    return const_cast<FlatHashMap*>(this)->find(key);
  }

  // Removes `key`; returns whether it was present. Moves later entries of
  // the probe run back into the hole (backward-shift deletion).
  template <class Key>
  bool erase(const Key& key) {
    uint64_t h = mix(hash_(key));
    uint8_t tag = tagOf(h);
    size_t i = h >> shift_;
    for (;; i = (i + 1) & mask_) {
      uint8_t c = ctrl_[i];
      if (c == 0) return false;
      if (c == tag && equal_(slots_[i].key, key)) break;
    }
    size_t hole = i;
    for (size_t j = (i + 1) & mask_; ctrl_[j] != 0; j = (j + 1) & mask_) {
      size_t home = mix(hash_(slots_[j].key)) >> shift_;
      // The entry at j may fill the hole when the hole lies on its probe
      // path, i.e. within [home, j) cyclically.
      if (((j - home) & mask_) >= ((j - hole) & mask_)) {
        ctrl_[hole] = ctrl_[j];
        slots_[hole] = std::move(slots_[j]);
        hole = j;
      }
    }
    ctrl_[hole] = 0;
    slots_[hole] = Slot{};
    --size_;
    return true;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return mask_ + 1; }

  template <class F>
  void forEach(F&& f) {
    for (size_t i = 0; i < capacity(); ++i)
      if (ctrl_[i] != 0) f(slots_[i].key, slots_[i].value);
  }
  template <class F>
  void forEach(F&& f) const {
    for (size_t i = 0; i < capacity(); ++i)
      if (ctrl_[i] != 0) f(slots_[i].key, slots_[i].value);
  }

 private:
  static size_t roundUp(size_t n) {
    size_t c = 16;
    while (c < n) c <<= 1;
    return c;
  }
  static uint64_t mix(uint64_t h) { return h * 0x9E3779B97F4A7C15ULL; }
  // Never 0 (that marks an empty slot); the low bits are independent of the
  // top bits that choose the position.
  static uint8_t tagOf(uint64_t h) { return static_cast<uint8_t>(h | 0x80); }

  void init(size_t cap) {
    ctrl_.assign(cap, 0);
    slots_.clear();
    slots_.resize(cap);
    mask_ = cap - 1;
    int bits = 0;
    while ((size_t{1} << bits) < cap) ++bits;
    shift_ = 64 - bits;
    size_ = 0;
  }

  void grow() {
    std::vector<uint8_t> oldCtrl = std::move(ctrl_);
    std::vector<Slot> oldSlots = std::move(slots_);
    init(oldCtrl.size() * 2);
    for (size_t j = 0; j < oldCtrl.size(); ++j) {
      if (oldCtrl[j] == 0) continue;
      uint64_t h = mix(hash_(oldSlots[j].key));
      size_t i = h >> shift_;
      while (ctrl_[i] != 0) i = (i + 1) & mask_;
      ctrl_[i] = tagOf(h);
      slots_[i] = std::move(oldSlots[j]);
      ++size_;
    }
  }

  Hash hash_{};
  Equal equal_{};
  std::vector<uint8_t> ctrl_;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace sluice
