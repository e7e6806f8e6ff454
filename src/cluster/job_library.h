// Job libraries and the blob store.
//
// A job library is the shared library sluice_add_job() builds from a job's
// sources: the job's main, renamed, behind the C entry point
// `sluice_job_entry`, and the fingerprint of the Sluice build it was compiled
// against (`sluice_job_fingerprint`). It links no engine code: the engine's
// symbols come from the `sluice` executable that loads it, so every job and
// the engine share one copy of it.
//
// The BlobStore keeps uploaded libraries by content key (XXH3-64 and size),
// in a directory of the process.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "cluster/plan_mode.h"

namespace sluice::cluster {

// This process's build fingerprint (SLUICE_BUILD_FINGERPRINT).
const char* buildFingerprint();

class JobLibrary {
 public:
  // Loads the library at `path` (once per path and process; later loads
  // return the same library). Throws SluiceException naming the file: not
  // loadable (dlerror), no job entry point, or built against another Sluice
  // build (naming both fingerprints).
  static std::shared_ptr<JobLibrary> load(const std::string& path);
  // The fingerprint a library file was built with, without running it.
  // Throws as load() does when it cannot be read.
  static std::string fingerprintOf(const std::string& path);

  JobMain main() const { return main_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* handle_ = nullptr;  // never closed: operators' code lives in it
  JobMain main_ = nullptr;
};

class BlobStore {
 public:
  // `directory` empty: a new directory under the system's temp directory.
  // Throws SluiceException when it cannot be created.
  explicit BlobStore(std::string directory);
  const std::string& directory() const { return directory_; }
  // Stores `bytes` (atomically: temp file + rename) and returns its key.
  std::string put(const std::string& bytes);
  bool has(const std::string& key) const;
  // The file of a stored blob.
  std::string path(const std::string& key) const;
  // Throws SluiceException when the blob is missing or unreadable.
  std::string read(const std::string& key) const;
  static std::string keyOf(const std::string& bytes);

 private:
  std::string directory_;
  mutable std::mutex mu_;
};

}  // namespace sluice::cluster
