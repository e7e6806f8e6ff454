#include "checkpoint/checkpoint_storage.h"

#include <cctype>
#include <filesystem>

#include <fmt/format.h>

#include "core/checksum.h"
#include "core/random_id.h"

namespace sluice::checkpoint {
namespace {

namespace fs = std::filesystem;

// Copies a file, returning the size and checksum of the copy.
Result<NativeKeyedSnapshot::FileDigest> copyFile(const fs::path& from, const fs::path& to) {
  Result<FileDigest> d = copyFileWithDigest(from.string(), to.string());
  if (!d.isOk()) return d.status();
  return NativeKeyedSnapshot::FileDigest{d.value().sizeBytes, d.value().checksum};
}

// A fresh name per upload: a copy belongs to the checkpoint that made it
// until that checkpoint completes, so an aborted one can delete its copies
// without touching another's.
std::string freshSharedName(const std::string& uniqueId) {
  std::string id;
  for (char c : uniqueId) {
    if (std::isalnum(static_cast<unsigned char>(c))) id += c;
  }
  return fmt::format("{}-{}.sst", id, randomHexId().substr(0, 16));
}

Status storeFiles(const NativeKeyedSnapshot& local, const std::string& privateDirectory,
                  const std::string& sharedDirectory, const StoredSstFiles& stored,
                  NativeKeyedSnapshot& result, std::vector<std::string>& uploaded) {
  SLUICE_RETURN_IF_ERROR(createDirectories(sharedDirectory));
  // Not its parents: when the checkpoint was aborted meanwhile, its
  // directory is gone and must stay so.
  std::error_code ec;
  fs::create_directory(privateDirectory, ec);
  if (ec) {
    return Status::ioError(
        fmt::format("cannot create directory '{}': {}", privateDirectory, ec.message()));
  }
  for (const auto& f : local.sstFiles) {
    NativeKeyedSnapshot::SstFile out = f;
    auto it = stored.find(f.uniqueId);
    if (it != stored.end()) {
      out.location = it->second.location;
      out.sizeBytes = it->second.sizeBytes;
      out.checksum = it->second.checksum;
    } else {
      out.location = (fs::path(sharedDirectory) / freshSharedName(f.uniqueId)).string();
      Result<NativeKeyedSnapshot::FileDigest> copied =
          copyFile(fs::path(local.directory) / f.fileName, out.location);
      if (!copied.isOk()) return copied.status();
      uploaded.push_back(out.location);
      out.sizeBytes = copied.value().sizeBytes;
      out.checksum = copied.value().checksum;
    }
    result.sstFiles.push_back(std::move(out));
  }
  for (const auto& f : local.privateFiles) {
    Result<NativeKeyedSnapshot::FileDigest> copied =
        copyFile(fs::path(local.directory) / f, fs::path(privateDirectory) / f);
    if (!copied.isOk()) return copied.status();
    result.privateFileDigests.push_back(copied.value());
  }
  result.hasChecksums = true;
  return Status::ok();
}

}  // namespace

std::string stripFileScheme(std::string path) {
  if (path.rfind("file://", 0) == 0) path = path.substr(7);
  return path;
}

CheckpointStorage::CheckpointStorage(const std::string& jobId, std::string checkpointsBase)
    : jobId_(jobId) {
  checkpointsBase = stripFileScheme(std::move(checkpointsBase));
  if (!checkpointsBase.empty()) {
    // Normal form, so that the shared files of this job are recognised as
    // such in restored checkpoints (their paths are normalised).
    jobDirectory_ = (fs::path(checkpointsBase) / jobId).lexically_normal().string();
  }
}

std::string CheckpointStorage::sharedDirectory() const {
  return jobDirectory_.empty() ? std::string() : jobDirectory_ + "/shared";
}

Result<std::string> CheckpointStorage::initializeLocation(int64_t id, bool savepoint,
                                                          const std::string& savepointBase) const {
  std::string directory;
  if (savepoint) {
    directory = fmt::format("{}/savepoint-{}-{:x}", stripFileScheme(savepointBase),
                            jobId_.substr(0, 6), id);
  } else if (!jobDirectory_.empty()) {
    directory = fmt::format("{}/chk-{}", jobDirectory_, id);
  } else {
    return std::string();
  }
  SLUICE_RETURN_IF_ERROR(createDirectories(directory));
  return directory;
}

Status createDirectories(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) {
    return Status::ioError(fmt::format("cannot create directory '{}': {}", path, ec.message()));
  }
  return Status::ok();
}

void discardDirectory(const std::string& directory) {
  std::error_code ec;
  fs::remove_all(directory, ec);
}

Result<KeyedStateHandleRef> storeNativeSnapshot(const NativeKeyedSnapshot& local,
                                                const std::string& privateDirectory,
                                                const std::string& sharedDirectory,
                                                const StoredSstFiles& stored,
                                                std::vector<std::string>& uploaded) {
  auto result = std::make_shared<NativeKeyedSnapshot>();
  result->directory = privateDirectory;
  result->startKeyGroup = local.startKeyGroup;
  result->endKeyGroup = local.endKeyGroup;
  result->privateFiles = local.privateFiles;
  const size_t uploadedBefore = uploaded.size();
  Status st = storeFiles(local, privateDirectory, sharedDirectory, stored, *result, uploaded);
  if (!st.isOk()) {
    std::error_code ec;
    for (size_t i = uploadedBefore; i < uploaded.size(); ++i) fs::remove(uploaded[i], ec);
    uploaded.resize(uploadedBefore);
    fs::remove_all(privateDirectory, ec);
    return st;
  }
  KeyedStateHandleRef ref;
  ref.path = privateDirectory;
  ref.native = std::move(result);
  return ref;
}

}  // namespace sluice::checkpoint
