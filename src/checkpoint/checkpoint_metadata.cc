#include "checkpoint/checkpoint_metadata.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include <sluice/core/key_hash.h>
#include <sluice/core/serializer.h>

#include "core/checksum.h"
#include "core/text.h"

namespace sluice::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[] = "SLUICECP";
constexpr char kEndMagic[] = "SLUICEND";
// Version 2 added native (incremental) keyed snapshots, version 3 the
// checksums (of the file, and of each stored file of a native snapshot);
// versions 1 and 2 still load.
constexpr uint32_t kVersion = 3;
// Version 3 ends with the XXH3-64 of every byte before it.
constexpr size_t kChecksumSize = 8;
// The smallest encodings, bounding counts read from the file.
constexpr size_t kMinOperatorBytes = 1 + 1 + 4 + 4 + 1 + 1 + 4;
constexpr size_t kMinSubtaskBytes = 1 + 1 + 1 + 1;
constexpr size_t kMinSstFileBytes = 1 + 1 + 8 + 1;

enum class KeyedKind : uint8_t { kNone = 0, kFile = 1, kBytes = 2, kNative = 3 };

// The file name of `path` when it lies directly in `directory`.
Result<std::string> relativeTo(const std::string& directory, const std::string& path) {
  fs::path p(path);
  if (p.parent_path() != fs::path(directory)) {
    return Status::invalidArgument(fmt::format(
        "checkpoint file '{}' does not lie in the checkpoint directory '{}'", path, directory));
  }
  return p.filename().string();
}

// A count of entries that each take at least `minBytes` bytes: never more
// than the bytes left can hold, so a corrupt count cannot allocate more
// than the file's size times a small factor.
uint32_t readCount(DataInputView& view, size_t minBytes, const char* what) {
  const size_t at = view.position();
  const uint32_t n = view.readU32();
  if (n > view.remaining() / minBytes) {
    view.failAt(at, fmt::format("a count of {} {} exceeds what the {} bytes left can hold", n, what,
                                view.remaining()));
  }
  return n;
}

// A file name stored in the metadata: a plain name, never a path that could
// lead out of its directory.
void checkFileName(DataInputView& view, const std::string& name, size_t at) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    view.failAt(at, fmt::format("invalid file name '{}'", escapeForMessage(name)));
  }
}

int32_t readParallelism(DataInputView& view, const char* what) {
  const size_t at = view.position();
  const int32_t p = view.readI32();
  if (p < 1 || p > kUpperBoundMaxParallelism) {
    view.failAt(at, fmt::format("invalid {} {}", what, p));
  }
  return p;
}

