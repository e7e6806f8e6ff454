// Round trips, exact wire bytes, schema text and fingerprints, storage reuse,
// and malformed input for the serializers in <sluice/core/serializer.h>.
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/core/serializer.h>

// SLUICE_STRUCT at global scope.
struct SerializerTestPoint {
  int32_t x = 0;
  int32_t y = 0;
  bool operator==(const SerializerTestPoint&) const = default;
};
SLUICE_STRUCT(SerializerTestPoint, x, y)

// SLUICE_STRUCT inside the user's own namespace, nested in another struct.
namespace serializer_test_shop {

struct Item {
  std::string sku;
  double price = 0;
  std::optional<SerializerTestPoint> location;
  bool operator==(const Item&) const = default;
};
SLUICE_STRUCT(Item, sku, price, location)

struct Order {
  int64_t id = 0;
  std::vector<Item> items;
  std::map<std::string, int32_t> tags;
  bool operator==(const Order&) const = default;
};
SLUICE_STRUCT(Order, id, items, tags)

}  // namespace serializer_test_shop

namespace sluice {
namespace serializer_test {
namespace {

using serializer_test_shop::Item;
using serializer_test_shop::Order;

struct WordCount {
  std::string word;
  int64_t count = 0;
  bool operator==(const WordCount&) const = default;
};
SLUICE_STRUCT(WordCount, word, count)

struct Empty {
  bool operator==(const Empty&) const = default;
};
SLUICE_STRUCT(Empty)

// More fields than the 16 the macro must support.
struct Wide {
  int8_t f01 = 0;
  int16_t f02 = 0;
  int32_t f03 = 0;
  int64_t f04 = 0;
  uint8_t f05 = 0;
  uint16_t f06 = 0;
  uint32_t f07 = 0;
  uint64_t f08 = 0;
  float f09 = 0;
  double f10 = 0;
  bool f11 = false;
  char f12 = 0;
  std::string f13;
  std::vector<int32_t> f14;
  std::optional<std::string> f15;
  std::pair<int32_t, std::string> f16;
  WordCount f17;
  bool operator==(const Wide&) const = default;
};
SLUICE_STRUCT(Wide, f01, f02, f03, f04, f05, f06, f07, f08, f09, f10, f11, f12, f13, f14, f15, f16,
              f17)

// Derives from a SLUICE_STRUCT type without declaring its own fields.
struct DerivedCount : WordCount {
  int32_t extra = 0;
};

struct NotDeclared {
  int32_t a;
};

static_assert(Serializable<int32_t>);
static_assert(Serializable<std::vector<std::map<std::string, std::optional<WordCount>>>>);
static_assert(!Serializable<long double>);
static_assert(!Serializable<NotDeclared>);
static_assert(!Serializable<std::vector<NotDeclared>>);
static_assert(!Serializable<std::pair<int32_t, NotDeclared>>);
static_assert(SluiceStruct<WordCount> && SluiceStruct<Order> && SluiceStruct<SerializerTestPoint>);
static_assert(!SluiceStruct<DerivedCount>);
static_assert(!SluiceStruct<std::string>);
static_assert(!Serializable<DerivedCount>);

template <class T>
std::vector<uint8_t> encode(const T& value) {
  std::vector<uint8_t> buf;
  DataOutputView out(buf);
  TypeSerializer<T>::serialize(value, out);
  EXPECT_EQ(out.size(), buf.size());
  return buf;
}

// Decodes all of `bytes` into `into`, asserting nothing is left over.
template <class T>
void decodeInto(const std::vector<uint8_t>& bytes, T& into) {
  DataInputView in(bytes.data(), bytes.size());
  TypeSerializer<T>::deserialize(into, in);
  EXPECT_EQ(in.remaining(), 0u);
}

// Round trip into a fresh object and into one already holding `previous`,
// so that storage reuse is exercised too. Re-encoding gives the same bytes
// unless an unordered container is involved.
template <class T>
void expectRoundTrip(const T& value, const T& previous = T{}, bool sameBytesAgain = true) {
  const std::vector<uint8_t> bytes = encode(value);
  T fresh{};
  decodeInto(bytes, fresh);
  EXPECT_TRUE(fresh == value);
  T reused = previous;
  decodeInto(bytes, reused);
  EXPECT_TRUE(reused == value);
  if (sameBytesAgain) {
    EXPECT_EQ(encode(fresh), bytes);
  }
}

std::vector<uint8_t> bytesOf(std::initializer_list<int> values) {
  std::vector<uint8_t> out;
  for (int v : values) out.push_back(static_cast<uint8_t>(v));
  return out;
}

// Runs deserialize over exactly `bytes`, held in a heap block of that size so
// the sanitizer sees any read past the end.
template <class T>
void decodeExact(const std::vector<uint8_t>& bytes, size_t size) {
  auto block = std::make_unique<uint8_t[]>(size == 0 ? 1 : size);
  std::copy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size), block.get());
  DataInputView in(size == 0 ? nullptr : block.get(), size);
  T into{};
  TypeSerializer<T>::deserialize(into, in);
}

// Asserts deserialize throws SerializationError whose message contains every
// fragment.
template <class T>
void expectMalformed(const std::vector<uint8_t>& bytes,
                     std::initializer_list<std::string> fragments) {
  try {
    decodeExact<T>(bytes, bytes.size());
    ADD_FAILURE() << "no SerializationError";
  } catch (const SerializationError& e) {
    for (const std::string& f : fragments) {
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos)
          << "'" << f << "' not in: " << e.what();
    }
  }
}

