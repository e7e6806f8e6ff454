// Checksums of what a checkpoint writes: XXH3-64 (Debian's libxxhash) over
// `_metadata`, over each block of a keyed-state snapshot and over every file
// an incremental snapshot stores. Not cryptographic: it finds flipped bits,
// torn writes and truncation, not an attacker.
//
// Threads: the functions are thread-safe; a Checksum64 is used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <sluice/core/status.h>

namespace sluice {

// The checksum of `size` bytes.
uint64_t checksum64(const void* data, size_t size);
inline uint64_t checksum64(std::string_view bytes) {
  return checksum64(bytes.data(), bytes.size());
}

// "0x" and 16 hex digits, as error messages print a checksum.
std::string checksumText(uint64_t checksum);

// The checksum of a stream of bytes fed in pieces; equals checksum64 over
// their concatenation.
class Checksum64 {
 public:
  Checksum64();
  ~Checksum64();
  Checksum64(const Checksum64&) = delete;
  Checksum64& operator=(const Checksum64&) = delete;

  void update(const void* data, size_t size);
  uint64_t digest() const;
  // Starts over, as if just constructed.
  void reset();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Size and checksum of a whole file.
struct FileDigest {
  uint64_t sizeBytes = 0;
  uint64_t checksum = 0;
};

// Reads `path` once. Errors name the path and the OS error.
Result<FileDigest> digestFile(const std::string& path);

// Copies `from` to a new file `to` (which must not exist), returning the
// digest of the bytes written; the copy is not left behind on failure.
// Errors name the path and the OS error.
Result<FileDigest> copyFileWithDigest(const std::string& from, const std::string& to);

// Checks `path` against `expected`: its size first, then its checksum. The
// error (kCorruption when the file is missing or differs, kIoError when it
// cannot be read, which may pass) names the file,
// `what` it is ("SST file of checkpoint 7"), and both values.
Status verifyFileDigest(const std::string& path, const FileDigest& expected, std::string_view what);

}  // namespace sluice
