// The elements that flow through a Sluice job.
//
// A stream carries records (a value with an optional event timestamp) and,
// in band and in order with them, control elements: watermarks, watermark
// status changes, checkpoint barriers and the end of a partition. Operators see
// records through `processElement` and watermarks through `processWatermark`;
// barriers and end-of-partition are handled by the task, never by user code.
//
// Timestamps are int64 milliseconds since the epoch, as in Flink.
#pragma once

#include <cstdint>
#include <limits>
#include <utility>

namespace sluice {

inline constexpr int64_t kMinTimestamp = std::numeric_limits<int64_t>::min();
inline constexpr int64_t kMaxTimestamp = std::numeric_limits<int64_t>::max();

namespace internal {
// Timestamp arithmetic that saturates at the int64 limits instead of
// overflowing (window ends and cleanup times near the limits).
inline int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? kMaxTimestamp : kMinTimestamp;
  return r;
}
inline int64_t saturatingSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return b > 0 ? kMinTimestamp : kMaxTimestamp;
  return r;
}
}  // namespace internal

// A value and its event timestamp. Operators receive records by const
// reference; the producer owns the record and may reuse it for the next value.
template <class T>
struct StreamRecord {
  T value{};
  int64_t timestamp = kMinTimestamp;
  bool hasTimestamp = false;

  StreamRecord() = default;
  explicit StreamRecord(T v) : value(std::move(v)) {}
  StreamRecord(T v, int64_t ts) : value(std::move(v)), timestamp(ts), hasTimestamp(true) {}

  void setTimestamp(int64_t ts) {
    timestamp = ts;
    hasTimestamp = true;
  }
  void eraseTimestamp() {
    timestamp = kMinTimestamp;
    hasTimestamp = false;
  }
};

// "No record with a timestamp <= `timestamp` will follow."
struct Watermark {
  int64_t timestamp = kMinTimestamp;
  static constexpr Watermark max() { return Watermark{kMaxTimestamp}; }
  friend bool operator==(const Watermark&, const Watermark&) = default;
};

// Which clock a timer follows (Flink's spelling, which users search for).
enum class TimeDomain : uint8_t { EVENT_TIME = 0, PROCESSING_TIME = 1 };

// An input that is idle is excluded from the minimum an input gate forwards.
enum class WatermarkStatus : uint8_t { kActive = 0, kIdle = 1 };

enum class CheckpointType : uint8_t { kCheckpoint = 0, kSavepoint = 1 };

// execution.checkpointing.mode: exactly-once aligns barriers, at-least-once
// only counts them (see docs/checkpoints.md).
enum class CheckpointingMode : uint8_t { kExactlyOnce, kAtLeastOnce };

struct CheckpointBarrier {
  int64_t id = 0;
  int64_t timestamp = 0;
  CheckpointType type = CheckpointType::kCheckpoint;
};

// What a source or input reports after a call that may emit elements.
enum class InputStatus : uint8_t {
  kMoreAvailable,     // call again right away
  kNothingAvailable,  // nothing now; the reader signals availability later
  kEndOfInput,        // this input has ended for good
};

}  // namespace sluice
