#include <array>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/format.h>

namespace format_test {
namespace {

using sluice::appendTo;
using sluice::toString;

struct Order {
  std::string id;
  int64_t cents = 0;
  std::vector<int> items;
};
SLUICE_STRUCT(Order, id, cents, items)

struct Point {
  int x = 0;
  int y = 0;
};
SLUICE_STRUCT(Point, x, y)

// A SLUICE_STRUCT with its own toString(): the method wins.
struct Named {
  std::string name;
  std::string toString() const { return "Named<" + name + ">"; }
};
SLUICE_STRUCT(Named, name)

struct Streamed {
  int v = 0;
};
std::ostream& operator<<(std::ostream& os, const Streamed& s) { return os << "S#" << s.v; }

enum class Color : uint8_t { kRed = 1, kBlue = 7 };

TEST(FormatTest, Integers) {
  EXPECT_EQ(toString(42), "42");
  EXPECT_EQ(toString(-7), "-7");
  EXPECT_EQ(toString(int8_t{-5}), "-5");  // a number, like Java's byte
  EXPECT_EQ(toString(uint8_t{200}), "200");
  EXPECT_EQ(toString(int16_t{-300}), "-300");
  EXPECT_EQ(toString(std::numeric_limits<int64_t>::min()), "-9223372036854775808");
  EXPECT_EQ(toString(std::numeric_limits<uint64_t>::max()), "18446744073709551615");
  EXPECT_EQ(toString(0u), "0");
}

TEST(FormatTest, BoolCharString) {
  EXPECT_EQ(toString(true), "true");
  EXPECT_EQ(toString(false), "false");
  EXPECT_EQ(toString('x'), "x");
  EXPECT_EQ(toString(std::string("hello world")), "hello world");
  EXPECT_EQ(toString(std::string_view("sv")), "sv");
  EXPECT_EQ(toString("literal"), "literal");
  const char* cstr = "cstr";
  EXPECT_EQ(toString(cstr), "cstr");
  EXPECT_EQ(toString(std::string()), "");
}

TEST(FormatTest, DoublesPrintLikeJava) {
  // Expected values are Java's Double.toString output.
  const std::vector<std::pair<double, std::string>> cases = {
      {1.0, "1.0"},
      {0.5, "0.5"},
      {-2.5, "-2.5"},
      {100.0, "100.0"},
      {123456.789, "123456.789"},
      {1234567.0, "1234567.0"},
      {9999999.0, "9999999.0"},
      {1e7, "1.0E7"},
      {12345678.9, "1.23456789E7"},
      {1e20, "1.0E20"},
      {1e21, "1.0E21"},
      {0.001, "0.001"},
      {0.00123, "0.00123"},
      {0.0001, "1.0E-4"},
      {1.5e-5, "1.5E-5"},
      {0.1 + 0.2, "0.30000000000000004"},
      {1.0 / 3.0, "0.3333333333333333"},
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {DBL_MAX, "1.7976931348623157E308"},
      {std::numeric_limits<double>::denorm_min(), "4.9E-324"},
      {2 * std::numeric_limits<double>::denorm_min(), "9.9E-324"},
      {-1e-10, "-1.0E-10"},
      {std::numeric_limits<double>::quiet_NaN(), "NaN"},
      {std::numeric_limits<double>::infinity(), "Infinity"},
      {-std::numeric_limits<double>::infinity(), "-Infinity"},
  };
  for (const auto& [v, want] : cases) EXPECT_EQ(toString(v), want) << "value " << v;
}

TEST(FormatTest, FloatsPrintLikeJava) {
  EXPECT_EQ(toString(1.1f), "1.1");
  EXPECT_EQ(toString(0.1f), "0.1");
  EXPECT_EQ(toString(1.0f), "1.0");
  EXPECT_EQ(toString(FLT_MAX), "3.4028235E38");
  EXPECT_EQ(toString(1e-5f), "1.0E-5");
  EXPECT_EQ(toString(std::numeric_limits<float>::quiet_NaN()), "NaN");
}

TEST(FormatTest, DoublesRoundTrip) {
  // The printed digits read back to the same double.
  const double values[] = {3.141592653589793, 2.718281828459045e-200, 6.02214076e23,          0.007,
                           123.456e-3,        1.7976931348623157e308, 2.2250738585072014e-308};
  for (double v : values) {
    std::string s = toString(v);
    for (char& c : s) {
      if (c == 'E') c = 'e';
    }
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), v) << toString(v);
  }
}

