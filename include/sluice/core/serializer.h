// Binary serialization of record types.
//
// Records cross channels, sit in state backends and go into checkpoints as
// bytes. TypeSerializer<T> says how one T is laid out; it is a compile-time
// trait (no virtual calls, no per-record allocation), so an operator chain
// serializes its output type with code the compiler can inline.
//
// Wire format (deterministic, so equal values give equal bytes for ordered
// containers; keyed state relies on that):
//   bool                       1 byte, 0 or 1
//   char, integers, float,     fixed width, little-endian; float/double keep
//   double                     their exact bits (NaN payloads survive)
//   std::string                varuint byte length, then the bytes (not
//                              checked for valid UTF-8)
//   vector, set, map           varuint element count, then the elements in
//                              iteration order (map: key then value);
//                              unordered containers therefore give bytes in
//                              an unspecified order
//   optional                   tag byte 0 (empty) or 1, then the value
//   pair, tuple, array,        the members in order, nothing else; a pair is
//   SLUICE_STRUCT              encoded like a 2-tuple and shares its schema
// varuint is unsigned LEB128 (7 bits per byte, low bits first, at most 10
// bytes).
//
// Ownership: DataOutputView appends to a std::vector<uint8_t> the caller owns
// and reuses between records (clear() keeps its capacity). DataInputView reads
// a byte range it does not own; the range must outlive the view and every
// std::string_view that readStringView() returned.
//
// Threads: views are plain values used by one thread at a time. Serializers
// are stateless; any thread may call them.
//
// Failure: writing cannot fail (short of std::bad_alloc). Reading malformed
// bytes throws SerializationError naming what was being read and the byte
// offset: truncation, a length that cannot fit in the bytes that remain, a
// bool or optional tag byte other than 0/1, a varuint longer than 64 bits, a
// duplicate key in a map or set. Reading never allocates more than a small
// multiple of the input size. After a throw the target of deserialize() holds
// some valid but unspecified value.
//
// Hot path: deserialize(into, in) overwrites `into` in place and reuses its
// storage (string and vector capacity, the elements' own storage, map and set
// nodes), so decoding into the same object record after record does not
// allocate once it has grown. Unordered maps and sets reuse their nodes but
// rebuild their bucket array on every call.
//
// User structs: declare them with SLUICE_STRUCT (bottom of this file), which
// also lets the runtime visit fields by name (StructTraits, forEachField,
// visitField). Any other type can be made serializable by specializing
// sluice::TypeSerializer<T> with the three static functions described below.
// Deserialization needs default-constructible types.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <sluice/core/status.h>

namespace sluice {

// Thrown when bytes cannot be decoded as the expected type.
class SerializationError : public SluiceException {
 public:
  using SluiceException::SluiceException;
};

// Appends encoded values to a caller-owned buffer.
//
// Two modes. With a vector, every write appends to it, and the vector always
// holds exactly what was written. With a raw range (the hot path: records
// bound for the network), writes go to [data, data + capacity) with one
// inlined bounds check each; if the range fills up, what was written moves to
// the overflow vector and writing continues there. data()/size() give the
// bytes written in either mode.
class DataOutputView {
 public:
  explicit DataOutputView(std::vector<uint8_t>& buf) : buf_(&buf) {}
  DataOutputView(uint8_t* data, size_t capacity, std::vector<uint8_t>& overflow)
      : buf_(&overflow), begin_(data), cur_(data), end_(data + capacity) {}

  void writeU8(uint8_t v) {
    if (cur_ != end_) [[likely]] {
      *cur_++ = v;
    } else {
      appendSlow(&v, 1);
    }
  }
  void writeI8(int8_t v) { writeU8(static_cast<uint8_t>(v)); }
  void writeBool(bool v) { writeU8(v ? 1 : 0); }
  void writeU16(uint16_t v) { writeFixed(v); }
  void writeI16(int16_t v) { writeFixed(static_cast<uint16_t>(v)); }
  void writeU32(uint32_t v) { writeFixed(v); }
  void writeI32(int32_t v) { writeFixed(static_cast<uint32_t>(v)); }
  void writeU64(uint64_t v) { writeFixed(v); }
  void writeI64(int64_t v) { writeFixed(static_cast<uint64_t>(v)); }
  void writeF32(float v) { writeFixed(std::bit_cast<uint32_t>(v)); }
  void writeF64(double v) { writeFixed(std::bit_cast<uint64_t>(v)); }

