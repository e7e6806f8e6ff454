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
// K and V must be default-constructible and movable; K needs operator==.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include <sluice/core/key_hash.h>

namespace sluice {

// The hash of an in-memory table keyed by K (not Flink's key-group hash):
// std::hash where the type has one, javaHashCode otherwise.
template <class K>
struct TableKeyHash {
  uint64_t operator()(const K& key) const {
    if constexpr (requires { std::hash<K>{}(key); }) {
      return std::hash<K>{}(key);
    } else {
      return static_cast<uint32_t>(javaHashCode(key));
    }
  }
};

// Key types a FlatHashMap with TableKeyHash can hold.
template <class K>
concept TableKey = std::default_initializable<K> && std::equality_comparable<K> &&
    std::copy_constructible<K> && requires(const K& k) {
  javaHashCode(k);
};

template <class K, class V, class Hash>
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
      if (c == tag && slots_[i].key == key) return {&slots_[i], false};
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

  template <class Key>
  Slot* find(const Key& key) {
    uint64_t h = mix(hash_(key));
    uint8_t tag = tagOf(h);
    for (size_t i = h >> shift_;; i = (i + 1) & mask_) {
      uint8_t c = ctrl_[i];
      if (c == 0) return nullptr;
      if (c == tag && slots_[i].key == key) return &slots_[i];
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
      if (c == tag && slots_[i].key == key) break;
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
  std::vector<uint8_t> ctrl_;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace sluice
