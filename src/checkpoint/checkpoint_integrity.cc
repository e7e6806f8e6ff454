#include "checkpoint/checkpoint_integrity.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include <sluice/state/snapshot.h>

#include "core/checksum.h"
#include "core/text.h"

namespace sluice::checkpoint {
namespace {

namespace fs = std::filesystem;

// A file that is not there: missing (kCorruption, as damaged) or not
// readable now (kIoError, which may pass).
Status statError(const std::string& what, const std::string& path, int err) {
  const std::string message =
      fmt::format("the {} '{}' cannot be read: {}", what, path, std::strerror(err));
  return err == ENOENT ? Status::corruption(message) : Status::ioError(message);
}

Status verifyNative(const NativeKeyedSnapshot& n) {
  for (const auto& f : n.sstFiles) {
    if (n.hasChecksums) {
      SLUICE_RETURN_IF_ERROR(
          verifyFileDigest(f.location, FileDigest{f.sizeBytes, f.checksum}, "SST file"));
      continue;
    }
    // Written before checksums: presence and size.
    struct stat st {};
    if (::stat(f.location.c_str(), &st) != 0) return statError("SST file", f.location, errno);
    if (static_cast<uint64_t>(st.st_size) != f.sizeBytes) {
      return Status::corruption(
          fmt::format("the SST file '{}' has {} bytes, the checkpoint "
                      "recorded {}",
                      f.location, st.st_size, f.sizeBytes));
    }
  }
  for (size_t i = 0; i < n.privateFiles.size(); ++i) {
    const std::string path = (fs::path(n.directory) / n.privateFiles[i]).string();
    if (n.hasChecksums && i < n.privateFileDigests.size()) {
      const auto& d = n.privateFileDigests[i];
      SLUICE_RETURN_IF_ERROR(verifyFileDigest(path, FileDigest{d.sizeBytes, d.checksum},
                                              "private file of an incremental snapshot"));
      continue;
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      return statError("private file of an incremental snapshot", path, errno);
    }
  }
  return Status::ok();
}

Status verifyKeyed(const KeyedStateHandleRef& keyed) {
  if (keyed.native) return verifyNative(*keyed.native);
  if (!keyed.path.empty()) {
    struct stat st {};
    if (::stat(keyed.path.c_str(), &st) != 0) {
      return statError("keyed-state snapshot", keyed.path, errno);
    }
  }
  try {
    if (!keyed.path.empty()) {
      CanonicalSnapshotReader::fromFile(keyed.path).verify();
    } else if (keyed.bytes) {
      CanonicalSnapshotReader::fromBytes(keyed.bytes, "keyed state kept in memory").verify();
    }
  } catch (const std::exception& e) {
    // The reader says "cannot open/read" for an OS error (which may pass),
    // "corrupt" for what it found in the bytes.
    const std::string_view what = e.what();
    if (what.starts_with("cannot open") || what.starts_with("cannot read")) {
      return Status::ioError(e.what());
    }
    return Status::corruption(e.what());
  }
  return Status::ok();
}

}  // namespace

Status verifyCheckpoint(const CompletedCheckpoint& cp) {
  for (const auto& op : cp.operators) {
    for (size_t s = 0; s < op.subtasks.size(); ++s) {
      Status st = verifyKeyed(op.subtasks[s].keyed);
      if (st.isOk()) continue;
      const std::string message = fmt::format(
          "{} cannot be restored: the keyed state of operator '{}' (uid '{}'), subtask {}: {}",
          cp.describe(), escapeForMessage(op.name), escapeForMessage(op.uid), s, st.message());
      return st.code() == StatusCode::kCorruption ? Status::corruption(message)
                                                  : Status::ioError(message);
    }
  }
  return Status::ok();
}

}  // namespace sluice::checkpoint