  // Unsigned LEB128.
  void writeVarUint(uint64_t v) {
    uint8_t bytes[10];
    size_t n = 0;
    while (v >= 0x80) {
      bytes[n++] = static_cast<uint8_t>(v) | 0x80;
      v >>= 7;
    }
    bytes[n++] = static_cast<uint8_t>(v);
    append(bytes, n);
  }

  void writeBytes(const void* p, size_t n) {
    if (n == 0) return;
    append(p, n);
  }

  // varuint byte length, then the bytes.
  void writeString(std::string_view s) {
    writeVarUint(s.size());
    writeBytes(s.data(), s.size());
  }

  // Bytes written: in vector mode the whole vector, including any bytes that
  // were there before this view.
  size_t size() const {
    return begin_ != nullptr ? static_cast<size_t>(cur_ - begin_) : buf_->size();
  }
  const uint8_t* data() const { return begin_ != nullptr ? begin_ : buf_->data(); }

 private:
  template <class U>
  void writeFixed(U v) {
    static_assert(std::is_unsigned_v<U>);
    if constexpr (std::endian::native == std::endian::big) v = byteSwap(v);
    append(&v, sizeof(U));
  }

  // `n` > 0.
  void append(const void* p, size_t n) {
    if (static_cast<size_t>(end_ - cur_) >= n) [[likely]] {
      std::memcpy(cur_, p, n);
      cur_ += n;
    } else {
      appendSlow(p, n);
    }
  }

  void appendSlow(const void* p, size_t n) {
    if (begin_ != nullptr) {
      // The raw range is full: continue in the vector.
      buf_->assign(begin_, cur_);
      begin_ = cur_ = end_ = nullptr;
    }
    // resize + memcpy rather than insert(end, p, p + n): GCC 12 at -O2/-O3
    // reports a false -Wstringop-overflow for the inlined insert of a few
    // bytes (a known GCC 12 false positive) in every user's Release build.
    const size_t old = buf_->size();
    buf_->resize(old + n);
    std::memcpy(buf_->data() + old, p, n);
  }

  template <class U>
  static U byteSwap(U v) {
    if constexpr (sizeof(U) == 2) return __builtin_bswap16(v);
    if constexpr (sizeof(U) == 4) return __builtin_bswap32(v);
    if constexpr (sizeof(U) == 8) return __builtin_bswap64(v);
  }

