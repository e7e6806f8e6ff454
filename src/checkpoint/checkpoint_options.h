// What a checkpoint barrier carries besides its id, and which task a
// checkpoint message is about.
//
// A barrier travels in-band on every channel (ARCHITECTURE.md, Stream
// elements): [tag kBarrier][i64 id][i64 timestamp][u8 type][u8 flags]
// [string targetDirectory]. encodeBarrier/decodeBarrier are the only code
// that knows that layout.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include <sluice/core/serializer.h>
#include <sluice/core/stream_element.h>

namespace sluice::checkpoint {

// What a barrier asks of the tasks besides a snapshot.
struct CheckpointOptions {
  CheckpointType type = CheckpointType::kCheckpoint;
  // stop-with-savepoint: sources stop after the barrier; with `drain` they
  // first emit the maximum watermark, so every event-time window fires.
  bool terminate = false;
  bool drain = false;
  // Where tasks write the checkpoint's state files (Flink's
  // CheckpointStorageLocationReference); empty to keep state in memory.
  std::string targetDirectory;
};

// One subtask of one job vertex (Flink's ExecutionVertexID).
struct TaskId {
  int vertex = 0;
  int subtask = 0;
  auto operator<=>(const TaskId&) const = default;
};

// The serialized barrier element, tag first.
std::vector<uint8_t> encodeBarrier(const CheckpointBarrier& barrier,
                                   const CheckpointOptions& options);
// Reads the fields after the tag. Throws SerializationError when truncated.
void decodeBarrier(DataInputView& in, CheckpointBarrier& barrier, CheckpointOptions& options);

}  // namespace sluice::checkpoint
