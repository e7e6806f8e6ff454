// Key hashing and key-group assignment, bit-for-bit compatible with Flink.
//
// keyBy routes a record by its key: the key's Java hashCode (as Flink would
// compute it for the equivalent Java key) is scrambled with murmurHash and
// reduced modulo maxParallelism to a key group; a subtask owns a contiguous
// range of key groups. Keyed state is stored per key group, so a snapshot can
// be restored at any parallelism up to maxParallelism, and a Sluice job
// partitions its keys exactly as the same Flink job would.
//
// javaHashCode<T> maps C++ key types onto their Java counterparts:
//   bool                         Boolean.hashCode: 1231 / 1237
//   char                         Character.hashCode of the byte read as
//                                unsigned (Latin-1), whatever char's
//                                signedness on this platform
//   int8/16/32, unsigned up to   the value as a Java int (Byte/Short/Integer;
//   32 bits, char8/16/32_t,      uint32 above INT32_MAX wraps to negative)
//   wchar_t
//   int64/uint64                 Long.hashCode: (int)(v ^ (v >>> 32))
//   float, double                Float/Double.hashCode (NaN canonicalized,
//                                -0.0 differs from 0.0)
//   std::string, string_view,    String.hashCode of the UTF-8 text decoded to
//   const char*, char arrays     UTF-16 as Java's UTF-8 decoder does (each
//                                malformed sequence becomes one U+FFFD)
//   std::pair, std::tuple        Flink TupleN.hashCode: h = hash(f0), then
//                                h = 31 * h + hash(fi); Tuple0 is 0
//   std::vector                  java.util.List.hashCode: h = 1, then
//                                h = 31 * h + hash(e)
//   std::optional                empty: 0, else the value's hash
//   SLUICE_STRUCT types          like a Flink tuple of the declared fields
//   any T with a member          that function, checked before all of the
//   `int32_t hashCode() const`   above
// Other types do not compile.
//
// Threads: everything here is a pure function.
// Failure: the key-group functions validate their arguments and throw
// SluiceException for a maxParallelism outside [1, kUpperBoundMaxParallelism],
// a parallelism outside [1, maxParallelism], or a key group / operator index
// out of range; validation is a compare, cheap enough for the per-record path.
#pragma once

#include <bit>
#include <climits>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <sluice/core/serializer.h>
#include <sluice/core/status.h>