  std::vector<uint8_t>* buf_;
  uint8_t* begin_ = nullptr;
  uint8_t* cur_ = nullptr;
  uint8_t* end_ = nullptr;
};

// Decodes values from a non-owned byte range, checking every read.
class DataInputView {
 public:
  DataInputView(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  uint8_t readU8() {
    require(1, "uint8");
    return data_[pos_++];
  }
  int8_t readI8() {
    require(1, "int8");
    return static_cast<int8_t>(data_[pos_++]);
  }
  bool readBool() {
    require(1, "bool");
    uint8_t b = data_[pos_];
    if (b > 1) failAt(pos_, "invalid bool byte " + std::to_string(b) + " (expected 0 or 1)");
    ++pos_;
    return b == 1;
  }
  uint16_t readU16() { return readFixed<uint16_t>("uint16"); }
  int16_t readI16() { return static_cast<int16_t>(readFixed<uint16_t>("int16")); }
  uint32_t readU32() { return readFixed<uint32_t>("uint32"); }
  int32_t readI32() { return static_cast<int32_t>(readFixed<uint32_t>("int32")); }
  uint64_t readU64() { return readFixed<uint64_t>("uint64"); }
  int64_t readI64() { return static_cast<int64_t>(readFixed<uint64_t>("int64")); }
  float readF32() { return std::bit_cast<float>(readFixed<uint32_t>("float")); }
  double readF64() { return std::bit_cast<double>(readFixed<uint64_t>("double")); }

  uint64_t readVarUint() { return readVarUintFor("varuint"); }

  // Decodes a varuint that describes `what` (used in error messages).
  uint64_t readVarUintFor(const char* what) {
    const size_t start = pos_;
    uint64_t result = 0;
    for (unsigned shift = 0;; shift += 7) {
      if (pos_ == size_) {
        failAt(start, std::string("truncated input while reading ") + what + " (varuint)");
      }
      const uint8_t b = data_[pos_++];
      // The 10th byte may only carry bit 63.
      if (shift == 63 && b > 1) {
        failAt(start, std::string("varuint for ") + what + " overflows 64 bits");
      }
      result |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return result;
    }
  }

  void readBytes(void* p, size_t n) {
    require(n, "raw bytes");
    if (n == 0) return;
    std::memcpy(p, data_ + pos_, n);
    pos_ += n;
  }

  // Overwrites `into`, keeping its capacity.
  void readString(std::string& into) {
    std::string_view s = readStringView();
    into.assign(s.data(), s.size());
  }

  // A view into the input range: valid as long as the range is.
  std::string_view readStringView() {
    const size_t start = pos_;
    const uint64_t n = readVarUintFor("string length");
    if (n > remaining()) {
      failAt(start, "string length " + std::to_string(n) + " exceeds the " +
                        std::to_string(remaining()) + " bytes that remain");
    }
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }

  // Offset of the next byte to read, from the start of the range.
  size_t position() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  // Throws SerializationError("<message> at byte offset <offset>"). For
  // custom serializers that find an invalid value.
  [[noreturn]] void failAt(size_t offset, const std::string& message) const {
    throw SerializationError(message + " at byte offset " + std::to_string(offset) + " (input is " +
                             std::to_string(size_) + " bytes)");
  }

 private:
  void require(size_t n, const char* what) const {
    if (n > size_ - pos_) [[unlikely]]
      failTruncated(n, what);
  }
  // Out of line and cold, so require() inlines to a compare and a branch.
  [[noreturn, gnu::cold, gnu::noinline]] void failTruncated(size_t n, const char* what) const {
    failAt(pos_, std::string("truncated input while reading ") + what + ": need " +
                     std::to_string(n) + " bytes, " + std::to_string(size_ - pos_) + " remain");
  }

  template <class U>
  U readFixed(const char* what) {
    require(sizeof(U), what);
    U v;
    std::memcpy(&v, data_ + pos_, sizeof(U));
    pos_ += sizeof(U);
    if constexpr (std::endian::native == std::endian::big) {
      if constexpr (sizeof(U) == 2) v = __builtin_bswap16(v);
      if constexpr (sizeof(U) == 4) v = __builtin_bswap32(v);
      if constexpr (sizeof(U) == 8) v = __builtin_bswap64(v);
    }
    return v;
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// How a T is encoded. The primary template is left undefined: a type without
// a specialization is not Serializable. Every specialization provides
//   static void serialize(const T& value, DataOutputView& out);
//   static void deserialize(T& into, DataInputView& in);  // overwrite, reuse storage
//   static std::string schema();  // canonical type text, e.g. "tuple<int64,string>"
// and may provide
//   static constexpr size_t kMinEncodedSize;  // fewest bytes one value takes
// which bounds container lengths read from untrusted bytes. When it is absent
// the value is assumed to take at least one byte; a custom serializer that
// can write zero bytes must declare 0 (such types cannot be container
// elements).
template <class T, class Enable = void>
struct TypeSerializer;

template <class T>
concept Serializable = requires {
  TypeSerializer<T>::schema();
};

// 64-bit FNV-1a of TypeSerializer<T>::schema(). Schema text depends only on
// the type's structure, so the fingerprint is the same across builds and
// machines; two types with the same fingerprint have the same wire format.
template <class T>
uint64_t schemaFingerprint();

// ----------------------------------------------------------------------------
// SLUICE_STRUCT support: the descriptor that the macro generates.

namespace internal {

template <class T>
struct StructTag {};

template <class S, class M>
struct StructField {
  std::string_view name;
  M S::*member;
};

template <class S, class M>
constexpr StructField<S, M> makeStructField(std::string_view name, M S::*member) {
  return {name, member};
}

template <class... Fields>
struct StructInfo {
  std::string_view name;
  std::tuple<Fields...> fields;
};

template <class... Fields>
constexpr StructInfo<Fields...> makeStructInfo(std::string_view name, Fields... fields) {
  return {name, std::tuple<Fields...>(fields...)};
}

// Lets the unqualified call below always find a declaration; the real
// overloads come from SLUICE_STRUCT through argument-dependent lookup.
void sluiceDescribeStruct() = delete;

template <class T>
concept HasStructDescription = requires {
  sluiceDescribeStruct(StructTag<T>{});
};

template <class T>
constexpr auto describeStruct() {
  return sluiceDescribeStruct(StructTag<T>{});
}

// "app::Order" -> "Order": the schema must not depend on how the name was
// spelled at the macro's call site.
constexpr std::string_view unqualifiedName(std::string_view name) {
  const size_t colon = name.rfind("::");
  if (colon != std::string_view::npos) name.remove_prefix(colon + 2);
  while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
  return name;
}

}  // namespace internal

// A struct declared with SLUICE_STRUCT.
template <class T>
concept SluiceStruct = internal::HasStructDescription<T>;

// Compile-time description of a SLUICE_STRUCT type: its name and its fields
// in declared order.
template <SluiceStruct T>
struct StructTraits {
 private:
  static constexpr auto kInfo = internal::describeStruct<T>();
  using FieldTuple = decltype(kInfo.fields);

  template <size_t... I>
  static constexpr auto namesOf(std::index_sequence<I...>) {
    return std::array<std::string_view, sizeof...(I)>{std::get<I>(kInfo.fields).name...};
  }

 public:
  static constexpr std::string_view kName = internal::unqualifiedName(kInfo.name);
  static constexpr size_t kFieldCount = std::tuple_size_v<FieldTuple>;
  static constexpr std::array<std::string_view, kFieldCount> kFieldNames =
      namesOf(std::make_index_sequence<kFieldCount>());

  // The I-th field's member pointer.
  template <size_t I>
  static constexpr auto kMember = std::get<I>(kInfo.fields).member;

  template <size_t I>
  using FieldType = std::remove_cvref_t<decltype(std::declval<T&>().*kMember<I>)>;

  // Reference to the I-th field of `obj`; const-ness follows `obj`.
  template <size_t I, class Obj>
  static constexpr auto& get(Obj& obj) {
    return obj.*kMember<I>;
  }
};

// Index of the field called `name`, or -1.
template <SluiceStruct T>
constexpr int32_t fieldIndex(std::string_view name) {
  for (size_t i = 0; i < StructTraits<T>::kFieldCount; ++i) {
    if (StructTraits<T>::kFieldNames[i] == name) return static_cast<int32_t>(i);
  }
  return -1;
}

namespace internal {

// A SLUICE_STRUCT object, const or not.
template <class Obj>
concept StructObject = SluiceStruct<std::remove_const_t<Obj>>;

template <class Obj, class F, size_t... I>
constexpr void forEachFieldAt(Obj& obj, F& f, std::index_sequence<I...>) {
  using Traits = StructTraits<std::remove_const_t<Obj>>;
  (static_cast<void>(f(Traits::kFieldNames[I], Traits::template get<I>(obj))), ...);
}

template <class Obj, class F, size_t... I>
constexpr bool visitFieldAt(Obj& obj, size_t index, F& f, std::index_sequence<I...>) {
  using Traits = StructTraits<std::remove_const_t<Obj>>;
  return ((index == I && (static_cast<void>(f(Traits::template get<I>(obj))), true)) || ...);
}

}  // namespace internal

// Calls f(std::string_view name, field&) for every field in declared order;
// the field reference is const when `obj` is.
template <internal::StructObject Obj, class F>
constexpr void forEachField(Obj& obj, F&& f) {
  constexpr size_t kCount = StructTraits<std::remove_const_t<Obj>>::kFieldCount;
  internal::forEachFieldAt(obj, f, std::make_index_sequence<kCount>());
}

// Calls f(field&) for the field at runtime position `index` (see fieldIndex);
// returns false, calling nothing, when index is out of range. `f` must accept
// every field type (a generic lambda).
template <internal::StructObject Obj, class F>
constexpr bool visitField(Obj& obj, size_t index, F&& f) {
  constexpr size_t kCount = StructTraits<std::remove_const_t<Obj>>::kFieldCount;
  return internal::visitFieldAt(obj, index, f, std::make_index_sequence<kCount>());
}

// ----------------------------------------------------------------------------
// Built-in serializers.

namespace internal {

template <class T>
constexpr size_t minEncodedSize() {
  if constexpr (requires { TypeSerializer<T>::kMinEncodedSize; }) {
    return TypeSerializer<T>::kMinEncodedSize;
  } else {
    return 1;
  }
}

template <class T>
std::string schemaOf() {
  return TypeSerializer<T>::schema();
}

template <class... Ts>
std::string joinSchemas() {
  std::string out;
  ((out += (out.empty() ? "" : ","), out += schemaOf<Ts>()), ...);
  return out;
}

// Reads a container's element count and rejects one that could not fit in
// the bytes that follow, before anything is allocated for it.
template <class Elem>
size_t readElementCount(DataInputView& in, std::string (*containerSchema)()) {
  constexpr size_t kMin = minEncodedSize<Elem>();
  static_assert(kMin > 0,
                "container elements must take at least one byte each, or a corrupt length "
                "could demand an unbounded allocation; wrap the element in std::optional");
  const size_t start = in.position();
  const uint64_t n = in.readVarUintFor("container length");
  if (n > in.remaining() / kMin) {
    in.failAt(start, "length " + std::to_string(n) + " of " + containerSchema() +
                         " cannot fit in the " + std::to_string(in.remaining()) +
                         " bytes that remain");
  }
  return static_cast<size_t>(n);
}

template <class T>
std::string arithmeticSchema() {
  if constexpr (std::is_same_v<T, bool>) {
    return "bool";
  } else if constexpr (std::is_same_v<T, char>) {
    return "char";
  } else if constexpr (std::is_same_v<T, float>) {
    return "float";
  } else if constexpr (std::is_same_v<T, double>) {
    return "double";
  } else {
    return std::string(std::is_signed_v<T> ? "int" : "uint") + std::to_string(sizeof(T) * 8);
  }
}

// Map and set decoding shared by the ordered and unordered containers:
// old nodes are taken out of `into` and refilled, so a map decoded again and
// again stops allocating nodes once it has enough of them.
template <class Container, class ReadNode, class ReadFresh>
void decodeNodeContainer(Container& into, DataInputView& in, size_t n, const char* kind,
                         ReadNode readNode, ReadFresh readFresh) {
  Container spare;
  spare.swap(into);
  if constexpr (requires { into.reserve(n); }) into.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t start = in.position();
    bool inserted;
    if (!spare.empty()) {
      auto node = spare.extract(spare.begin());
      readNode(node);
      inserted = into.insert(std::move(node)).inserted;
    } else {
      inserted = readFresh();
    }
    if (!inserted) in.failAt(start, std::string("duplicate key in ") + kind);
  }
}

}  // namespace internal

template <class T>
struct TypeSerializer<
    T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, long double>>> {
  static constexpr size_t kMinEncodedSize = sizeof(T);

  static void serialize(const T& value, DataOutputView& out) {
    if constexpr (std::is_same_v<T, bool>) {
      out.writeBool(value);
    } else if constexpr (std::is_same_v<T, float>) {
      out.writeF32(value);
    } else if constexpr (std::is_same_v<T, double>) {
      out.writeF64(value);
    } else if constexpr (sizeof(T) == 1) {
      out.writeU8(static_cast<uint8_t>(value));
    } else if constexpr (sizeof(T) == 2) {
      out.writeU16(static_cast<uint16_t>(value));
    } else if constexpr (sizeof(T) == 4) {
      out.writeU32(static_cast<uint32_t>(value));
    } else {
      static_assert(sizeof(T) == 8);
      out.writeU64(static_cast<uint64_t>(value));
    }
  }

  static void deserialize(T& into, DataInputView& in) {
    if constexpr (std::is_same_v<T, bool>) {
      into = in.readBool();
    } else if constexpr (std::is_same_v<T, float>) {
      into = in.readF32();
    } else if constexpr (std::is_same_v<T, double>) {
      into = in.readF64();
    } else if constexpr (std::is_signed_v<T>) {
      // Signed readers, so that error messages name the signed type.
      if constexpr (sizeof(T) == 1) into = static_cast<T>(in.readI8());
      if constexpr (sizeof(T) == 2) into = static_cast<T>(in.readI16());
      if constexpr (sizeof(T) == 4) into = static_cast<T>(in.readI32());
      if constexpr (sizeof(T) == 8) into = static_cast<T>(in.readI64());
    } else {
      if constexpr (sizeof(T) == 1) into = static_cast<T>(in.readU8());
      if constexpr (sizeof(T) == 2) into = static_cast<T>(in.readU16());
      if constexpr (sizeof(T) == 4) into = static_cast<T>(in.readU32());
      if constexpr (sizeof(T) == 8) into = static_cast<T>(in.readU64());
    }
  }

  static std::string schema() { return internal::arithmeticSchema<T>(); }
};

template <>
struct TypeSerializer<std::string> {
  static constexpr size_t kMinEncodedSize = 1;
  static void serialize(const std::string& value, DataOutputView& out) { out.writeString(value); }
  static void deserialize(std::string& into, DataInputView& in) { in.readString(into); }
  static std::string schema() { return "string"; }
};

template <Serializable A, Serializable B>
struct TypeSerializer<std::pair<A, B>> {
  static constexpr size_t kMinEncodedSize =
      internal::minEncodedSize<A>() + internal::minEncodedSize<B>();
  static void serialize(const std::pair<A, B>& value, DataOutputView& out) {
    TypeSerializer<A>::serialize(value.first, out);
    TypeSerializer<B>::serialize(value.second, out);
  }
  static void deserialize(std::pair<A, B>& into, DataInputView& in) {
    TypeSerializer<A>::deserialize(into.first, in);
    TypeSerializer<B>::deserialize(into.second, in);
  }
  static std::string schema() { return "tuple<" + internal::joinSchemas<A, B>() + ">"; }
};

template <Serializable... Ts>
struct TypeSerializer<std::tuple<Ts...>> {
  static constexpr size_t kMinEncodedSize = (size_t{0} + ... + internal::minEncodedSize<Ts>());
  static void serialize(const std::tuple<Ts...>& value, DataOutputView& out) {
    std::apply([&](const Ts&... f) { (TypeSerializer<Ts>::serialize(f, out), ...); }, value);
  }
  static void deserialize(std::tuple<Ts...>& into, DataInputView& in) {
    std::apply([&](Ts&... f) { (TypeSerializer<Ts>::deserialize(f, in), ...); }, into);
  }
  static std::string schema() { return "tuple<" + internal::joinSchemas<Ts...>() + ">"; }
};

template <Serializable T, size_t N>
struct TypeSerializer<std::array<T, N>> {
  static constexpr size_t kMinEncodedSize = N * internal::minEncodedSize<T>();
  static void serialize(const std::array<T, N>& value, DataOutputView& out) {
    for (const T& e : value) TypeSerializer<T>::serialize(e, out);
  }
  static void deserialize(std::array<T, N>& into, DataInputView& in) {
    for (T& e : into) TypeSerializer<T>::deserialize(e, in);
  }
  static std::string schema() {
    return "array<" + internal::schemaOf<T>() + "," + std::to_string(N) + ">";
  }
};

template <Serializable T, class A>
struct TypeSerializer<std::vector<T, A>> {
  static constexpr size_t kMinEncodedSize = 1;
  static void serialize(const std::vector<T, A>& value, DataOutputView& out) {
    out.writeVarUint(value.size());
    if constexpr (std::is_same_v<T, bool>) {
      for (const bool e : value) out.writeBool(e);  // vector<bool> yields proxies
    } else {
      for (const T& e : value) TypeSerializer<T>::serialize(e, out);
    }
  }
  static void deserialize(std::vector<T, A>& into, DataInputView& in) {
    const size_t n = internal::readElementCount<T>(in, &schema);
    // Elements that stay keep their own storage (e.g. string capacity).
    into.resize(n);
    if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < n; ++i) into[i] = in.readBool();
    } else {
      for (T& e : into) TypeSerializer<T>::deserialize(e, in);
    }
  }
  static std::string schema() { return "vector<" + internal::schemaOf<T>() + ">"; }
};

template <Serializable T>
struct TypeSerializer<std::optional<T>> {
  static constexpr size_t kMinEncodedSize = 1;
  static void serialize(const std::optional<T>& value, DataOutputView& out) {
    out.writeU8(value.has_value() ? 1 : 0);
    if (value) TypeSerializer<T>::serialize(*value, out);
  }
  static void deserialize(std::optional<T>& into, DataInputView& in) {
    const size_t start = in.position();
    const uint8_t tag = in.readU8();
    if (tag == 0) {
      into.reset();
    } else if (tag == 1) {
      if (!into) into.emplace();
      TypeSerializer<T>::deserialize(*into, in);
    } else {
      in.failAt(start, "invalid optional tag " + std::to_string(tag) + " (expected 0 or 1)");
    }
  }
  static std::string schema() { return "optional<" + internal::schemaOf<T>() + ">"; }
};

namespace internal {

template <class Map, class K, class V>
struct MapSerializer {
  static constexpr size_t kMinEncodedSize = 1;
  static void serialize(const Map& value, DataOutputView& out) {
    out.writeVarUint(value.size());
    for (const auto& [k, v] : value) {
      TypeSerializer<K>::serialize(k, out);
      TypeSerializer<V>::serialize(v, out);
    }
  }
  static void deserialize(Map& into, DataInputView& in) {
    const size_t n = readElementCount<std::pair<K, V>>(in, &schema);
    decodeNodeContainer(
        into, in, n, "map",
        [&](auto& node) {
          TypeSerializer<K>::deserialize(node.key(), in);
          TypeSerializer<V>::deserialize(node.mapped(), in);
        },
        [&] {
          K k{};
          V v{};
          TypeSerializer<K>::deserialize(k, in);
          TypeSerializer<V>::deserialize(v, in);
          return into.emplace(std::move(k), std::move(v)).second;
        });
  }
  static std::string schema() { return "map<" + joinSchemas<K, V>() + ">"; }
};

template <class Set, class K>
struct SetSerializer {
  static constexpr size_t kMinEncodedSize = 1;
  static void serialize(const Set& value, DataOutputView& out) {
    out.writeVarUint(value.size());
    for (const auto& k : value) TypeSerializer<K>::serialize(k, out);
  }
  static void deserialize(Set& into, DataInputView& in) {
    const size_t n = readElementCount<K>(in, &schema);
    decodeNodeContainer(
        into, in, n, "set", [&](auto& node) { TypeSerializer<K>::deserialize(node.value(), in); },
        [&] {
          K k{};
          TypeSerializer<K>::deserialize(k, in);
          return into.insert(std::move(k)).second;
        });
  }
  static std::string schema() { return "set<" + schemaOf<K>() + ">"; }
};

}  // namespace internal

// Ordered and unordered maps share a wire format and a schema, so either can
// read what the other wrote.
template <Serializable K, Serializable V, class C, class A>
struct TypeSerializer<std::map<K, V, C, A>> : internal::MapSerializer<std::map<K, V, C, A>, K, V> {
};

template <Serializable K, Serializable V, class H, class E, class A>
struct TypeSerializer<std::unordered_map<K, V, H, E, A>>
    : internal::MapSerializer<std::unordered_map<K, V, H, E, A>, K, V> {};

template <Serializable K, class C, class A>
struct TypeSerializer<std::set<K, C, A>> : internal::SetSerializer<std::set<K, C, A>, K> {};

template <Serializable K, class H, class E, class A>
struct TypeSerializer<std::unordered_set<K, H, E, A>>
    : internal::SetSerializer<std::unordered_set<K, H, E, A>, K> {};

// SLUICE_STRUCT types: the fields in declared order, like a tuple.
// Schema: "struct Name{field:schema,...}".
template <class T>
struct TypeSerializer<T, std::enable_if_t<SluiceStruct<T>>> {
 private:
  using Traits = StructTraits<T>;