TEST(FormatTest, TuplesAndPairsLikeFlinkTuples) {
  EXPECT_EQ(toString(std::make_pair(1, std::string("a"))), "(1,a)");
  EXPECT_EQ(toString(std::make_tuple(1, 2.5, std::string("x"), true)), "(1,2.5,x,true)");
  EXPECT_EQ(toString(std::make_tuple(std::make_pair(1, 2), 3)), "((1,2),3)");
  EXPECT_EQ(toString(std::tuple<>()), "()");
  EXPECT_EQ(toString(std::make_tuple(std::string("word"), int64_t{3})), "(word,3)");
}

TEST(FormatTest, ContainersLikeJavaCollections) {
  EXPECT_EQ(toString(std::vector<int>{1, 2, 3}), "[1, 2, 3]");
  EXPECT_EQ(toString(std::vector<int>{}), "[]");
  EXPECT_EQ(toString(std::vector<std::string>{"a", "b"}), "[a, b]");
  EXPECT_EQ(toString(std::array<double, 2>{1.0, 0.5}), "[1.0, 0.5]");
  EXPECT_EQ(toString(std::set<int>{3, 1, 2}), "[1, 2, 3]");
  EXPECT_EQ(toString(std::vector<bool>{true, false}), "[true, false]");
  EXPECT_EQ(toString(std::vector<std::vector<int>>{{1}, {2, 3}}), "[[1], [2, 3]]");
  EXPECT_EQ(toString(std::map<std::string, int>{{"b", 2}, {"a", 1}}), "{a=1, b=2}");
  EXPECT_EQ(toString(std::map<int, int>{}), "{}");
  EXPECT_EQ(toString(std::unordered_map<int, std::string>{{7, "x"}}), "{7=x}");
  EXPECT_EQ(toString(std::vector<std::pair<int, int>>{{1, 2}}), "[(1,2)]");
}

TEST(FormatTest, Optional) {
  EXPECT_EQ(toString(std::optional<int>(5)), "Optional[5]");
  EXPECT_EQ(toString(std::optional<int>()), "Optional.empty");
  EXPECT_EQ(toString(std::optional<std::pair<int, int>>(std::pair{1, 2})), "Optional[(1,2)]");
}

TEST(FormatTest, StructsMembersStreamsEnums) {
  EXPECT_EQ(toString(Order{"o-1", 1250, {1, 2}}), "Order{id=o-1, cents=1250, items=[1, 2]}");
  EXPECT_EQ(toString(Point{3, -4}), "Point{x=3, y=-4}");
  EXPECT_EQ(toString(std::vector<Point>{{1, 2}}), "[Point{x=1, y=2}]");
  EXPECT_EQ(toString(Named{"n"}), "Named<n>");
  EXPECT_EQ(toString(Streamed{9}), "S#9");
  EXPECT_EQ(toString(std::make_pair(Streamed{1}, Named{"z"})), "(S#1,Named<z>)");
  EXPECT_EQ(toString(Color::kBlue), "7");
}

TEST(FormatTest, AppendToAppends) {
  std::string out = "prefix:";
  appendTo(out, 12);
  appendTo(out, ',');
  appendTo(out, 0.25);
  EXPECT_EQ(out, "prefix:12,0.25");
}

}  // namespace
}  // namespace format_test
