#include "checkpoint/task_state_codec.h"

#include <cstring>
#include <vector>

#include <fmt/format.h>

#include <sluice/core/serializer.h>

namespace sluice::checkpoint {
namespace {

constexpr char kMagic[4] = {'S', 'L', 'T', 'S'};
constexpr uint32_t kVersion = 1;
enum class Kind : uint8_t { kNone = 0, kFile = 1, kBytes = 2, kNative = 3 };

uint32_t readCount(DataInputView& in, size_t minBytes, const char* what) {
  const size_t at = in.position();
  const uint32_t n = in.readU32();
  if (n > in.remaining() / minBytes) {
    in.failAt(at,
              fmt::format("a count of {} {} exceeds the {} bytes left", n, what, in.remaining()));
  }
  return n;
}

}  // namespace

std::string encodeTaskStateSnapshot(const TaskStateSnapshot& snapshot) {
  std::vector<uint8_t> buf;
  DataOutputView out(buf);
  for (char c : kMagic) out.writeU8(static_cast<uint8_t>(c));
  out.writeU32(kVersion);
  out.writeU32(static_cast<uint32_t>(snapshot.operators.size()));
  for (const auto& [node, st] : snapshot.operators) {
    out.writeI32(node);
    out.writeString(st.operatorState);
    out.writeString(st.timers);
    if (st.keyed.native) {
      const NativeKeyedSnapshot& n = *st.keyed.native;
      out.writeU8(static_cast<uint8_t>(Kind::kNative));
      out.writeString(n.directory);
      out.writeI32(n.startKeyGroup);
      out.writeI32(n.endKeyGroup);
      out.writeBool(n.hasChecksums);
      out.writeU32(static_cast<uint32_t>(n.sstFiles.size()));
      for (const auto& f : n.sstFiles) {
        out.writeString(f.fileName);
        out.writeString(f.uniqueId);
        out.writeU64(f.sizeBytes);
        out.writeString(f.location);
        out.writeU64(f.checksum);
      }
      out.writeU32(static_cast<uint32_t>(n.privateFiles.size()));
      for (const auto& f : n.privateFiles) out.writeString(f);
      out.writeU32(static_cast<uint32_t>(n.privateFileDigests.size()));
      for (const auto& d : n.privateFileDigests) {
        out.writeU64(d.sizeBytes);
        out.writeU64(d.checksum);
      }
    } else if (!st.keyed.path.empty()) {
      out.writeU8(static_cast<uint8_t>(Kind::kFile));
      out.writeString(st.keyed.path);
    } else if (st.keyed.bytes) {
      out.writeU8(static_cast<uint8_t>(Kind::kBytes));
      out.writeString(*st.keyed.bytes);
    } else {
      out.writeU8(static_cast<uint8_t>(Kind::kNone));
    }
  }
  return std::string(reinterpret_cast<const char*>(out.data()), out.size());
}

Result<TaskStateSnapshot> decodeTaskStateSnapshot(const std::string& bytes) {
  try {
    DataInputView in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    char magic[4];
    for (char& c : magic) c = static_cast<char>(in.readU8());
    if (std::memcmp(magic, kMagic, 4) != 0) in.failAt(0, "not a task state snapshot");
    const uint32_t version = in.readU32();
    if (version != kVersion) in.failAt(4, fmt::format("unknown version {}", version));
    TaskStateSnapshot snapshot;
    const uint32_t ops = readCount(in, 4 + 1 + 1 + 1, "operators");
    for (uint32_t i = 0; i < ops; ++i) {
      const int32_t node = in.readI32();
      OperatorSubtaskState& st = snapshot.operators[node];
      in.readString(st.operatorState);
      in.readString(st.timers);
      const size_t kindAt = in.position();
      const auto kind = static_cast<Kind>(in.readU8());
      if (kind == Kind::kNative) {
        auto n = std::make_shared<NativeKeyedSnapshot>();
        in.readString(n->directory);
        n->startKeyGroup = in.readI32();
        n->endKeyGroup = in.readI32();
        n->hasChecksums = in.readBool();
        n->sstFiles.resize(readCount(in, 1 + 1 + 8 + 1 + 8, "SST files"));
        for (auto& f : n->sstFiles) {
          in.readString(f.fileName);
          in.readString(f.uniqueId);
          f.sizeBytes = in.readU64();
          in.readString(f.location);
          f.checksum = in.readU64();
        }
        n->privateFiles.resize(readCount(in, 1, "private files"));
        for (auto& f : n->privateFiles) in.readString(f);
        n->privateFileDigests.resize(readCount(in, 16, "file digests"));
        for (auto& d : n->privateFileDigests) {
          d.sizeBytes = in.readU64();
          d.checksum = in.readU64();
        }
        st.keyed.path = n->directory;
        st.keyed.native = std::move(n);
      } else if (kind == Kind::kFile) {
        in.readString(st.keyed.path);
      } else if (kind == Kind::kBytes) {
        std::string b;
        in.readString(b);
        st.keyed.bytes = std::make_shared<const std::string>(std::move(b));
      } else if (kind != Kind::kNone) {
        in.failAt(kindAt, fmt::format("unknown keyed state kind {}", static_cast<int>(kind)));
      }
    }
    if (in.remaining() != 0) {
      in.failAt(in.position(), fmt::format("{} bytes after the end", in.remaining()));
    }
    return snapshot;
  } catch (const std::exception& e) {
    return Status::invalidArgument(
        fmt::format("a task state snapshot of {} bytes is damaged: {}", bytes.size(), e.what()));
  }
}

}  // namespace sluice::checkpoint
