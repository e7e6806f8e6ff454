// Checking a checkpoint before anything restores from it.
//
// A restore reads `_metadata` (checked against its checksum when it loads)
// and then the files it refers to. verifyCheckpoint reads every one of
// those now, before a task is deployed: each canonical keyed snapshot block
// by block against the checksums in its footer, each stored file of a
// native (incremental) snapshot against the size and checksum `_metadata`
// recorded. So a damaged checkpoint fails a submission naming the file,
// and an automatic recovery can fall back to an older one, instead of a
// task finding the damage after deployment (or restoring wrong state).
//
// Reads the whole checkpoint: its cost is one read of the state, on the
// thread that calls it. Thread-safe.
#pragma once

#include <sluice/core/status.h>

#include "checkpoint/completed_checkpoint.h"

namespace sluice::checkpoint {

// OK, or an error naming the checkpoint, the file and what is wrong with
// it (for a checksum: the block and both sums): kCorruption when a file is
// missing or its bytes are wrong, kIoError when a file cannot be read now
// (permissions, EIO, too many open files), which may pass.
Status verifyCheckpoint(const CompletedCheckpoint& checkpoint);

}  // namespace sluice::checkpoint