  template <size_t... I>
  static constexpr size_t minSize(std::index_sequence<I...>) {
    return (size_t{0} + ... + internal::minEncodedSize<typename Traits::template FieldType<I>>());
  }

 public:
  static constexpr size_t kMinEncodedSize =
      minSize(std::make_index_sequence<Traits::kFieldCount>());

  static void serialize(const T& value, DataOutputView& out) {
    forEachField(value, [&](std::string_view, const auto& f) {
      TypeSerializer<std::remove_cvref_t<decltype(f)>>::serialize(f, out);
    });
  }
  static void deserialize(T& into, DataInputView& in) {
    forEachField(into, [&](std::string_view, auto& f) {
      TypeSerializer<std::remove_cvref_t<decltype(f)>>::deserialize(f, in);
    });
  }
  static std::string schema() {
    std::string out = "struct ";
    out += Traits::kName;
    out += '{';
    appendFields(out, std::make_index_sequence<Traits::kFieldCount>());
    out += '}';
    return out;
  }

 private:
  template <size_t... I>
  static void appendFields(std::string& out, std::index_sequence<I...>) {
    ((out += (I == 0 ? "" : ","), out += Traits::kFieldNames[I], out += ':',
      out += internal::schemaOf<typename Traits::template FieldType<I>>()),
     ...);
  }
};

template <class T>
uint64_t schemaFingerprint() {
  static const uint64_t kFingerprint = [] {
    uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis
    for (unsigned char c : TypeSerializer<T>::schema()) {
      h ^= c;
      h *= 0x100000001b3ULL;  // FNV-1a 64 prime
    }
    return h;
  }();
  return kFingerprint;
}

}  // namespace sluice