template <class T>
void expectEveryTruncationThrows(const T& value) {
  const std::vector<uint8_t> bytes = encode(value);
  ASSERT_GT(bytes.size(), 0u);
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THROW(decodeExact<T>(bytes, n), SerializationError) << "truncated to " << n;
  }
  EXPECT_NO_THROW(decodeExact<T>(bytes, bytes.size()));
}

// ---------------------------------------------------------------------------
// Round trips

template <class T>
void expectIntegerEdges() {
  using L = std::numeric_limits<T>;
  for (T v : {L::min(), L::max(), T{0}, T{1}, static_cast<T>(L::max() / 3)}) {
    expectRoundTrip<T>(v, T{7});
  }
}

TEST(SerializerTest, IntegersRoundTrip) {
  expectIntegerEdges<char>();
  expectIntegerEdges<signed char>();
  expectIntegerEdges<unsigned char>();
  expectIntegerEdges<int16_t>();
  expectIntegerEdges<uint16_t>();
  expectIntegerEdges<int32_t>();
  expectIntegerEdges<uint32_t>();
  expectIntegerEdges<int64_t>();
  expectIntegerEdges<uint64_t>();
  expectIntegerEdges<long long>();
  expectIntegerEdges<unsigned long long>();
  expectRoundTrip(true);
  expectRoundTrip(false, true);
}

TEST(SerializerTest, FloatingPointKeepsExactBits) {
  for (uint64_t bits : {0x0ULL, 0x8000000000000000ULL, 0x7ff0000000000000ULL, 0xfff0000000000000ULL,
                        0x7ff8000000000000ULL, 0x7ff0000000000001ULL, 0xfff8dead0000beefULL,
                        0x0000000000000001ULL, 0x7fefffffffffffffULL}) {
    const double v = std::bit_cast<double>(bits);
    double back = 1.5;
    decodeInto(encode(v), back);
    EXPECT_EQ(std::bit_cast<uint64_t>(back), bits);
  }
  for (uint32_t bits :
       {0x0U, 0x80000000U, 0x7f800000U, 0x7fc00000U, 0x7f800001U, 0xffc01234U, 0x00000001U}) {
    const float v = std::bit_cast<float>(bits);
    float back = 1.5f;
    decodeInto(encode(v), back);
    EXPECT_EQ(std::bit_cast<uint32_t>(back), bits);
  }
}

TEST(SerializerTest, StringsRoundTrip) {
  expectRoundTrip(std::string());
  expectRoundTrip(std::string("hello"), std::string(100, 'z'));
  expectRoundTrip(std::string("caf\xc3\xa9 \xf0\x9f\x98\x80 \xe6\x97\xa5\xe6\x9c\xac"));
  expectRoundTrip(std::string("nul\0inside", 10));
  expectRoundTrip(std::string("\xff\xfe not utf-8"));
  expectRoundTrip(std::string(100000, 'x'));  // length needs a 3-byte varuint
}

