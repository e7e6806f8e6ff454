// The `_metadata` file: a completed checkpoint as it is stored (Flink's
// Checkpoints.storeCheckpointMetadata / loadCheckpointMetadata).
//
//   <dir>/<job-id>/chk-<n>/_metadata          this file, written last (temp + rename)
//   <dir>/<job-id>/chk-<n>/<node>-<subtask>.keyed   canonical keyed snapshots
//
// A savepoint has the same layout in <savepoint-dir>/savepoint-<job-id
// prefix>-<n>/. Paths inside _metadata are relative to its directory, so a
// checkpoint or savepoint can be moved or copied as a whole.
//
// Layout: "SLUICECP" u32 version=3, i64 id, u8 type, i64 timestamp, string
// jobId, u32 numOperators, per operator: string uid, string name, i32
// parallelism, i32 maxParallelism, bool hasCoordinatorState, string
// coordinatorState, u32 numSubtasks, per subtask: string operatorState,
// string timers, u8 keyedKind (0 none, 1 file, 2 inline bytes, 3 native),
// then for 0-2 string keyed (relative file name or bytes), for 3 string
// privateDir, i32 startKeyGroup, i32 endKeyGroup, u32 n x (string fileName,
// string uniqueId, u64 size, string location relative to the checkpoint,
// u64 checksum), u32 m x (string privateFile, u64 size, u64 checksum); then
// "SLUICEND" and the u64 XXH3-64 checksum of every byte before it. Versions
// 1 (no kind 3) and 2 (no checksums) load.
//
// Every count is checked against the bytes left before anything is
// allocated for it, so a damaged file costs at most a small multiple of its
// size in memory; version 3 is checked against its checksum before it is
// parsed at all.
//
// Errors are Status values naming the file and the cause (errno text for
// I/O); nothing here throws.
#pragma once

#include <string>

#include <sluice/core/status.h>

#include "checkpoint/completed_checkpoint.h"

namespace sluice::checkpoint {

inline constexpr const char* kMetadataFileName = "_metadata";

// Writes `checkpoint.directory`/_metadata atomically (temporary file, fsync,
// rename). Keyed snapshot paths must lie in that directory.
Status writeCheckpointMetadata(const CompletedCheckpoint& checkpoint);

// Reads a checkpoint or savepoint: its directory or its _metadata file.
Result<CompletedCheckpoint> loadCheckpoint(const std::string& path);

}  // namespace sluice::checkpoint
