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

Status verifyNative(const NativeKeyedSnapshot& n) {
  for (const auto& f : n.sstFiles) {
    if (n.hasChecksums) {
      SLUICE_RETURN_IF_ERROR(
          verifyFileDigest(f.location, FileDigest{f.sizeBytes, f.checksum}, "SST file"));
      continue;
    }
    // Written before checksums: presence and size.
    struct stat st {};
    if (::stat(f.location.c_str(), &st) != 0) {
      return Status::ioError(
          fmt::format("the SST file '{}' cannot be read: {}", f.location, std::strerror(errno)));
    }
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
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      return Status::ioError(
          fmt::format("the private file '{}' of an incremental snapshot is missing{}", path,
                      ec ? ": " + ec.message() : std::string()));
    }
  }
  return Status::ok();
}

Status verifyKeyed(const KeyedStateHandleRef& keyed) {
  if (keyed.native) return verifyNative(*keyed.native);
  try {
    if (!keyed.path.empty()) {
      CanonicalSnapshotReader::fromFile(keyed.path).verify();
    } else if (keyed.bytes) {
      CanonicalSnapshotReader::fromBytes(keyed.bytes, "keyed state kept in memory").verify();
    }
  } catch (const std::exception& e) {
    return Status::corruption(e.what());
  }
  return Status::ok();
}

}  // namespace

Status verifyCheckpoint(const CompletedCheckpoint& cp) {
  for (const auto& op : cp.operators) {
    for (size_t s = 0; s < op.subtasks.size(); ++s) {
      Status st = verifyKeyed(op.subtasks[s].keyed);
      if (!st.isOk()) {
        return Status::corruption(fmt::format(
            "{} cannot be restored: the keyed state of "
            "operator '{}' (uid '{}'), subtask {}: {}",
            cp.describe(), escapeForMessage(op.name), escapeForMessage(op.uid), s, st.message()));
      }
    }
  }
  return Status::ok();
}

}  // namespace sluice::checkpoint