TEST(SerializerTest, ContainersRoundTrip) {
  expectRoundTrip(std::vector<int32_t>{});
  expectRoundTrip(std::vector<int32_t>{1, -2, INT32_MAX}, std::vector<int32_t>(50, 9));
  expectRoundTrip(std::vector<std::vector<std::string>>{{}, {"a", ""}, {"\xc3\xa9"}},
                  std::vector<std::vector<std::string>>{{"x", "y", "z"}});
  for (size_t n : {0, 1, 8, 9, 1000}) {
    std::vector<bool> bits(n);
    for (size_t i = 0; i < n; ++i) bits[i] = (i * 7) % 3 == 0;
    expectRoundTrip(bits, std::vector<bool>(5, true));
  }
  expectRoundTrip(std::array<int16_t, 3>{-1, 0, 1});
  expectRoundTrip(std::array<std::string, 2>{"a", "bc"});
  expectRoundTrip(std::array<int32_t, 0>{});
  expectRoundTrip(std::optional<int32_t>{}, std::optional<int32_t>{4});
  expectRoundTrip(std::optional<int32_t>{0});
  expectRoundTrip(std::optional<std::optional<int32_t>>{std::optional<int32_t>{}});
  expectRoundTrip(std::optional<std::optional<int32_t>>{5});
  expectRoundTrip(std::map<std::string, std::vector<int32_t>>{{"a", {1, 2}}, {"", {}}},
                  std::map<std::string, std::vector<int32_t>>{{"old", {9}}});
  expectRoundTrip(std::unordered_map<int64_t, std::string>{{1, "one"}, {-1, "minus"}, {0, ""}},
                  std::unordered_map<int64_t, std::string>{{1, "x"}, {5, "y"}, {6, "z"}, {7, ""}},
                  false);
  expectRoundTrip(std::set<std::string>{"b", "a", "c"}, std::set<std::string>{"q"});
  expectRoundTrip(std::unordered_set<int32_t>{3, 1, 2}, {}, false);
  expectRoundTrip(std::map<int32_t, std::map<int32_t, std::string>>{{1, {{2, "x"}}}, {3, {}}});
}

TEST(SerializerTest, TuplesRoundTrip) {
  expectRoundTrip(std::tuple<>{});
  EXPECT_TRUE(encode(std::tuple<>{}).empty());
  expectRoundTrip(std::tuple<int32_t, std::string, double>{-5, "x", 2.5});
  expectRoundTrip(std::pair<std::string, std::optional<int64_t>>{"k", std::nullopt},
                  std::pair<std::string, std::optional<int64_t>>{"old", 1});
  expectRoundTrip(std::tuple<std::tuple<>, std::pair<int8_t, uint8_t>>{{}, {-1, 255}});
}

TEST(SerializerTest, StructsRoundTrip) {
  expectRoundTrip(WordCount{"hello", 3}, WordCount{"previous-much-longer-word", -1});
  expectRoundTrip(SerializerTestPoint{-1, 2});
  expectRoundTrip(Empty{});
  EXPECT_TRUE(encode(Empty{}).empty());
  Order order{42,
              {Item{"sku-1", 9.99, SerializerTestPoint{1, 2}}, Item{"sku-\xc3\xa9", -0.0, {}}},
              {{"gift", 1}, {"rush", 0}}};
  expectRoundTrip(order, Order{7, {Item{"x", 1, {}}}, {{"z", 3}}});
  Wide wide;
  wide.f01 = INT8_MIN;
  wide.f04 = INT64_MAX;
  wide.f08 = UINT64_MAX;
  wide.f09 = -1.25f;
  wide.f10 = 1e300;
  wide.f11 = true;
  wide.f12 = 'q';
  wide.f13 = "wide";
  wide.f14 = {1, 2, 3};
  wide.f15 = "opt";
  wide.f16 = {16, "sixteen"};
  wide.f17 = {"seventeen", 17};
  expectRoundTrip(wide);
  expectRoundTrip(std::vector<WordCount>{{"a", 1}, {"b", 2}}, std::vector<WordCount>{{"zzz", 9}});
}

