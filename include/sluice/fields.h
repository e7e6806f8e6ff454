// Field positions of composite record types, for Flink's positional and named
// field arguments: keyBy<0>(), sum(1), max("count"), minBy(&Trade::price).
//
// A type has fields when it is a std::pair, a std::tuple or a SLUICE_STRUCT;
// a plain arithmetic type has exactly one field, itself (position 0), as a
// Flink basic type does. Positions are checked when the job is built: a bad
// position or a field of the wrong type throws SluiceException naming the
// operator, the type and the position, before anything runs.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include <sluice/core/serializer.h>
#include <sluice/core/status.h>

namespace sluice::internal {

template <class T>
struct IsTupleLike : std::false_type {};
template <class A, class B>
struct IsTupleLike<std::pair<A, B>> : std::true_type {};
template <class... Ts>
struct IsTupleLike<std::tuple<Ts...>> : std::true_type {};

template <class T, class Enable = void>
struct Fields {
  static constexpr bool kHasFields = false;
  static constexpr size_t kCount = 0;
};

template <class T>
struct Fields<T, std::enable_if_t<IsTupleLike<T>::value>> {
  static constexpr bool kHasFields = true;
  static constexpr size_t kCount = std::tuple_size_v<T>;
  template <size_t I>
  using Type = std::tuple_element_t<I, T>;
  template <size_t I, class Obj>
  static constexpr auto& get(Obj& obj) {
    return std::get<I>(obj);
  }
  static std::string name(size_t i) { return "f" + std::to_string(i); }
};

template <class T>
struct Fields<T, std::enable_if_t<SluiceStruct<T>>> {
  static constexpr bool kHasFields = true;
  static constexpr size_t kCount = StructTraits<T>::kFieldCount;
  template <size_t I>
  using Type = typename StructTraits<T>::template FieldType<I>;
  template <size_t I, class Obj>
  static constexpr auto& get(Obj& obj) {
    return StructTraits<T>::template get<I>(obj);
  }
  static std::string name(size_t i) { return std::string(StructTraits<T>::kFieldNames[i]); }
};

template <class T>
struct Fields<T, std::enable_if_t<std::is_arithmetic_v<T>>> {
  static constexpr bool kHasFields = true;
  static constexpr size_t kCount = 1;
  template <size_t I>
  using Type = T;
  template <size_t I, class Obj>
  static constexpr auto& get(Obj& obj) {
    return obj;
  }
  static std::string name(size_t) { return "0"; }
};

enum class AggregationKind { kSum, kMin, kMax, kMinBy, kMaxBy };

inline const char* aggregationName(AggregationKind k) {
  switch (k) {
    case AggregationKind::kSum: return "sum";
    case AggregationKind::kMin: return "min";
    case AggregationKind::kMax: return "max";
    case AggregationKind::kMinBy: return "minBy";
    case AggregationKind::kMaxBy: return "maxBy";
  }
  return "?";
}

// Flink's SumAggregator / ComparableAggregator semantics on one field:
//   sum:   the first element of the key, with the field summed;
//   min/max: the first element of the key, with the field's min/max;
//   minBy/maxBy: the whole element holding the min/max (the first on ties).
template <class V>
bool aggregateField(AggregationKind kind, V& accField, const V& inField) {
  switch (kind) {
    case AggregationKind::kSum:
      if constexpr (std::is_arithmetic_v<V> && !std::is_same_v<V, bool>) {
        accField = static_cast<V>(accField + inField);
      }
      return false;
    case AggregationKind::kMin:
      if (!(accField < inField)) accField = inField;
      return false;
    case AggregationKind::kMax:
      if (!(inField < accField)) accField = inField;
      return false;
    case AggregationKind::kMinBy: return inField < accField;
    case AggregationKind::kMaxBy: return accField < inField;
  }
  return false;
}

template <class V>
constexpr bool kSummable = std::is_arithmetic_v<V> && !std::is_same_v<V, bool>;
template <class V>
constexpr bool kComparable = requires(const V& a, const V& b) {
  { a < b } -> std::convertible_to<bool>;
};

// An in-place reducer (see apply) aggregating the field at a runtime
// position; the position's field is found through a table built at compile
// time, so the per-record cost is one indirect call.
template <class T>
class PositionAggregator {
 public:
  PositionAggregator(AggregationKind kind, int position, const std::string& where) : kind_(kind) {
    static_assert(Fields<T>::kHasFields,
                  "field aggregations need a std::pair, std::tuple, SLUICE_STRUCT or arithmetic "
                  "record type; use reduce() otherwise");
    if (position < 0 || static_cast<size_t>(position) >= Fields<T>::kCount) {
      throw SluiceException(where + ": field position " + std::to_string(position) +
                            " is out of range for type " + TypeSerializer<T>::schema() + " with " +
                            std::to_string(Fields<T>::kCount) + " fields");
    }
    bool ok = false;
    [&]<size_t... I>(std::index_sequence<I...>) {
      ((static_cast<size_t>(position) == I ? (select<I>(ok), 0) : 0), ...);
    }
    (std::make_index_sequence<Fields<T>::kCount>());
    if (!ok) {
      throw SluiceException(where + ": cannot " + aggregationName(kind) + " field " +
                            Fields<T>::name(position) + " of type " + TypeSerializer<T>::schema() +
                            (kind == AggregationKind::kSum ? ": it is not a number"
                                                           : ": it has no ordering (operator<)"));
    }
  }

  // In place: updates `acc`, or returns true when `in` replaces it (minBy/maxBy).
  bool apply(T& acc, const T& in) const { return apply_(kind_, acc, in); }

 private:
  using Apply = bool (*)(AggregationKind, T&, const T&);

  template <size_t I>
  void select(bool& ok) {
    using V = typename Fields<T>::template Type<I>;
    if constexpr (kSummable<V> || kComparable<V>) {
      if (kind_ == AggregationKind::kSum && !kSummable<V>) return;
      if constexpr (kComparable<V>) {
        apply_ = [](AggregationKind k, T& acc, const T& in) {
          return aggregateField<V>(k, Fields<T>::template get<I>(acc),
                                   Fields<T>::template get<I>(in));
        };
        ok = true;
      }
    }
  }

  AggregationKind kind_;
  Apply apply_ = nullptr;
};

// The same through a member pointer: max(&Trade::price).
template <class T, class V, class C = T>
class MemberAggregator {
 public:
  MemberAggregator(AggregationKind kind, V C::*member) : kind_(kind), member_(member) {
    if (kind == AggregationKind::kSum && !kSummable<V>) {
      throw SluiceException("sum(member): the member is not a number");
    }
  }
  bool apply(T& acc, const T& in) const {
    return aggregateField<V>(kind_, acc.*member_, in.*member_);
  }

 private:
  AggregationKind kind_;
  V C::*member_;
};

}  // namespace sluice::internal