namespace sluice {

// Flink's defaults: pipeline.max-parallelism when not set, and its ceiling.
constexpr int32_t kDefaultMaxParallelism = 128;
constexpr int32_t kUpperBoundMaxParallelism = 1 << 15;

// String.hashCode of UTF-8 `utf8` decoded to UTF-16 the way Java does.
int32_t javaStringHashCode(std::string_view utf8);

namespace internal {

template <class T>
concept HasJavaHashCode = requires(const T& t) {
  { t.hashCode() } -> std::same_as<int32_t>;
};

template <class T>
struct IsStdPair : std::false_type {};
template <class A, class B>
struct IsStdPair<std::pair<A, B>> : std::true_type {};

template <class T>
struct IsStdTuple : std::false_type {};
template <class... Ts>
struct IsStdTuple<std::tuple<Ts...>> : std::true_type {};

template <class T>
struct IsStdVector : std::false_type {};
template <class T, class A>
struct IsStdVector<std::vector<T, A>> : std::true_type {};

template <class T>
struct IsStdOptional : std::false_type {};
template <class T>
struct IsStdOptional<std::optional<T>> : std::true_type {};

// Java int arithmetic: wraps instead of overflowing.
constexpr int32_t javaMulAdd31(int32_t h, int32_t e) {
  return static_cast<int32_t>(31u * static_cast<uint32_t>(h) + static_cast<uint32_t>(e));
}

constexpr int32_t javaLongHashCode(uint64_t bits) {
  return static_cast<int32_t>(static_cast<uint32_t>(bits ^ (bits >> 32)));
}

[[noreturn]] void throwInvalidMaxParallelism(int32_t maxParallelism);
[[noreturn]] void throwInvalidParallelism(int32_t maxParallelism, int32_t parallelism);
[[noreturn]] void throwInvalidKeyGroup(int32_t maxParallelism, int32_t keyGroup);
[[noreturn]] void throwInvalidOperatorIndex(int32_t parallelism, int32_t operatorIndex);

}  // namespace internal

template <class T>
int32_t javaHashCode(const T& key);

namespace internal {

template <class... Ts>
int32_t flinkTupleHashCode(const Ts&... fields) {
  if constexpr (sizeof...(Ts) == 0) {
    return 0;
  } else {
    bool first = true;
    int32_t h = 0;
    ((h = first ? javaHashCode(fields) : javaMulAdd31(h, javaHashCode(fields)), first = false),
     ...);
    return h;
  }
}

}  // namespace internal

template <class T>
int32_t javaHashCode(const T& key) {
  if constexpr (internal::HasJavaHashCode<T>) {
    return key.hashCode();
  } else if constexpr (std::is_same_v<T, bool>) {
    return key ? 1231 : 1237;
  } else if constexpr (std::is_same_v<T, char>) {
    return static_cast<unsigned char>(key);
  } else if constexpr (std::is_integral_v<T> && sizeof(T) <= 4) {
    return static_cast<int32_t>(key);
  } else if constexpr (std::is_integral_v<T> && sizeof(T) == 8) {
    return internal::javaLongHashCode(static_cast<uint64_t>(key));
  } else if constexpr (std::is_same_v<T, float>) {
    // Float.floatToIntBits: every NaN is 0x7fc00000.
    return key != key ? 0x7fc00000 : std::bit_cast<int32_t>(key);
  } else if constexpr (std::is_same_v<T, double>) {
    // Double.doubleToLongBits: every NaN is 0x7ff8000000000000.
    return internal::javaLongHashCode(key != key ? 0x7ff8000000000000ULL
                                                 : std::bit_cast<uint64_t>(key));
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    if constexpr (std::is_pointer_v<T>) {
      // Flink rejects null keys too.
      if (key == nullptr) throw SluiceException("key must not be a null string pointer");
    }
    return javaStringHashCode(std::string_view(key));
  } else if constexpr (internal::IsStdPair<T>::value) {
    return internal::flinkTupleHashCode(key.first, key.second);
  } else if constexpr (internal::IsStdTuple<T>::value) {
    return std::apply([](const auto&... f) { return internal::flinkTupleHashCode(f...); }, key);
  } else if constexpr (internal::IsStdVector<T>::value) {
    int32_t h = 1;
    for (const auto& e : key) {
      // Explicit E: vector<bool> yields proxies.
      h = internal::javaMulAdd31(h, javaHashCode<typename T::value_type>(e));
    }
    return h;
  } else if constexpr (internal::IsStdOptional<T>::value) {
    return key ? javaHashCode(*key) : 0;
  } else if constexpr (SluiceStruct<T>) {
    int32_t h = 0;
    bool first = true;
    forEachField(key, [&](std::string_view, const auto& f) {
      h = first ? javaHashCode(f) : internal::javaMulAdd31(h, javaHashCode(f));
      first = false;
    });
    return h;
  } else {
    static_assert(sizeof(T) == 0,
                  "no Java hashCode mapping for this key type: use a supported type or give "
                  "it a member `int32_t hashCode() const`");
  }
}

// Flink's MathUtils.murmurHash: one murmur3 block round over the 4-byte code,
// the 32-bit finalizer, then made non-negative (MIN_VALUE becomes 0).
constexpr int32_t murmurHash(int32_t code) {
  auto rotl = [](uint32_t x, int r) { return (x << r) | (x >> (32 - r)); };
  uint32_t h = static_cast<uint32_t>(code);
  h *= 0xcc9e2d51u;
  h = rotl(h, 15);
  h *= 0x1b873593u;
  h = rotl(h, 13);
  h = h * 5 + 0xe6546b64u;
  h ^= 4;  // input length in bytes
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  // |h| as a Java int, INT32_MIN becoming 0, without a branch: the sign
  // is a coin toss per key, so a branch would mispredict on every other
  // record of a keyBy.
  const uint32_t negative = 0u - (h >> 31);  // all ones when h < 0
  return static_cast<int32_t>(((h ^ negative) - negative) & 0x7fffffffu);
}

// Throw SluiceException unless 1 <= maxParallelism <= kUpperBoundMaxParallelism.
inline void checkMaxParallelism(int32_t maxParallelism) {
  if (maxParallelism < 1 || maxParallelism > kUpperBoundMaxParallelism) [[unlikely]] {
    internal::throwInvalidMaxParallelism(maxParallelism);
  }
}

// Throw SluiceException unless maxParallelism is valid and
// 1 <= parallelism <= maxParallelism.
inline void checkParallelism(int32_t maxParallelism, int32_t parallelism) {
  checkMaxParallelism(maxParallelism);
  if (parallelism < 1 || parallelism > maxParallelism) [[unlikely]] {
    internal::throwInvalidParallelism(maxParallelism, parallelism);
  }
}

// The key group, in [0, maxParallelism), of a key whose hashCode is keyHash.
inline int32_t computeKeyGroupForKeyHash(int32_t keyHash, int32_t maxParallelism) {
  checkMaxParallelism(maxParallelism);
  return murmurHash(keyHash) % maxParallelism;
}

template <class K>
int32_t assignToKeyGroup(const K& key, int32_t maxParallelism) {
  return computeKeyGroupForKeyHash(javaHashCode(key), maxParallelism);
}

// computeKeyGroupForKeyHash for one maxParallelism, validated once, for the
// per-record paths (keyBy's channel, the keyed backend's current key). The
// remainder is Lemire's multiply-shift ("fastmod"), exact for 32-bit
// operands, in place of a 32-bit division per record.
class KeyGroupAssigner {
 public:
  explicit KeyGroupAssigner(int32_t maxParallelism)
      : divisor_(static_cast<uint32_t>(maxParallelism)) {
    checkMaxParallelism(maxParallelism);
    // 2^64 / divisor, rounded up (0 for a divisor of 1: every x % 1 is 0).
    inverse_ = UINT64_MAX / divisor_ + 1;
  }
  int32_t maxParallelism() const { return static_cast<int32_t>(divisor_); }
  int32_t keyGroupOfHash(int32_t keyHash) const {
    const uint64_t fraction = inverse_ * static_cast<uint32_t>(murmurHash(keyHash));
    return static_cast<int32_t>((static_cast<unsigned __int128>(fraction) * divisor_) >> 64);
  }
  template <class K>
  int32_t keyGroupOf(const K& key) const {
    return keyGroupOfHash(javaHashCode(key));
  }

