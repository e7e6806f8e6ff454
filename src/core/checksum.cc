#include "core/checksum.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace sluice {
namespace {

constexpr size_t kChunk = 256 * 1024;

// Closes an fd on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

ssize_t readSome(int fd, uint8_t* into, size_t n) {
  for (;;) {
    const ssize_t r = ::read(fd, into, n);
    if (r >= 0 || errno != EINTR) return r;
  }
}

Status writeFully(int fd, const uint8_t* data, size_t n, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(fd, data + done, n - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::ioError(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
    }
    done += static_cast<size_t>(w);
  }
  return Status::ok();
}

// Feeds every byte of `in` to `sink(data, n)`, which returns a Status.
template <class Sink>
Result<FileDigest> streamFile(const std::string& path, Sink&& sink) {
  Fd in;
  in.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in.fd < 0) {
    return Status::ioError(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  }
  Checksum64 sum;
  FileDigest digest;
  std::vector<uint8_t> buffer(kChunk);
  for (;;) {
    const ssize_t r = readSome(in.fd, buffer.data(), buffer.size());
    if (r < 0) {
      return Status::ioError(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
    }
    if (r == 0) break;
    sum.update(buffer.data(), static_cast<size_t>(r));
    digest.sizeBytes += static_cast<uint64_t>(r);
    SLUICE_RETURN_IF_ERROR(sink(buffer.data(), static_cast<size_t>(r)));
  }
  digest.checksum = sum.digest();
  return digest;
}

}  // namespace

uint64_t checksum64(const void* data, size_t size) { return XXH3_64bits(data, size); }

std::string checksumText(uint64_t checksum) { return fmt::format("0x{:016x}", checksum); }

struct Checksum64::State {
  XXH3_state_t* s = XXH3_createState();
  ~State() { XXH3_freeState(s); }
};

Checksum64::Checksum64() : state_(std::make_unique<State>()) {
  if (state_->s == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(state_->s);
}
Checksum64::~Checksum64() = default;

void Checksum64::update(const void* data, size_t size) {
  XXH3_64bits_update(state_->s, data, size);
}
uint64_t Checksum64::digest() const { return XXH3_64bits_digest(state_->s); }
void Checksum64::reset() { XXH3_64bits_reset(state_->s); }

Result<FileDigest> digestFile(const std::string& path) {
  return streamFile(path, [](const uint8_t*, size_t) { return Status::ok(); });
}

Result<FileDigest> copyFileWithDigest(const std::string& from, const std::string& to) {
  Fd out;
  out.fd = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (out.fd < 0) {
    return Status::ioError(fmt::format("cannot create '{}': {}", to, std::strerror(errno)));
  }
  Result<FileDigest> digest = streamFile(
      from, [&](const uint8_t* data, size_t n) { return writeFully(out.fd, data, n, to); });
  if (digest.isOk() && ::close(std::exchange(out.fd, -1)) != 0) {
    digest = Status::ioError(fmt::format("cannot write '{}': {}", to, std::strerror(errno)));
  }
  if (!digest.isOk()) {
    ::unlink(to.c_str());
    return Status::ioError(
        fmt::format("cannot copy '{}' to '{}': {}", from, to, digest.status().message()));
  }
  return digest;
}

Status verifyFileDigest(const std::string& path, const FileDigest& expected,
                        std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      return Status::corruption(fmt::format("the {} '{}' is missing", what, path));
    }
    return Status::ioError(
        fmt::format("the {} '{}' cannot be read: {}", what, path, std::strerror(err)));
  }
  if (static_cast<uint64_t>(st.st_size) != expected.sizeBytes) {
    return Status::corruption(fmt::format("the {} '{}' has {} bytes, the checkpoint recorded {}",
                                          what, path, st.st_size, expected.sizeBytes));
  }
  Result<FileDigest> actual = digestFile(path);
  if (!actual.isOk()) {
    return Status::ioError(
        fmt::format("the {} cannot be verified: {}", what, actual.status().message()));
  }
  if (actual.value().checksum != expected.checksum) {
    return Status::corruption(
        fmt::format("the {} '{}' is corrupt: its checksum is {}, the checkpoint recorded {}", what,
                    path, checksumText(actual.value().checksum), checksumText(expected.checksum)));
  }
  return Status::ok();
}

}  // namespace sluice