// ---------------------------------------------------------------------------
// Wire format

TEST(SerializerTest, WireBytesAreLittleEndianAndLeb128) {
  EXPECT_EQ(encode(int32_t{0x01020304}), bytesOf({0x04, 0x03, 0x02, 0x01}));
  EXPECT_EQ(encode(int64_t{-2}), bytesOf({0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}));
  EXPECT_EQ(encode(uint16_t{0xabcd}), bytesOf({0xcd, 0xab}));
  EXPECT_EQ(encode(1.0), bytesOf({0, 0, 0, 0, 0, 0, 0xf0, 0x3f}));
  EXPECT_EQ(encode(true), bytesOf({1}));
  EXPECT_EQ(encode(std::string("hi")), bytesOf({2, 'h', 'i'}));
  EXPECT_EQ(encode(std::string(300, 'a')).size(), 302u);
  EXPECT_EQ(encode(std::vector<int8_t>(300, 1))[0], 0xac);  // 300 = LEB128 ac 02
  EXPECT_EQ(encode(std::vector<int8_t>(300, 1))[1], 0x02);
  EXPECT_EQ(encode(std::optional<int8_t>{}), bytesOf({0}));
  EXPECT_EQ(encode(std::optional<int8_t>{-1}), bytesOf({1, 0xff}));
  EXPECT_EQ(encode(std::vector<bool>{true, false}), bytesOf({2, 1, 0}));
  EXPECT_EQ(encode(std::map<int8_t, bool>{{2, true}, {1, false}}), bytesOf({2, 1, 0, 2, 1}));
  EXPECT_EQ(encode(WordCount{"a", 1}), bytesOf({1, 'a', 1, 0, 0, 0, 0, 0, 0, 0}));
  // A pair and a 2-tuple share bytes; so do map and unordered_map.
  EXPECT_EQ(encode(std::pair<int8_t, int8_t>{1, 2}), encode(std::tuple<int8_t, int8_t>{1, 2}));
  std::unordered_map<int8_t, int8_t> fromOrdered;
  decodeInto(encode(std::map<int8_t, int8_t>{{1, 2}, {3, 4}}), fromOrdered);
  EXPECT_EQ(fromOrdered, (std::unordered_map<int8_t, int8_t>{{1, 2}, {3, 4}}));
}

TEST(SerializerTest, VarUintRoundTripsEveryWidth) {
  std::vector<uint8_t> buf;
  DataOutputView out(buf);
  std::vector<uint64_t> values;
  for (int shift = 0; shift < 64; ++shift) {
    values.push_back(uint64_t{1} << shift);
    values.push_back((uint64_t{1} << shift) - 1);
  }
  values.push_back(UINT64_MAX);
  for (uint64_t v : values) out.writeVarUint(v);
  DataInputView in(buf.data(), buf.size());
  for (uint64_t v : values) EXPECT_EQ(in.readVarUint(), v);
  EXPECT_EQ(in.remaining(), 0u);
  EXPECT_EQ(encode(std::string(127, 'a')).size(), 128u);
  std::vector<uint8_t> max;
  DataOutputView(max).writeVarUint(UINT64_MAX);
  EXPECT_EQ(max.size(), 10u);
}

TEST(SerializerTest, ViewsReadAndWriteEveryPrimitive) {
  std::vector<uint8_t> buf;
  DataOutputView out(buf);
  out.writeU8(200);
  out.writeBool(true);
  out.writeI32(-7);
  out.writeI64(INT64_MIN);
  out.writeU32(UINT32_MAX);
  out.writeU64(123);
  out.writeF32(0.5f);
  out.writeF64(-0.25);
  out.writeBytes("xyz", 3);
  out.writeString("str");
  DataInputView in(buf.data(), buf.size());
  EXPECT_EQ(in.readU8(), 200);
  EXPECT_TRUE(in.readBool());
  EXPECT_EQ(in.readI32(), -7);
  EXPECT_EQ(in.readI64(), INT64_MIN);
  EXPECT_EQ(in.readU32(), UINT32_MAX);
  EXPECT_EQ(in.readU64(), 123u);
  EXPECT_EQ(in.readF32(), 0.5f);
  EXPECT_EQ(in.readF64(), -0.25);
  char raw[3];
  in.readBytes(raw, 3);
  EXPECT_EQ(std::string(raw, 3), "xyz");
  const size_t before = in.position();
  EXPECT_EQ(in.readStringView(), "str");
  EXPECT_EQ(in.position(), before + 4);
  EXPECT_EQ(in.remaining(), 0u);
}