Status writeAll(int fd, const std::vector<uint8_t>& bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::ioError(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

// The whole of a regular file, refusing anything else (a FIFO would block).
Result<std::string> readWholeFile(const std::string& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return Status::ioError(
        fmt::format("cannot read checkpoint metadata '{}': {}", file, std::strerror(errno)));
  }
  struct stat st {};
  const int err = ::fstat(fd, &st) != 0 ? errno : 0;
  if (err != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::ioError(fmt::format("cannot read checkpoint metadata '{}': {}", file,
                                       err != 0 ? std::strerror(err) : "not a regular file"));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      return Status::ioError(fmt::format("cannot read checkpoint metadata '{}': {}", file,
                                         n < 0 ? std::strerror(err) : "it shrank while read"));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return bytes;
}

Status writeSubtask(const CompletedCheckpoint& cp, const OperatorSubtaskState& st,
                    DataOutputView& out) {
  out.writeString(st.operatorState);
  out.writeString(st.timers);
  if (st.keyed.native) {
    const NativeKeyedSnapshot& n = *st.keyed.native;
    Result<std::string> dir = relativeTo(cp.directory, n.directory);
    if (!dir.isOk()) return dir.status();
    out.writeU8(static_cast<uint8_t>(KeyedKind::kNative));
    out.writeString(dir.value());
    out.writeI32(n.startKeyGroup);
    out.writeI32(n.endKeyGroup);
    if (!n.hasChecksums || n.privateFileDigests.size() != n.privateFiles.size()) {
      return Status::internal(
          fmt::format("the native snapshot in '{}' was stored without checksums", n.directory));
    }
    out.writeU32(static_cast<uint32_t>(n.sstFiles.size()));
    for (const auto& f : n.sstFiles) {
      out.writeString(f.fileName);
      out.writeString(f.uniqueId);
      out.writeU64(f.sizeBytes);
      out.writeString(fs::path(f.location).lexically_relative(cp.directory).string());
      out.writeU64(f.checksum);
    }
    out.writeU32(static_cast<uint32_t>(n.privateFiles.size()));
    for (size_t i = 0; i < n.privateFiles.size(); ++i) {
      out.writeString(n.privateFiles[i]);
      out.writeU64(n.privateFileDigests[i].sizeBytes);
      out.writeU64(n.privateFileDigests[i].checksum);
    }
  } else if (!st.keyed.path.empty()) {
    Result<std::string> name = relativeTo(cp.directory, st.keyed.path);
    if (!name.isOk()) return name.status();
    out.writeU8(static_cast<uint8_t>(KeyedKind::kFile));
    out.writeString(name.value());
  } else if (st.keyed.bytes) {
    out.writeU8(static_cast<uint8_t>(KeyedKind::kBytes));
    out.writeString(*st.keyed.bytes);
  } else {
    out.writeU8(static_cast<uint8_t>(KeyedKind::kNone));
    out.writeString("");
  }
  return Status::ok();
}

void readSubtask(const std::string& directory, uint32_t version, int32_t maxParallelism,
                 OperatorSubtaskState& st, DataInputView& view) {
  view.readString(st.operatorState);
  view.readString(st.timers);
  const size_t kindAt = view.position();
  const auto kind = static_cast<KeyedKind>(view.readU8());
  if (kind == KeyedKind::kNative && version >= 2) {
    auto n = std::make_shared<NativeKeyedSnapshot>();
    std::string dir;
    const size_t dirAt = view.position();
    view.readString(dir);
    checkFileName(view, dir, dirAt);
    n->directory = (fs::path(directory) / dir).string();
    const size_t rangeAt = view.position();
    n->startKeyGroup = view.readI32();
    n->endKeyGroup = view.readI32();
    if (n->startKeyGroup < 0 || n->endKeyGroup >= maxParallelism ||
        n->endKeyGroup < n->startKeyGroup - 1) {
      view.failAt(rangeAt, fmt::format("invalid key-group range [{}, {}] (max parallelism {})",
                                       n->startKeyGroup, n->endKeyGroup, maxParallelism));
    }
    n->sstFiles.resize(readCount(view, kMinSstFileBytes, "SST files"));
    for (auto& f : n->sstFiles) {
      const size_t nameAt = view.position();
      view.readString(f.fileName);
      checkFileName(view, f.fileName, nameAt);
      view.readString(f.uniqueId);
      f.sizeBytes = view.readU64();
      std::string location;
      view.readString(location);
      f.location = (fs::path(directory) / location).lexically_normal().string();
      if (version >= 3) f.checksum = view.readU64();
    }
    n->privateFiles.resize(readCount(view, 1, "private files"));
    for (auto& f : n->privateFiles) {
      const size_t nameAt = view.position();
      view.readString(f);
      checkFileName(view, f, nameAt);
      if (version >= 3) {
        NativeKeyedSnapshot::FileDigest d;
        d.sizeBytes = view.readU64();
        d.checksum = view.readU64();
        n->privateFileDigests.push_back(d);
      }
    }
    n->hasChecksums = version >= 3;
    st.keyed.path = n->directory;
    st.keyed.native = std::move(n);
    return;
  }
  std::string keyed;
  const size_t keyedAt = view.position();
  view.readString(keyed);
  if (kind == KeyedKind::kFile) {
    checkFileName(view, keyed, keyedAt);
    st.keyed.path = (fs::path(directory) / keyed).string();
  } else if (kind == KeyedKind::kBytes) {
    st.keyed.bytes = std::make_shared<const std::string>(std::move(keyed));
  } else if (kind != KeyedKind::kNone) {
    view.failAt(kindAt, fmt::format("unknown keyed state kind {}", static_cast<int>(kind)));
  }
}

void readBody(DataInputView& view, uint32_t version, CompletedCheckpoint& cp) {
  cp.id = view.readI64();
  const size_t typeAt = view.position();
  const uint8_t type = view.readU8();
  if (type > static_cast<uint8_t>(CheckpointType::kSavepoint)) {
    view.failAt(typeAt, fmt::format("unknown checkpoint type {}", type));
  }
  cp.type = static_cast<CheckpointType>(type);
  cp.timestamp = view.readI64();
  view.readString(cp.jobId);
  cp.operators.resize(readCount(view, kMinOperatorBytes, "operators"));
  for (auto& op : cp.operators) {
    view.readString(op.uid);
    view.readString(op.name);
    op.parallelism = readParallelism(view, "parallelism");
    op.maxParallelism = readParallelism(view, "max parallelism");
    op.hasCoordinatorState = view.readBool();
    view.readString(op.coordinatorState);
    op.subtasks.resize(readCount(view, kMinSubtaskBytes, "subtasks"));
    for (auto& st : op.subtasks) readSubtask(cp.directory, version, op.maxParallelism, st, view);
  }
  char magic[8];
  view.readBytes(magic, 8);
  if (std::memcmp(magic, kEndMagic, 8) != 0) {
    view.failAt(view.position() - 8, "bad end marker (truncated or corrupt)");
  }
  if (view.remaining() != 0) {
    view.failAt(view.position(), fmt::format("{} bytes after the end marker", view.remaining()));
  }
}

// Checks magic, version and (version 3) the checksum; returns the version
// and leaves `view` after the header, limited to the checksummed part.
uint32_t readHeader(const std::string& bytes, DataInputView& view) {
  char magic[8];
  view.readBytes(magic, 8);
  if (std::memcmp(magic, kMagic, 8) != 0) {
    throw SerializationError("not a Sluice checkpoint (bad magic)");
  }
  const uint32_t version = view.readU32();
  if (version < 1 || version > kVersion) {
    throw SerializationError(fmt::format(
        "unsupported metadata version {} (this build reads 1 to {})", version, kVersion));
  }
  if (version >= 3) {
    if (bytes.size() < 12 + kChecksumSize) throw SerializationError("truncated");
    const size_t body = bytes.size() - kChecksumSize;
    uint64_t stored = 0;
    for (size_t i = 0; i < kChecksumSize; ++i) {
      stored |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[body + i])) << (8 * i);
    }
    const uint64_t actual = checksum64(bytes.data(), body);
    if (actual != stored) {
      throw SerializationError(fmt::format(
          "checksum mismatch: the file's {} bytes have checksum {}, the file recorded {} "
          "(damaged or truncated)",
          bytes.size(), checksumText(actual), checksumText(stored)));
    }
    view = DataInputView(reinterpret_cast<const uint8_t*>(bytes.data()), body);
    view.readBytes(magic, 8);
    (void)view.readU32();
  }
  return version;
}

}  // namespace

