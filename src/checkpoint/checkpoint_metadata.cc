#include "checkpoint/checkpoint_metadata.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include <sluice/core/serializer.h>

namespace sluice::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[] = "SLUICECP";
constexpr char kEndMagic[] = "SLUICEND";
// Version 2 added native (incremental) keyed snapshots; version 1 files
// still load.
constexpr uint32_t kVersion = 2;

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

// A count of entries that each take at least one byte.
uint32_t readCount(DataInputView& view) {
  const uint32_t n = view.readU32();
  if (n > view.remaining()) {
    throw SerializationError(fmt::format("a count of {} entries exceeds the bytes left", n));
  }
  return n;
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
    out.writeU32(static_cast<uint32_t>(n.sstFiles.size()));
    for (const auto& f : n.sstFiles) {
      out.writeString(f.fileName);
      out.writeString(f.uniqueId);
      out.writeU64(f.sizeBytes);
      out.writeString(fs::path(f.location).lexically_relative(cp.directory).string());
    }
    out.writeU32(static_cast<uint32_t>(n.privateFiles.size()));
    for (const auto& f : n.privateFiles) out.writeString(f);
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

void readSubtask(const std::string& directory, OperatorSubtaskState& st, DataInputView& view) {
  view.readString(st.operatorState);
  view.readString(st.timers);
  const auto kind = static_cast<KeyedKind>(view.readU8());
  if (kind == KeyedKind::kNative) {
    auto n = std::make_shared<NativeKeyedSnapshot>();
    std::string dir;
    view.readString(dir);
    n->directory = (fs::path(directory) / dir).string();
    n->startKeyGroup = view.readI32();
    n->endKeyGroup = view.readI32();
    n->sstFiles.resize(readCount(view));
    for (auto& f : n->sstFiles) {
      view.readString(f.fileName);
      view.readString(f.uniqueId);
      f.sizeBytes = view.readU64();
      std::string location;
      view.readString(location);
      f.location = (fs::path(directory) / location).lexically_normal().string();
    }
    n->privateFiles.resize(readCount(view));
    for (auto& f : n->privateFiles) view.readString(f);
    st.keyed.path = n->directory;
    st.keyed.native = std::move(n);
    return;
  }
  std::string keyed;
  view.readString(keyed);
  if (kind == KeyedKind::kFile) {
    st.keyed.path = (fs::path(directory) / keyed).string();
  } else if (kind == KeyedKind::kBytes) {
    st.keyed.bytes = std::make_shared<const std::string>(std::move(keyed));
  } else if (kind != KeyedKind::kNone) {
    throw SerializationError(fmt::format("unknown keyed state kind {}", static_cast<int>(kind)));
  }
}

void readBody(DataInputView& view, CompletedCheckpoint& cp) {
  char magic[8];
  view.readBytes(magic, 8);
  if (std::memcmp(magic, kMagic, 8) != 0) {
    throw SerializationError("not a Sluice checkpoint (bad magic)");
  }
  const uint32_t version = view.readU32();
  if (version != 1 && version != kVersion) {
    throw SerializationError(fmt::format("unsupported metadata version {}", version));
  }
  cp.id = view.readI64();
  cp.type = static_cast<CheckpointType>(view.readU8());
  cp.timestamp = view.readI64();
  view.readString(cp.jobId);
  cp.operators.resize(readCount(view));
  for (auto& op : cp.operators) {
    view.readString(op.uid);
    view.readString(op.name);
    op.parallelism = view.readI32();
    op.maxParallelism = view.readI32();
    op.hasCoordinatorState = view.readBool();
    view.readString(op.coordinatorState);
    op.subtasks.resize(readCount(view));
    for (auto& st : op.subtasks) readSubtask(cp.directory, st, view);
  }
  view.readBytes(magic, 8);
  if (std::memcmp(magic, kEndMagic, 8) != 0) {
    throw SerializationError("bad end marker (truncated or corrupt)");
  }
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
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return Status::ioError(fmt::format("cannot read checkpoint metadata '{}': {}", file.string(),
                                       std::strerror(errno)));
  }
  std::ostringstream content;
  content << in.rdbuf();
  const std::string bytes = content.str();
  CompletedCheckpoint cp;
  cp.directory = file.parent_path().string();
  try {
    DataInputView view(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    readBody(view, cp);
  } catch (const std::exception& e) {
    return Status::corruption(
        fmt::format("corrupt checkpoint metadata '{}': {}", file.string(), e.what()));
  }
  return cp;
}

}  // namespace sluice::checkpoint