// ---------------------------------------------------------------------------
// Schemas

TEST(SerializerTest, SchemaTextIsCanonical) {
  EXPECT_EQ(TypeSerializer<int64_t>::schema(), "int64");
  EXPECT_EQ(TypeSerializer<long long>::schema(), "int64");
  EXPECT_EQ(TypeSerializer<uint8_t>::schema(), "uint8");
  EXPECT_EQ(TypeSerializer<int8_t>::schema(), "int8");
  EXPECT_EQ(TypeSerializer<char>::schema(), "char");
  EXPECT_EQ(TypeSerializer<bool>::schema(), "bool");
  EXPECT_EQ(TypeSerializer<float>::schema(), "float");
  EXPECT_EQ(TypeSerializer<std::string>::schema(), "string");
  EXPECT_EQ((TypeSerializer<std::tuple<int64_t, std::string>>::schema()), "tuple<int64,string>");
  EXPECT_EQ((TypeSerializer<std::pair<int64_t, std::string>>::schema()), "tuple<int64,string>");
  EXPECT_EQ(TypeSerializer<std::tuple<>>::schema(), "tuple<>");
  EXPECT_EQ(TypeSerializer<std::vector<double>>::schema(), "vector<double>");
  EXPECT_EQ((TypeSerializer<std::array<uint16_t, 4>>::schema()), "array<uint16,4>");
  EXPECT_EQ(TypeSerializer<std::optional<bool>>::schema(), "optional<bool>");
  EXPECT_EQ((TypeSerializer<std::map<std::string, std::vector<int32_t>>>::schema()),
            "map<string,vector<int32>>");
  EXPECT_EQ((TypeSerializer<std::unordered_map<std::string, std::vector<int32_t>>>::schema()),
            "map<string,vector<int32>>");
  EXPECT_EQ(TypeSerializer<std::unordered_set<int16_t>>::schema(), "set<int16>");
  EXPECT_EQ(TypeSerializer<WordCount>::schema(), "struct WordCount{word:string,count:int64}");
  EXPECT_EQ(TypeSerializer<Empty>::schema(), "struct Empty{}");
  EXPECT_EQ(TypeSerializer<Item>::schema(),
            "struct Item{sku:string,price:double,"
            "location:optional<struct SerializerTestPoint{x:int32,y:int32}>}");
  EXPECT_EQ(TypeSerializer<Order>::schema(), "struct Order{id:int64,items:vector<" +
                                                 TypeSerializer<Item>::schema() +
                                                 ">,tags:map<string,int32>}");
}

TEST(SerializerTest, FingerprintsAreStableFnv1a) {
  // Pinned values: a change here changes the wire contract.
  EXPECT_EQ(schemaFingerprint<int64_t>(), 0xf9d0c88f42834344ULL);
  EXPECT_EQ(schemaFingerprint<std::string>(), 0x704be0d8faaffc58ULL);
  EXPECT_EQ((schemaFingerprint<std::tuple<int64_t, std::string>>()), 0xabebfa5c0e4540dfULL);
  EXPECT_EQ(schemaFingerprint<WordCount>(), 0x353d001fa89a9a6cULL);
  EXPECT_EQ((schemaFingerprint<std::map<std::string, std::vector<int32_t>>>()),
            0xd50a7440b7382f71ULL);
  EXPECT_EQ(schemaFingerprint<long long>(), schemaFingerprint<int64_t>());
  EXPECT_NE(schemaFingerprint<int32_t>(), schemaFingerprint<uint32_t>());
  EXPECT_NE(schemaFingerprint<std::vector<int32_t>>(), schemaFingerprint<std::set<int32_t>>());
}

// ---------------------------------------------------------------------------
// Field access