 private:
  uint32_t divisor_;
  uint64_t inverse_;
};

// The subtask, in [0, parallelism), that owns keyGroup.
inline int32_t computeOperatorIndexForKeyGroup(int32_t maxParallelism, int32_t parallelism,
                                               int32_t keyGroup) {
  checkParallelism(maxParallelism, parallelism);
  if (keyGroup < 0 || keyGroup >= maxParallelism) [[unlikely]] {
    internal::throwInvalidKeyGroup(maxParallelism, keyGroup);
  }
  // Cannot overflow: both factors are at most 2^15.
  return keyGroup * parallelism / maxParallelism;
}

// The subtask that owns `key`: Flink's assignKeyToParallelOperator.
template <class K>
int32_t assignKeyToParallelOperator(const K& key, int32_t maxParallelism, int32_t parallelism) {
  return computeOperatorIndexForKeyGroup(maxParallelism, parallelism,
                                         assignToKeyGroup(key, maxParallelism));
}

// An inclusive range of key groups; empty when endKeyGroup < startKeyGroup.
struct KeyGroupRange {
  int32_t startKeyGroup = 0;
  int32_t endKeyGroup = -1;

  bool contains(int32_t keyGroup) const {
    return keyGroup >= startKeyGroup && keyGroup <= endKeyGroup;
  }
  int32_t numberOfKeyGroups() const {
    return endKeyGroup < startKeyGroup ? 0 : endKeyGroup - startKeyGroup + 1;
  }
  bool operator==(const KeyGroupRange&) const = default;
  // "[start, end]", as errors and logs print it.
  std::string toString() const {
    return "[" + std::to_string(startKeyGroup) + ", " + std::to_string(endKeyGroup) + "]";
  }
};

// The key groups subtask operatorIndex owns: exactly those keyGroup for which
// computeOperatorIndexForKeyGroup returns operatorIndex.
KeyGroupRange computeKeyGroupRangeForOperatorIndex(int32_t maxParallelism, int32_t parallelism,
                                                   int32_t operatorIndex);

// Flink's default maxParallelism for an operator of the given parallelism:
// 1.5 * parallelism rounded up to a power of two, clamped to
// [kDefaultMaxParallelism, kUpperBoundMaxParallelism].
int32_t computeDefaultMaxParallelism(int32_t parallelism);

}  // namespace sluice