// ----------------------------------------------------------------------------
// SLUICE_STRUCT(Type, field1, field2, ...)
//
// Makes a plain struct serializable and lets the runtime visit its fields by
// name. Place it right after the struct, in the namespace that declares the
// struct (the global namespace included), with the unqualified type name:
//
//   namespace shop {
//   struct Order { std::string id; int64_t cents; };
//   SLUICE_STRUCT(Order, id, cents)
//   }  // namespace shop
//
// It defines one constexpr function, found by argument-dependent lookup, that
// describes the fields; sluice::StructTraits<T> (kName, kFieldNames,
// kFieldCount, FieldType<I>, get<I>), sluice::fieldIndex<T>(name),
// sluice::forEachField(obj, f) and sluice::visitField(obj, index, f) read it.
// List every field that should be serialized, in any order (the order is the
// wire order); fields left out are neither serialized nor visible. Up to 256
// fields. Not supported: bit-fields, reference
// members, class templates (commas in the type), structs nested in a class.
// A type derived from a SLUICE_STRUCT type is not itself one.
#define SLUICE_STRUCT(Type, ...)                                                          \
  constexpr auto sluiceDescribeStruct(::sluice::internal::StructTag<Type>) {              \
    return ::sluice::internal::makeStructInfo(#Type __VA_OPT__(                           \
        , SLUICE_INTERNAL_PP_FOR_EACH(SLUICE_INTERNAL_STRUCT_FIELD, Type, __VA_ARGS__))); \
  }