TEST(SerializerTest, StructTraitsExposeFieldsByName) {
  using Traits = StructTraits<WordCount>;
  static_assert(Traits::kFieldCount == 2);
  static_assert(Traits::kName == "WordCount");
  static_assert(Traits::kFieldNames[0] == "word" && Traits::kFieldNames[1] == "count");
  static_assert(std::is_same_v<Traits::FieldType<1>, int64_t>);
  static_assert(fieldIndex<WordCount>("count") == 1);
  static_assert(fieldIndex<WordCount>("missing") == -1);
  static_assert(StructTraits<Order>::kName == "Order");
  static_assert(StructTraits<Wide>::kFieldCount == 17);
  static_assert(StructTraits<Empty>::kFieldCount == 0);

  WordCount wc{"w", 5};
  Traits::get<1>(wc) += 1;
  EXPECT_EQ(wc.count, 6);

  std::vector<std::string> names;
  forEachField(wc, [&](std::string_view name, auto& field) {
    names.emplace_back(name);
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(field)>, int64_t>) field *= 10;
  });
  EXPECT_EQ(names, (std::vector<std::string>{"word", "count"}));
  EXPECT_EQ(wc.count, 60);

  const WordCount& constRef = wc;
  int64_t summed = 0;
  const int32_t countIndex = fieldIndex<WordCount>("count");
  EXPECT_TRUE(visitField(constRef, static_cast<size_t>(countIndex), [&](const auto& field) {
    static_assert(std::is_const_v<std::remove_reference_t<decltype(field)>>);
    if constexpr (std::is_arithmetic_v<std::remove_cvref_t<decltype(field)>>) summed += field;
  }));
  EXPECT_EQ(summed, 60);
  EXPECT_FALSE(visitField(wc, 2, [](auto&) { ADD_FAILURE(); }));
}

// ---------------------------------------------------------------------------
// Storage reuse on the hot path

// Counts allocations, to show that decoding into a warmed-up object allocates
// nothing.
inline int gAllocations = 0;

template <class T>
struct CountingAllocator {
  using value_type = T;
  CountingAllocator() = default;
  template <class U>
  CountingAllocator(const CountingAllocator<U>&) {}  // NOLINT: rebinding
  T* allocate(size_t n) {
    ++gAllocations;
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, size_t n) { std::allocator<T>().deallocate(p, n); }
  template <class U>
  bool operator==(const CountingAllocator<U>&) const {
    return true;
  }
};

TEST(SerializerTest, DecodingIntoWarmObjectsReusesStorage) {
  std::string s;
  s.reserve(64);
  const char* data = s.data();
  decodeInto(encode(std::string(40, 'q')), s);
  EXPECT_EQ(s.data(), data);

  // Words longer than the small-string buffer, so each has heap storage.
  const std::vector<WordCount> words = {{std::string(30, 'a'), 1}, {std::string(30, 'b'), 2}};
  std::vector<WordCount> target = words;
  const char* word0 = target[0].word.data();
  decodeInto(encode(std::vector<WordCount>{{std::string(20, 'c'), 3}, {"d", 4}}), target);
  EXPECT_EQ(target[0].word.data(), word0);
  EXPECT_EQ(target[0].word, std::string(20, 'c'));

  using Vec = std::vector<int64_t, CountingAllocator<int64_t>>;
  Vec v;
  const std::vector<uint8_t> vecBytes = encode(Vec{1, 2, 3, 4});
  decodeInto(vecBytes, v);
  gAllocations = 0;
  decodeInto(vecBytes, v);
  EXPECT_EQ(gAllocations, 0);

  using Map = std::map<int32_t, int64_t, std::less<int32_t>,
                       CountingAllocator<std::pair<const int32_t, int64_t>>>;
  Map m;
  decodeInto(encode(Map{{1, 10}, {2, 20}, {3, 30}}), m);
  const std::vector<uint8_t> mapBytes = encode(Map{{7, 70}, {8, 80}, {9, 90}});
  gAllocations = 0;
  decodeInto(mapBytes, m);
  EXPECT_EQ(gAllocations, 0);
  EXPECT_EQ(m, (Map{{7, 70}, {8, 80}, {9, 90}}));

  using Set = std::set<int32_t, std::less<int32_t>, CountingAllocator<int32_t>>;
  Set set;
  decodeInto(encode(Set{1, 2}), set);
  const std::vector<uint8_t> setBytes = encode(Set{5, 6});
  gAllocations = 0;
  decodeInto(setBytes, set);
  EXPECT_EQ(gAllocations, 0);
  EXPECT_EQ(set, (Set{5, 6}));

  // Unordered containers keep their nodes but rebuild the bucket array.
  using UMap = std::unordered_map<int32_t, int32_t, std::hash<int32_t>, std::equal_to<int32_t>,
                                  CountingAllocator<std::pair<const int32_t, int32_t>>>;
  UMap um;
  decodeInto(encode(UMap{{1, 1}, {2, 2}}), um);
  const std::vector<uint8_t> umapBytes = encode(UMap{{3, 3}, {4, 4}});
  gAllocations = 0;
  decodeInto(umapBytes, um);
  EXPECT_LE(gAllocations, 1);
  EXPECT_EQ(um, (UMap{{3, 3}, {4, 4}}));

  std::vector<uint8_t> buf;
  DataOutputView out(buf);
  TypeSerializer<std::vector<WordCount>>::serialize(words, out);
  const uint8_t* bufData = buf.data();
  buf.clear();
  TypeSerializer<std::vector<WordCount>>::serialize(words, out);
  EXPECT_EQ(buf.data(), bufData);
}

