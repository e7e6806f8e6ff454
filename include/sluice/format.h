// Text form of record values, as Flink (Java) prints them.
//
// print(), writeAsText() and writeAsCsv() turn each value into text with
// toString(value) / appendTo(out, value), so that a job's output reads the
// same as the Flink job it replaces:
//
//   integers                 plain decimal: 42, -7 (int8_t/uint8_t too: they
//                            are numbers, like Java's byte)
//   bool                     true / false
//   double, float            Java's Double.toString / Float.toString: the
//                            shortest digits that read back to the same value,
//                            "1.0", "0.5", "100.0", "1.0E-5", "1.0E20" (decimal
//                            for 1e-3 <= |x| < 1e7, else d.dddEn); NaN,
//                            Infinity, -Infinity, -0.0
//   char                     the character itself
//   std::string, string_view, const char*
//                            as is, unquoted
//   std::pair, std::tuple    Flink's Tuple: (a,b,c), no spaces
//   vector, array, set, list and other ranges
//                            Java's List: [a, b, c]
//   map, unordered_map       Java's Map: {k=v, k2=v2}
//   std::optional            Optional[x] / Optional.empty
//   a type with a member `std::string toString() const`
//                            that method (like overriding Java's toString);
//                            it wins over every form below
//   enums                    the underlying integer (C++ enums have no names)
//   a type with `std::ostream& operator<<(std::ostream&, const T&)`
//                            that operator (checked after the standard types
//                            above, before SLUICE_STRUCT)
//   a SLUICE_STRUCT type     Name{field1=..., field2=...}
// Any other type fails to compile with a message listing these forms.
//
// Threads: pure functions; any thread. appendTo appends to a caller-owned
// string so a sink can reuse one buffer for every record.
#pragma once

#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <optional>
#include <ostream>
#include <ranges>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include <sluice/core/serializer.h>

namespace sluice {

template <class T>
void appendTo(std::string& out, const T& value);

template <class T>
std::string toString(const T& value) {
  std::string out;
  appendTo(out, value);
  return out;
}

namespace internal {

template <class>
inline constexpr bool kFormatAlwaysFalse = false;

template <class T>
struct IsPair : std::false_type {};
template <class A, class B>
struct IsPair<std::pair<A, B>> : std::true_type {};

template <class T>
struct IsTuple : std::false_type {};
template <class... Ts>
struct IsTuple<std::tuple<Ts...>> : std::true_type {};

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

template <class T>
concept StringLike = std::is_convertible_v<const T&, std::string_view>;

template <class T>
concept MapLike = std::ranges::range<const T> && requires {
  typename T::key_type;
  typename T::mapped_type;
};

template <class T>
concept HasToStringMember = requires(const T& v) {
  { v.toString() } -> std::convertible_to<std::string>;
};

template <class T>
concept HasStreamOperator = requires(std::ostream& os, const T& v) {
  os << v;
};

// Java's Double.toString / Float.toString from the shortest round-trip digits
// that std::to_chars finds (Java 19+ prints the shortest digits too).
template <class F>
void appendJavaFloatingPoint(std::string& out, F v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v < 0 ? "-Infinity" : "Infinity";
    return;
  }
  if (v == 0) {
    out += std::signbit(v) ? "-0.0" : "0.0";
    return;
  }
  // Scientific form "[-]d[.ddd]e(+|-)dd" gives the digits and the exponent
  // without any rounding decisions of our own.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  if (std::string_view(buf, static_cast<size_t>(res.ptr - buf)).find('.') ==
      std::string_view::npos) {
    // Java never prints fewer than two significant digits ("d.dE..."): when
    // one is enough it picks the closest two-digit decimal, which differs
    // from "d.0" for some subnormals (Double.MIN_VALUE prints "4.9E-324", not
    // "5.0E-324"). Two correctly rounded significant digits are exactly that.
    res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific, 1);
  }
  std::string_view s(buf, static_cast<size_t>(res.ptr - buf));
  if (s.front() == '-') {
    out += '-';
    s.remove_prefix(1);
  }
  const size_t e = s.find('e');
  const std::string_view mantissa = s.substr(0, e);
  std::string_view expText = s.substr(e + 1);
  const bool negExp = expText.front() == '-';
  if (expText.front() == '-' || expText.front() == '+') expText.remove_prefix(1);
  int exp = 0;
  for (char c : expText) exp = exp * 10 + (c - '0');
  if (negExp) exp = -exp;
  // All significant digits, without the point.
  char digits[64];
  size_t n = 0;
  for (char c : mantissa) {
    if (c != '.') digits[n++] = c;
  }
  while (n > 1 && digits[n - 1] == '0') --n;  // "1.0e+20" from the two-digit path
  const std::string_view d(digits, n);

  if (exp >= -3 && exp < 7) {
    if (exp >= 0) {
      const size_t intDigits = static_cast<size_t>(exp) + 1;
      for (size_t i = 0; i < intDigits; ++i) out += i < d.size() ? d[i] : '0';
      out += '.';
      if (d.size() > intDigits) {
        out += d.substr(intDigits);
      } else {
        out += '0';
      }
    } else {
      out += "0.";
      out.append(static_cast<size_t>(-exp - 1), '0');
      out += d;
    }
  } else {
    out += d[0];
    out += '.';
    if (d.size() > 1) {
      out += d.substr(1);
    } else {
      out += '0';
    }
    out += 'E';
    char eb[16];
    const auto er = std::to_chars(eb, eb + sizeof(eb), exp);
    out.append(eb, er.ptr);
  }
}