#define SLUICE_INTERNAL_STRUCT_FIELD(Type, field) \
  ::sluice::internal::makeStructField(#field, &Type::field)

// Comma-separated macro(ctx, x) for every x, by repeated rescanning: each
// argument takes one rescan and EXPAND provides at least 4^4 = 256 of them.
#define SLUICE_INTERNAL_PP_PARENS ()
#define SLUICE_INTERNAL_PP_EXPAND(...)                   \
  SLUICE_INTERNAL_PP_EXPAND4(SLUICE_INTERNAL_PP_EXPAND4( \
      SLUICE_INTERNAL_PP_EXPAND4(SLUICE_INTERNAL_PP_EXPAND4(__VA_ARGS__))))
#define SLUICE_INTERNAL_PP_EXPAND4(...)                  \
  SLUICE_INTERNAL_PP_EXPAND3(SLUICE_INTERNAL_PP_EXPAND3( \
      SLUICE_INTERNAL_PP_EXPAND3(SLUICE_INTERNAL_PP_EXPAND3(__VA_ARGS__))))
#define SLUICE_INTERNAL_PP_EXPAND3(...)                  \
  SLUICE_INTERNAL_PP_EXPAND2(SLUICE_INTERNAL_PP_EXPAND2( \
      SLUICE_INTERNAL_PP_EXPAND2(SLUICE_INTERNAL_PP_EXPAND2(__VA_ARGS__))))
#define SLUICE_INTERNAL_PP_EXPAND2(...)                  \
  SLUICE_INTERNAL_PP_EXPAND1(SLUICE_INTERNAL_PP_EXPAND1( \
      SLUICE_INTERNAL_PP_EXPAND1(SLUICE_INTERNAL_PP_EXPAND1(__VA_ARGS__))))
#define SLUICE_INTERNAL_PP_EXPAND1(...) __VA_ARGS__
#define SLUICE_INTERNAL_PP_FOR_EACH(macro, ctx, ...) \
  __VA_OPT__(SLUICE_INTERNAL_PP_EXPAND(SLUICE_INTERNAL_PP_FOR_EACH_STEP(macro, ctx, __VA_ARGS__)))
#define SLUICE_INTERNAL_PP_FOR_EACH_STEP(macro, ctx, first, ...) \
  macro(ctx, first) __VA_OPT__(                                  \
      , SLUICE_INTERNAL_PP_FOR_EACH_AGAIN SLUICE_INTERNAL_PP_PARENS(macro, ctx, __VA_ARGS__))
#define SLUICE_INTERNAL_PP_FOR_EACH_AGAIN() SLUICE_INTERNAL_PP_FOR_EACH_STEP
