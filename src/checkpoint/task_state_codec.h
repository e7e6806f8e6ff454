// A task's acknowledged state (TaskStateSnapshot) as bytes, for the
// acknowledgement a TaskManager sends the JobManager's coordinator. Paths
// stay absolute (every process reaches state.checkpoints.dir by the same
// path); the JobManager makes them relative when it writes _metadata.
//
// Layout: "SLTS" u32 version=1, u32 n operators x (i32 node, string
// operatorState, string timers, u8 keyedKind (0 none, 1 file, 2 bytes,
// 3 native), then for 1 and 2 string; for 3 string directory, i32 start, i32
// end, bool hasChecksums, u32 x (string name, string uniqueId, u64 size,
// string location, u64 checksum), u32 x (string file), u32 x (u64 size, u64
// checksum)).
#pragma once

#include <string>

#include <sluice/core/status.h>

#include "checkpoint/completed_checkpoint.h"

namespace sluice::checkpoint {

std::string encodeTaskStateSnapshot(const TaskStateSnapshot& snapshot);
// InvalidArgument naming what was wrong for bytes that are no snapshot.
Result<TaskStateSnapshot> decodeTaskStateSnapshot(const std::string& bytes);

}  // namespace sluice::checkpoint