// ---------------------------------------------------------------------------
// Malformed input

TEST(SerializerTest, TruncationAtEveryOffsetThrows) {
  Order order{-3,
              {Item{"a", 1.5, SerializerTestPoint{3, 4}}, Item{std::string(200, 'l'), 2, {}}},
              {{"t", 1}}};
  expectEveryTruncationThrows(order);
  expectEveryTruncationThrows(std::map<std::string, std::vector<std::optional<WordCount>>>{
      {"k", {std::nullopt, WordCount{"w", 1}}}, {"\xc3\xa9", {}}});
  expectEveryTruncationThrows(std::tuple<bool, std::vector<bool>, std::set<int64_t>, double>{
      true, {false, true}, {1, 1LL << 40}, 0.5});
  expectEveryTruncationThrows(uint64_t{UINT64_MAX});
  expectEveryTruncationThrows(std::string(1000, 'z'));
}

TEST(SerializerTest, MessagesSayWhatAndWhere) {
  expectMalformed<int64_t>(bytesOf({1, 2, 3}), {"truncated input while reading int64",
                                                "need 8 bytes, 3 remain", "at byte offset 0"});
  expectMalformed<std::pair<int32_t, int32_t>>(bytesOf({1, 0, 0, 0, 9}),
                                               {"reading int32", "at byte offset 4"});
  expectMalformed<std::string>(bytesOf({}), {"string length", "at byte offset 0"});
}

TEST(SerializerTest, HugeLengthPrefixesThrowBeforeAllocating) {
  // varuint 2^62 then three bytes.
  const std::vector<uint8_t> huge =
      bytesOf({0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 'a', 'b', 'c'});
  expectMalformed<std::string>(
      huge, {"string length 4611686018427387904", "3 bytes that remain", "at byte offset 0"});
  expectMalformed<std::vector<int8_t>>(huge, {"length 4611686018427387904 of vector<int8>"});
  expectMalformed<std::vector<std::vector<int32_t>>>(huge, {"vector<vector<int32>>"});
  expectMalformed<std::map<int32_t, std::string>>(
      huge, {"length 4611686018427387904 of map<int32,string> cannot fit"});
  expectMalformed<std::unordered_set<int32_t>>(huge, {"set<int32>"});
  // A count that fits in bytes but not in elements: 4 int64 need 32 bytes.
  expectMalformed<std::vector<int64_t>>(bytesOf({4, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}),
                                        {"length 4 of vector<int64>", "12 bytes that remain"});
  // Nested: the inner length is checked against what is left at its offset.
  expectMalformed<std::vector<std::string>>(bytesOf({1, 0xff, 0xff, 0x03, 'x'}),
                                            {"string length 65535", "at byte offset 1"});
  // More than 64 bits of varuint.
  expectMalformed<std::string>(
      bytesOf({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}),
      {"overflows 64 bits", "at byte offset 0"});
  expectMalformed<std::string>(bytesOf({0x80, 0x80}), {"truncated", "string length"});
}

