#include "cluster/job_library.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include <sluice/core/build_fingerprint.h>
#include <sluice/core/status.h>

#include "core/checksum.h"
#include "core/random_id.h"

namespace sluice::cluster {
namespace fs = std::filesystem;

const char* buildFingerprint() { return SLUICE_BUILD_FINGERPRINT; }

namespace {

using FingerprintFn = const char* (*)();

void* openLibrary(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw SluiceException(fmt::format("job library '{}' does not exist or is no regular file{}",
                                      path, ec ? ": " + ec.message() : std::string()));
  }
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* err = ::dlerror();
    throw SluiceException(fmt::format(
        "cannot load job library '{}': {} (a job library is built with sluice_add_job() against "
        "this Sluice build)",
        path, err != nullptr ? err : "unknown error"));
  }
  return h;
}

std::string fingerprintOfHandle(void* h, const std::string& path) {
  auto fp = reinterpret_cast<FingerprintFn>(::dlsym(h, "sluice_job_fingerprint"));
  if (fp == nullptr) {
    throw SluiceException(fmt::format(
        "'{}' is no Sluice job library: it has no sluice_job_fingerprint (build it with "
        "sluice_add_job())",
        path));
  }
  return fp();
}

}  // namespace

std::shared_ptr<JobLibrary> JobLibrary::load(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<JobLibrary>> loaded;
  std::lock_guard lock(mu);
  std::string key = fs::absolute(path).lexically_normal().string();
  if (auto it = loaded.find(key); it != loaded.end()) return it->second;
  // dlopen runs the library's static constructors; they only build
  // objects of the job's own. The fingerprint is checked before anything of
  // the library is called.
  void* h = openLibrary(path);
  const std::string theirs = fingerprintOfHandle(h, path);
  if (theirs != buildFingerprint()) {
    throw SluiceException(fmt::format(
        "job library '{}' was built against another Sluice build and is refused: the library's "
        "is [{}], this process's is [{}]; rebuild the job against this Sluice",
        path, theirs, buildFingerprint()));
  }
  auto entry = reinterpret_cast<JobMain>(::dlsym(h, "sluice_job_entry"));
  if (entry == nullptr) {
    throw SluiceException(fmt::format(
        "job library '{}' has no entry point sluice_job_entry (build it with sluice_add_job(); "
        "the job's main must be 'int main(int argc, char** argv)')",
        path));
  }
  auto lib = std::shared_ptr<JobLibrary>(new JobLibrary());
  lib->path_ = path;
  lib->handle_ = h;
  lib->main_ = entry;
  loaded[key] = lib;
  return lib;
}

std::string JobLibrary::fingerprintOf(const std::string& path) {
  void* h = openLibrary(path);
  std::string fp = fingerprintOfHandle(h, path);
  return fp;
}

// ---- BlobStore ------------------------------------------------------------------

BlobStore::BlobStore(std::string directory) : directory_(std::move(directory)) {
  std::error_code ec;
  if (directory_.empty()) {
    directory_ = (fs::temp_directory_path(ec) / ("sluice-blobs-" + randomHexId())).string();
  }
  fs::create_directories(directory_, ec);
  if (ec || !fs::is_directory(directory_)) {
    throw SluiceException(
        fmt::format("cannot create the blob directory '{}' (blob.storage.directory): {}",
                    directory_, ec ? ec.message() : "not a directory"));
  }
}

std::string BlobStore::keyOf(const std::string& bytes) {
  return fmt::format("job-{:016x}-{}", checksum64(bytes.data(), bytes.size()), bytes.size());
}

std::string BlobStore::path(const std::string& key) const { return directory_ + "/" + key + ".so"; }

bool BlobStore::has(const std::string& key) const {
  std::error_code ec;
  return fs::is_regular_file(path(key), ec);
}

std::string BlobStore::put(const std::string& bytes) {
  const std::string key = keyOf(bytes);
  std::lock_guard lock(mu_);
  if (has(key)) return key;
  const std::string target = path(key);
  const std::string temp = target + ".tmp-" + randomHexId();
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw SluiceException(fmt::format("cannot write blob '{}': {}", temp, std::strerror(errno)));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(temp.c_str());
      throw SluiceException(fmt::format("cannot write blob '{}': {}", temp, std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    throw SluiceException(fmt::format("cannot store blob '{}': {}", target, std::strerror(err)));
  }
  return key;
}

std::string BlobStore::read(const std::string& key) const {
  std::ifstream in(path(key), std::ios::binary);
  if (!in) {
    throw SluiceException(fmt::format("blob '{}' is not in the blob store {}: {}", key, directory_,
                                      std::strerror(errno)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace sluice::cluster