template <class I>
void appendInteger(std::string& out, I v) {
  char buf[48];
  std::to_chars_result res;
  if constexpr (sizeof(I) <= sizeof(long long)) {
    // Widening sidesteps to_chars' missing overloads for char8_t/char16_t/...
    if constexpr (std::is_signed_v<I>) {
      res = std::to_chars(buf, buf + sizeof(buf), static_cast<long long>(v));
    } else {
      res = std::to_chars(buf, buf + sizeof(buf), static_cast<unsigned long long>(v));
    }
  } else {
    res = std::to_chars(buf, buf + sizeof(buf), v);
  }
  out.append(buf, res.ptr);
}

}  // namespace internal

template <class T>
void appendTo(std::string& out, const T& value) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<U, bool>) {
    out += value ? "true" : "false";
  } else if constexpr (std::is_same_v<U, char>) {
    out += value;
  } else if constexpr (std::is_integral_v<U>) {
    internal::appendInteger(out, value);
  } else if constexpr (std::is_floating_point_v<U>) {
    internal::appendJavaFloatingPoint(out, value);
  } else if constexpr (internal::HasToStringMember<U>) {
    out += value.toString();
  } else if constexpr (std::is_enum_v<U> && !internal::HasStreamOperator<U>) {
    internal::appendInteger(out, static_cast<std::underlying_type_t<U>>(value));
  } else if constexpr (internal::StringLike<U>) {
    out += std::string_view(value);
  } else if constexpr (internal::IsOptional<U>::value) {
    if (value) {
      out += "Optional[";
      appendTo(out, *value);
      out += ']';
    } else {
      out += "Optional.empty";
    }
  } else if constexpr (internal::IsPair<U>::value) {
    out += '(';
    appendTo(out, value.first);
    out += ',';
    appendTo(out, value.second);
    out += ')';
  } else if constexpr (internal::IsTuple<U>::value) {
    out += '(';
    std::apply(
        [&](const auto&... fields) {
          bool first = true;
          ((out += (first ? "" : ","), first = false, appendTo(out, fields)), ...);
        },
        value);
    out += ')';
  } else if constexpr (internal::MapLike<U>) {
    out += '{';
    bool first = true;
    for (const auto& [k, v] : value) {
      if (!first) out += ", ";
      first = false;
      appendTo(out, k);
      out += '=';
      appendTo(out, v);
    }
    out += '}';
  } else if constexpr (std::ranges::range<const U>) {
    out += '[';
    bool first = true;
    for (const auto& e : value) {
      if (!first) out += ", ";
      first = false;
      appendTo(out, e);
    }
    out += ']';
  } else if constexpr (internal::HasStreamOperator<U>) {
    std::ostringstream os;
    os << value;
    out += os.str();
  } else if constexpr (SluiceStruct<U>) {
    out += StructTraits<U>::kName;
    out += '{';
    bool first = true;
    forEachField(value, [&](std::string_view name, const auto& field) {
      if (!first) out += ", ";
      first = false;
      out += name;
      out += '=';
      appendTo(out, field);
    });
    out += '}';
  } else {
    static_assert(internal::kFormatAlwaysFalse<U>,
                  "sluice::toString: no text form for this type. Accepted: integers, bool, "
                  "char, float/double, std::string / string_view / const char*, enums, "
                  "std::pair, std::tuple, std::optional, ranges (vector, array, set, ...), "
                  "maps, SLUICE_STRUCT types, types with a member `std::string toString() "
                  "const`, and types with `std::ostream& operator<<(std::ostream&, const T&)`");
  }
}

}  // namespace sluice