TEST(SerializerTest, InvalidTagBytesThrow) {
  expectMalformed<bool>(bytesOf({2}), {"invalid bool byte 2", "at byte offset 0"});
  expectMalformed<std::vector<bool>>(bytesOf({3, 1, 0, 0xff}),
                                     {"invalid bool byte 255", "at byte offset 3"});
  expectMalformed<WordCount>(bytesOf({0}), {"int64"});
  expectMalformed<std::optional<int8_t>>(bytesOf({2, 5}),
                                         {"invalid optional tag 2", "at byte offset 0"});
  expectMalformed<std::map<int8_t, int8_t>>(bytesOf({2, 1, 1, 1, 2}),
                                            {"duplicate key in map", "at byte offset 3"});
  expectMalformed<std::set<int8_t>>(bytesOf({2, 7, 7}), {"duplicate key in set"});
}

// Random corruption of a valid encoding either decodes or throws
// SerializationError; anything else (a crash, a sanitizer report, another
// exception type) fails the test.
TEST(SerializerTest, RandomCorruptionNeverCrashes) {
  using Value = std::tuple<Order, std::map<std::string, std::vector<std::optional<WordCount>>>,
                           std::vector<bool>, std::unordered_map<int32_t, std::string>>;
  const Value value{Order{1, {Item{"i", 1, SerializerTestPoint{1, 1}}}, {{"t", 2}}},
                    {{"k", {std::nullopt, WordCount{"w", 7}}}},
                    {true, false},
                    {{5, "five"}}};
  const std::vector<uint8_t> bytes = encode(value);
  std::mt19937 rng(12345);
  int decoded = 0;
  int rejected = 0;
  Value reused;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    std::vector<uint8_t> corrupt = bytes;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % corrupt.size();
      switch (rng() % 3) {
        case 0: corrupt[at] = static_cast<uint8_t>(rng()); break;
        case 1: corrupt[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 2: corrupt.resize(at); break;
      }
      if (corrupt.empty()) corrupt.push_back(0xff);
    }
    try {
      DataInputView in(corrupt.data(), corrupt.size());
      TypeSerializer<Value>::deserialize(reused, in);
      ++decoded;
    } catch (const SerializationError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_EQ(decoded + rejected, 3000);
}

// The raw-range mode used on the network path writes the same bytes as the
// vector mode, stays in the range while it fits, and spills when it does not.
TEST(DataOutputViewTest, RawRangeModeWritesTheSameBytesAndSpillsWhenFull) {
  using Value = std::tuple<int64_t, std::string, std::vector<int32_t>>;
  auto encodeToVector = [](const Value& v) {
    std::vector<uint8_t> buf;
    DataOutputView out(buf);
    TypeSerializer<Value>::serialize(v, out);
    return buf;
  };
  for (size_t len : {0u, 3u, 40u, 300u}) {
    Value v{-7, std::string(len, 'x'), std::vector<int32_t>(len / 3, 42)};
    const std::vector<uint8_t> expected = encodeToVector(v);
    for (size_t capacity : {0u, 1u, 9u, 64u, 4096u}) {
      std::vector<uint8_t> range(capacity + 1, 0xEE);  // +1: never zero-sized
      std::vector<uint8_t> overflow;
      DataOutputView out(range.data(), capacity, overflow);
      TypeSerializer<Value>::serialize(v, out);
      ASSERT_EQ(std::vector<uint8_t>(out.data(), out.data() + out.size()), expected)
          << "len " << len << " capacity " << capacity;
      if (expected.size() <= capacity) {
        EXPECT_EQ(out.data(), range.data());
        EXPECT_TRUE(overflow.empty());
      } else {
        EXPECT_EQ(out.data(), overflow.data());
      }
      Value back;
      DataInputView in(out.data(), out.size());
      TypeSerializer<Value>::deserialize(back, in);
      EXPECT_EQ(back, v);
    }
  }
}

}  // namespace
}  // namespace serializer_test
}  // namespace sluice