Status writeCheckpointMetadata(const CompletedCheckpoint& cp) {
  std::vector<uint8_t> buf;
  DataOutputView out(buf);
  out.writeBytes(kMagic, 8);
  out.writeU32(kVersion);
  out.writeI64(cp.id);
  out.writeU8(static_cast<uint8_t>(cp.type));
  out.writeI64(cp.timestamp);
  out.writeString(cp.jobId);
  out.writeU32(static_cast<uint32_t>(cp.operators.size()));
  for (const auto& op : cp.operators) {
    out.writeString(op.uid);
    out.writeString(op.name);
    out.writeI32(op.parallelism);
    out.writeI32(op.maxParallelism);
    out.writeBool(op.hasCoordinatorState);
    out.writeString(op.coordinatorState);
    out.writeU32(static_cast<uint32_t>(op.subtasks.size()));
    for (const auto& st : op.subtasks) SLUICE_RETURN_IF_ERROR(writeSubtask(cp, st, out));
  }
  out.writeBytes(kEndMagic, 8);
  const uint64_t sum = checksum64(buf.data(), buf.size());
  out.writeU64(sum);

  const std::string target = (fs::path(cp.directory) / kMetadataFileName).string();
  const std::string temp = target + ".inprogress";
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::ioError(fmt::format("cannot create '{}': {}", temp, std::strerror(errno)));
  }
  Status written = writeAll(fd, buf, temp);
  if (written.isOk() && ::fsync(fd) != 0) {
    written = Status::ioError(fmt::format("cannot sync '{}': {}", temp, std::strerror(errno)));
  }
  ::close(fd);
  if (!written.isOk()) {
    ::unlink(temp.c_str());
    return written;
  }
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    return Status::ioError(
        fmt::format("cannot rename '{}' to '{}': {}", temp, target, std::strerror(err)));
  }
  return Status::ok();
}

Result<CompletedCheckpoint> loadCheckpoint(const std::string& path) {
  std::error_code ec;
  fs::path file(path);
  if (fs::is_directory(file, ec)) file /= kMetadataFileName;
  Result<std::string> read = readWholeFile(file.string());
  if (!read.isOk()) return read.status();
  const std::string& bytes = read.value();
  CompletedCheckpoint cp;
  cp.directory = file.parent_path().string();
  try {
    DataInputView view(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    const uint32_t version = readHeader(bytes, view);
    readBody(view, version, cp);
  } catch (const std::exception& e) {
    return Status::corruption(
        fmt::format("corrupt checkpoint metadata '{}': {}", file.string(), e.what()));
  }
  return cp;
}

}  // namespace sluice::checkpoint
