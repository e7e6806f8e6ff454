// The canonical keyed-state snapshot format (see snapshot.h for the layout).
//
// The writer streams to an std::ostream through a 64 KiB buffer and counts
// the bytes it wrote itself, so the output stream need not be seekable. The
// reader keeps only the header and the footer in memory; forEachEntry()
// loads one key-group block at a time (from the file with pread, so one
// reader may serve several threads), parses it with absolute offsets in every
// error message, and skips the blocks outside the requested range.
//
// Version 2 adds checksums (XXH3-64, core/checksum.h): one over the header,
// one per key-group block, kept in the footer next to the block's offset,
// and one over the footer itself in the trailer. A reader checks the footer
// and the header when it opens a snapshot and each block before it parses
// it, so a damaged snapshot fails naming the file, the block and both sums
// instead of restoring wrong state. Version 1 snapshots (no checksums) still
// load.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ostream>
#include <string>
#include <utility>

#include <sluice/state/snapshot.h>

#include "core/checksum.h"
#include "core/text.h"

namespace sluice {

namespace {

constexpr char kHeaderMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'K', 'S'};
constexpr char kFooterMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'K', 'E'};
constexpr uint32_t kFormatVersion = 2;
constexpr uint16_t kEndOfBlock = 0xFFFF;
// Version 1: u64 numEntries, u64 footerOffset, 8-byte magic.
constexpr uint64_t kTrailerSizeV1 = 24;
// Version 2: u64 numEntries, u64 footerOffset, u64 footer checksum, magic.
constexpr uint64_t kTrailerSize = 32;
// The footer checksum covers the footer and the trailer's first 16 bytes.
constexpr uint64_t kTrailerHashedBytes = 16;
constexpr size_t kWriteBufferSize = 64 * 1024;

uint64_t loadU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

const char* kindText(StateKind kind) {
  switch (kind) {
    case StateKind::kValue: return "value";
    case StateKind::kList: return "list";
    case StateKind::kMap: return "map";
    case StateKind::kReducing: return "reducing";
    case StateKind::kAggregating: return "aggregating";
  }
  return "unknown";
}

// Reads a block's bytes, checking every read against the block's end and
// reporting absolute offsets within the snapshot.
class BlockCursor {
 public:
  BlockCursor(const std::string& source, const uint8_t* data, size_t size, uint64_t baseOffset,
              int32_t keyGroup)
      : source_(source), data_(data), size_(size), base_(baseOffset), keyGroup_(keyGroup) {}

  bool atEnd() const { return pos_ == size_; }
  uint64_t offset() const { return base_ + pos_; }

  uint16_t readU16() {
    require(2, "state index");
    uint16_t v = static_cast<uint16_t>(data_[pos_] | (data_[pos_ + 1] << 8));
    pos_ += 2;
    return v;
  }
  uint64_t readVarUint(const char* what) {
    const size_t start = pos_;
    uint64_t result = 0;
    for (unsigned shift = 0;; shift += 7) {
      if (pos_ == size_) fail(start, std::string("truncated ") + what);
      const uint8_t b = data_[pos_++];
      if (shift == 63 && b > 1) fail(start, std::string(what) + " overflows 64 bits");
      result |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return result;
    }
  }
  std::string_view readBytes(uint64_t n, const char* what) {
    if (n > size_ - pos_) {
      fail(pos_, std::string(what) + " of " + std::to_string(n) + " bytes exceeds the " +
                     std::to_string(size_ - pos_) + " bytes that remain");
    }
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }
  [[noreturn]] void fail(size_t pos, const std::string& what) const {
    throw SerializationError("corrupt keyed-state snapshot '" + source_ + "': " + what +
                             " in the block of key group " + std::to_string(keyGroup_) +
                             " at offset " + std::to_string(base_ + pos));
  }

 private:
  void require(size_t n, const char* what) const {
    if (n > size_ - pos_) fail(pos_, std::string("truncated ") + what);
  }

  const std::string& source_;
  const uint8_t* data_;
  size_t size_;
  uint64_t base_;
  int32_t keyGroup_;
  size_t pos_ = 0;
};

}  // namespace

// ---------------------------------------------------------------------------
// StateMetaInfo

bool StateMetaInfo::compatibleWith(const StateMetaInfo& other) const {
  // The TTL duration and cleanup strategies may change between runs; whether
  // values carry a timestamp may not (it is part of valueSchema as well).
  return name == other.name && kind == other.kind && namespaceSchema == other.namespaceSchema &&
         valueSchema == other.valueSchema && userKeySchema == other.userKeySchema &&
         (ttlMillis > 0) == (other.ttlMillis > 0);
}

std::string StateMetaInfo::describe() const {
  std::string out = std::string(kindText(kind)) + " state '" + name + "' of ";
  if (kind == StateKind::kMap) out += userKeySchema + " -> ";
  out += valueSchema + " in namespace " + namespaceSchema;
  if (ttlMillis > 0) out += " with ttl " + std::to_string(ttlMillis) + " ms";
  return out;
}

void writeStateMetaInfo(const StateMetaInfo& meta, DataOutputView& out) {
  out.writeString(meta.name);
  out.writeU8(static_cast<uint8_t>(meta.kind));
  out.writeString(meta.namespaceSchema);
  out.writeString(meta.valueSchema);
  out.writeString(meta.userKeySchema);
  out.writeI64(meta.ttlMillis);
  out.writeBool(meta.ttlCleanupFullSnapshot);
  out.writeBool(meta.ttlCleanupInCompaction);
  out.writeI64(meta.ttlQueryTimeAfterNumEntries);
}

StateMetaInfo readStateMetaInfo(DataInputView& in) {
  StateMetaInfo meta;
  in.readString(meta.name);
  const size_t kindPos = in.position();
  const uint8_t kind = in.readU8();
  if (kind > static_cast<uint8_t>(StateKind::kAggregating)) {
    in.failAt(kindPos, "invalid state kind " + std::to_string(kind) + " of state '" +
                           escapeForMessage(meta.name) + "'");
  }
  meta.kind = static_cast<StateKind>(kind);
  in.readString(meta.namespaceSchema);
  in.readString(meta.valueSchema);
  in.readString(meta.userKeySchema);
  meta.ttlMillis = in.readI64();
  meta.ttlCleanupFullSnapshot = in.readBool();
  meta.ttlCleanupInCompaction = in.readBool();
  meta.ttlQueryTimeAfterNumEntries = in.readI64();
  return meta;
}

// ---------------------------------------------------------------------------
// CanonicalSnapshotWriter

struct CanonicalSnapshotWriter::Impl {
  std::ostream& out;
  KeyGroupRange range;
  size_t numStates;
  std::vector<uint8_t> buffer;
  uint64_t flushed = 0;  // bytes already handed to `out`
  std::vector<uint64_t> offsets;
  int32_t nextGroup;     // the next key group whose block may begin
  bool inGroup = false;  // a block is open
  bool finished = false;
  uint64_t numEntries = 0;
  // Checksums: `regionSum` is over the region being written (the header,
  // then each block in turn); bytes of `buffer` from `hashedInBuffer` on
  // are not in it yet.
  Checksum64 regionSum;
  size_t hashedInBuffer = 0;
  uint64_t headerChecksum = 0;
  std::vector<uint64_t> blockChecksums;

  Impl(std::ostream& o, KeyGroupRange r, size_t n)
      : out(o), range(r), numStates(n), nextGroup(r.startKeyGroup) {
    buffer.reserve(kWriteBufferSize + 1024);
  }

  uint64_t position() const { return flushed + buffer.size(); }

  void hashPending() {
    regionSum.update(buffer.data() + hashedInBuffer, buffer.size() - hashedInBuffer);
    hashedInBuffer = buffer.size();
  }
  // The region being written ends here; the next one starts.
  void endRegion() {
    hashPending();
    const uint64_t sum = regionSum.digest();
    if (offsets.empty()) {
      headerChecksum = sum;
    } else {
      blockChecksums.push_back(sum);
    }
    regionSum.reset();
  }
  void startBlock() {
    endRegion();
    offsets.push_back(position());
  }

  void flush() {
    if (buffer.empty()) return;
    hashPending();
    errno = 0;
    out.write(reinterpret_cast<const char*>(buffer.data()),
              static_cast<std::streamsize>(buffer.size()));
    if (!out) {
      const int err = errno;
      throw SluiceException("writing a keyed-state snapshot failed at offset " +
                            std::to_string(flushed) + ": " +
                            (err != 0 ? std::strerror(err) : "the output stream reports an error"));
    }
    flushed += buffer.size();
    buffer.clear();
    hashedInBuffer = 0;
  }
  void maybeFlush() {
    if (buffer.size() >= kWriteBufferSize) flush();
  }

  void closeGroup() {
    if (!inGroup) return;
    DataOutputView view(buffer);
    view.writeU16(kEndOfBlock);
    inGroup = false;
  }
  // Opens the block of `group`, writing empty blocks for the groups skipped.
  void openGroup(int32_t group) {
    closeGroup();
    DataOutputView view(buffer);
    while (nextGroup < group) {
      startBlock();
      view.writeU16(kEndOfBlock);
      ++nextGroup;
    }
    startBlock();
    nextGroup = group + 1;
    inGroup = true;
    maybeFlush();
  }
};

CanonicalSnapshotWriter::CanonicalSnapshotWriter(std::ostream& out, std::string keySchema,
                                                 int32_t maxParallelism, KeyGroupRange range,
                                                 std::vector<StateMetaInfo> states) {
  checkMaxParallelism(maxParallelism);
  if (range.numberOfKeyGroups() > 0 &&
      (range.startKeyGroup < 0 || range.endKeyGroup >= maxParallelism)) {
    throw SluiceException("keyed-state snapshot: key-group range [" +
                          std::to_string(range.startKeyGroup) + ", " +
                          std::to_string(range.endKeyGroup) + "] is outside [0, " +
                          std::to_string(maxParallelism) + ")");
  }
  if (states.size() >= kEndOfBlock) {
    throw SluiceException("keyed-state snapshot: too many states (" +
                          std::to_string(states.size()) + "), at most 65534");
  }
  impl_ = std::make_unique<Impl>(out, range, states.size());
  DataOutputView view(impl_->buffer);
  view.writeBytes(kHeaderMagic, sizeof(kHeaderMagic));
  view.writeU32(kFormatVersion);
  view.writeString(keySchema);
  view.writeI32(maxParallelism);
  view.writeI32(range.startKeyGroup);
  view.writeI32(range.endKeyGroup);
  view.writeU32(static_cast<uint32_t>(states.size()));
  for (const StateMetaInfo& meta : states) writeStateMetaInfo(meta, view);
  impl_->maybeFlush();
}

CanonicalSnapshotWriter::~CanonicalSnapshotWriter() = default;

void CanonicalSnapshotWriter::beginKeyGroup(int32_t keyGroup) {
  Impl& s = *impl_;
  if (s.finished) throw SluiceException("CanonicalSnapshotWriter: beginKeyGroup after finish");
  if (!s.range.contains(keyGroup) || keyGroup < s.nextGroup) {
    throw SluiceException("CanonicalSnapshotWriter: key group " + std::to_string(keyGroup) +
                          " is outside [" + std::to_string(s.range.startKeyGroup) + ", " +
                          std::to_string(s.range.endKeyGroup) + "] or not after the previous one");
  }
  s.openGroup(keyGroup);
}

void CanonicalSnapshotWriter::writeEntry(uint16_t stateIndex, std::string_view key,
                                         std::string_view value) {
  Impl& s = *impl_;
  if (!s.inGroup) {
    throw SluiceException("CanonicalSnapshotWriter: writeEntry before beginKeyGroup");
  }
  if (stateIndex >= s.numStates) {
    throw SluiceException("CanonicalSnapshotWriter: state index " + std::to_string(stateIndex) +
                          " out of range (" + std::to_string(s.numStates) + " states)");
  }
  DataOutputView view(s.buffer);
  view.writeU16(stateIndex);
  view.writeVarUint(key.size());
  view.writeBytes(key.data(), key.size());
  view.writeVarUint(value.size());
  view.writeBytes(value.data(), value.size());
  ++s.numEntries;
  s.maybeFlush();
}

KeyedSnapshotInfo CanonicalSnapshotWriter::finish() {
  Impl& s = *impl_;
  if (s.finished) throw SluiceException("CanonicalSnapshotWriter: finish called twice");
  s.closeGroup();
  if (s.range.numberOfKeyGroups() > 0 && s.nextGroup <= s.range.endKeyGroup) {
    s.openGroup(s.range.endKeyGroup);
    s.closeGroup();
  }
  s.endRegion();  // the last block, or the header of an empty range
  const uint64_t footerOffset = s.position();
  DataOutputView view(s.buffer);
  const size_t footerInBuffer = s.buffer.size();
  for (size_t i = 0; i < s.offsets.size(); ++i) {
    view.writeU64(s.offsets[i]);
    view.writeU64(s.blockChecksums[i]);
  }
  view.writeU64(s.headerChecksum);
  view.writeU64(s.numEntries);
  view.writeU64(footerOffset);
  view.writeU64(checksum64(s.buffer.data() + footerInBuffer, s.buffer.size() - footerInBuffer));
  view.writeBytes(kFooterMagic, sizeof(kFooterMagic));
  s.flush();
  errno = 0;
  s.out.flush();
  if (!s.out) {
    const int err = errno;
    throw SluiceException(std::string("writing a keyed-state snapshot failed while flushing: ") +
                          (err != 0 ? std::strerror(err) : "the output stream reports an error"));
  }
  s.finished = true;
  KeyedSnapshotInfo info;
  info.keyGroupRange = s.range;
  info.keyGroupOffsets = s.offsets;
  info.numEntries = s.numEntries;
  info.sizeBytes = s.flushed;
  return info;
}

// ---------------------------------------------------------------------------
// CanonicalSnapshotReader

struct CanonicalSnapshotReader::Impl {
  std::string source;
  // Exactly one of the two.
  std::shared_ptr<const std::string> bytes;
  int fd = -1;
  uint64_t size = 0;

  std::string keySchema;
  int32_t maxParallelism = 0;
  KeyGroupRange range;
  std::vector<StateMetaInfo> states;
  std::vector<uint64_t> offsets;
  uint64_t footerOffset = 0;
  uint64_t numEntries = 0;
  uint32_t version = 0;
  // Version 2: the checksum of each block (parallel to `offsets`).
  std::vector<uint64_t> blockChecksums;

  ~Impl() {
    if (fd >= 0) ::close(fd);
  }

  [[noreturn]] void fail(uint64_t offset, const std::string& what) const {
    throw SerializationError("corrupt keyed-state snapshot '" + source + "': " + what +
                             " at offset " + std::to_string(offset) + " (snapshot is " +
                             std::to_string(size) + " bytes)");
  }

  // Reads [offset, offset + n) into `into` (file) or points at it (memory).
  const uint8_t* read(uint64_t offset, uint64_t n, std::string& into, const char* what) const {
    if (offset > size || n > size - offset) {
      fail(offset, std::string("truncated snapshot while reading ") + what + " (" +
                       std::to_string(n) + " bytes)");
    }
    if (bytes) return reinterpret_cast<const uint8_t*>(bytes->data()) + offset;
    into.resize(static_cast<size_t>(n));
    size_t done = 0;
    while (done < n) {
      const ssize_t r = ::pread(fd, into.data() + done, static_cast<size_t>(n) - done,
                                static_cast<off_t>(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        const std::string reason = r < 0 ? std::strerror(errno) : "unexpected end of file";
        throw SerializationError("cannot read keyed-state snapshot '" + source + "' at offset " +
                                 std::to_string(offset + done) + ": " + reason);
      }
      done += static_cast<size_t>(r);
    }
    return reinterpret_cast<const uint8_t*>(into.data());
  }

  void checkSum(uint64_t actual, uint64_t expected, uint64_t offset, uint64_t end,
                const std::string& what) const {
    if (actual == expected) return;
    throw SerializationError("corrupt keyed-state snapshot '" + source + "': " + what + " (bytes " +
                             std::to_string(offset) + ".." + std::to_string(end) +
                             ") has checksum " + checksumText(actual) + ", the footer recorded " +
                             checksumText(expected));
  }

  // [start, end) of block `i`.
  std::pair<uint64_t, uint64_t> blockBounds(size_t i) const {
    return {offsets[i], i + 1 < offsets.size() ? offsets[i + 1] : footerOffset};
  }

  // The bytes of block `i`, checked against its checksum (version 2).
  const uint8_t* readBlock(size_t i, std::string& into) const {
    const auto [start, end] = blockBounds(i);
    const uint8_t* data = read(start, end - start, into, "key-group block");
    if (version >= 2) {
      checkSum(checksum64(data, static_cast<size_t>(end - start)), blockChecksums[i], start, end,
               "the block of key group " +
                   std::to_string(range.startKeyGroup + static_cast<int32_t>(i)));
    }
    return data;
  }

  void parse() {
    std::string scratch;
    if (size < sizeof(kHeaderMagic) + 4 + kTrailerSizeV1) {
      fail(0, "too short to be a keyed-state snapshot");
    }
    const uint8_t* magic = read(0, sizeof(kHeaderMagic) + 4, scratch, "header magic");
    if (std::memcmp(magic, kHeaderMagic, sizeof(kHeaderMagic)) != 0) {
      fail(0, "missing header magic \"SLUICEKS\"");
    }
    version = static_cast<uint32_t>(magic[8]) | (static_cast<uint32_t>(magic[9]) << 8) |
              (static_cast<uint32_t>(magic[10]) << 16) | (static_cast<uint32_t>(magic[11]) << 24);
    if (version != 1 && version != kFormatVersion) {
      fail(8, "unsupported format version " + std::to_string(version) +
                  " (this build reads versions 1 and " + std::to_string(kFormatVersion) + ")");
    }
    const uint64_t trailerSize = version == 1 ? kTrailerSizeV1 : kTrailerSize;
    const uint64_t entrySize = version == 1 ? 8 : 16;
    if (size < sizeof(kHeaderMagic) + 4 + trailerSize) {
      fail(0, "too short to be a keyed-state snapshot");
    }
    const uint64_t trailerAt = size - trailerSize;
    const uint8_t* trailer = read(trailerAt, trailerSize, scratch, "footer");
    if (std::memcmp(trailer + trailerSize - 8, kFooterMagic, sizeof(kFooterMagic)) != 0) {
      fail(trailerAt + trailerSize - 8, "missing footer magic \"SLUICEKE\" (truncated?)");
    }
    numEntries = loadU64(trailer);
    footerOffset = loadU64(trailer + 8);
    const uint64_t footerChecksum = version == 1 ? 0 : loadU64(trailer + 16);
    // Version 2's footer ends with the header checksum.
    const uint64_t tableEnd = version == 1 ? trailerAt : trailerAt - 8;
    if (footerOffset > tableEnd || (tableEnd - footerOffset) % entrySize != 0) {
      fail(trailerAt + 8, "invalid footer offset " + std::to_string(footerOffset));
    }
    const uint64_t numOffsets = (tableEnd - footerOffset) / entrySize;
    if (version >= 2) {
      const uint8_t* footer =
          read(footerOffset, trailerAt + kTrailerHashedBytes - footerOffset, scratch, "footer");
      checkSum(
          checksum64(footer, static_cast<size_t>(trailerAt + kTrailerHashedBytes - footerOffset)),
          footerChecksum, footerOffset, trailerAt + kTrailerHashedBytes, "the footer");
    }
    const uint8_t* table = read(footerOffset, tableEnd - footerOffset + (version == 1 ? 0 : 8),
                                scratch, "key-group offsets");
    offsets.resize(static_cast<size_t>(numOffsets));
    if (version >= 2) blockChecksums.resize(static_cast<size_t>(numOffsets));
    for (uint64_t i = 0; i < numOffsets; ++i) {
      offsets[i] = loadU64(table + entrySize * i);
      if (version >= 2) blockChecksums[i] = loadU64(table + entrySize * i + 8);
    }
    const uint64_t headerChecksum = version == 1 ? 0 : loadU64(table + entrySize * numOffsets);
    // The header ends where the first block starts.
    const uint64_t headerEnd = offsets.empty() ? footerOffset : offsets.front();
    if (headerEnd > footerOffset || headerEnd < sizeof(kHeaderMagic)) {
      fail(footerOffset, "invalid offset " + std::to_string(headerEnd) + " of the first block");
    }
    for (size_t i = 1; i < offsets.size(); ++i) {
      if (offsets[i] < offsets[i - 1] + 2 || offsets[i] > footerOffset) {
        fail(footerOffset + entrySize * i, "invalid offset " + std::to_string(offsets[i]) +
                                               " of key-group block " + std::to_string(i));
      }
    }
    if (!offsets.empty() && footerOffset < offsets.back() + 2) {
      fail(footerOffset, "the last key-group block overlaps the footer");
    }
    const uint8_t* header = read(0, headerEnd, scratch, "header");
    if (version >= 2) {
      checkSum(checksum64(header, static_cast<size_t>(headerEnd)), headerChecksum, 0, headerEnd,
               "the header");
    }
    DataInputView in(header, static_cast<size_t>(headerEnd));
    try {
      uint8_t m[sizeof(kHeaderMagic)];
      in.readBytes(m, sizeof(m));
      (void)in.readU32();  // the version, checked above
      in.readString(keySchema);
      const size_t mpAt = in.position();
      maxParallelism = in.readI32();
      range.startKeyGroup = in.readI32();
      range.endKeyGroup = in.readI32();
      if (maxParallelism < 1 || maxParallelism > kUpperBoundMaxParallelism) {
        fail(mpAt, "invalid max parallelism " + std::to_string(maxParallelism));
      }
      if (range.numberOfKeyGroups() > 0 &&
          (range.startKeyGroup < 0 || range.endKeyGroup >= maxParallelism)) {
        fail(mpAt + 4, "key-group range [" + std::to_string(range.startKeyGroup) + ", " +
                           std::to_string(range.endKeyGroup) + "] outside [0, " +
                           std::to_string(maxParallelism) + ")");
      }
      const size_t numStatesAt = in.position();
      const uint32_t numStates = in.readU32();
      if (numStates >= kEndOfBlock || numStates > in.remaining()) {
        fail(numStatesAt, "invalid number of states " + std::to_string(numStates));
      }
      states.reserve(numStates);
      for (uint32_t i = 0; i < numStates; ++i) states.push_back(readStateMetaInfo(in));
    } catch (const SerializationError& e) {
      if (std::string_view(e.what()).starts_with("corrupt keyed-state snapshot")) throw;
      throw SerializationError("corrupt keyed-state snapshot '" + source +
                               "': in the header: " + e.what());
    }
    if (in.remaining() != 0) {
      fail(in.position(), "the header does not end where the first key-group block starts");
    }
    if (offsets.size() != static_cast<size_t>(range.numberOfKeyGroups())) {
      fail(footerOffset, "footer lists " + std::to_string(offsets.size()) +
                             " key-group blocks, the header's range has " +
                             std::to_string(range.numberOfKeyGroups()));
    }
  }
};

CanonicalSnapshotReader::CanonicalSnapshotReader(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
CanonicalSnapshotReader::CanonicalSnapshotReader(CanonicalSnapshotReader&&) noexcept = default;
CanonicalSnapshotReader& CanonicalSnapshotReader::operator=(CanonicalSnapshotReader&&) noexcept =
    default;
CanonicalSnapshotReader::~CanonicalSnapshotReader() = default;

CanonicalSnapshotReader CanonicalSnapshotReader::fromBytes(std::shared_ptr<const std::string> bytes,
                                                           std::string sourceName) {
  if (!bytes) throw SluiceException("CanonicalSnapshotReader::fromBytes: null bytes");
  auto impl = std::make_unique<Impl>();
  impl->source = std::move(sourceName);
  impl->size = bytes->size();
  impl->bytes = std::move(bytes);
  impl->parse();
  return CanonicalSnapshotReader(std::move(impl));
}

CanonicalSnapshotReader CanonicalSnapshotReader::fromFile(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->source = path;
  impl->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (impl->fd < 0) {
    throw SerializationError("cannot open keyed-state snapshot '" + path +
                             "': " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(impl->fd, &st) != 0) {
    throw SerializationError("cannot stat keyed-state snapshot '" + path +
                             "': " + std::strerror(errno));
  }
  impl->size = static_cast<uint64_t>(st.st_size);
  impl->parse();
  return CanonicalSnapshotReader(std::move(impl));
}

const std::string& CanonicalSnapshotReader::keySchema() const { return impl_->keySchema; }
int32_t CanonicalSnapshotReader::maxParallelism() const { return impl_->maxParallelism; }
KeyGroupRange CanonicalSnapshotReader::keyGroupRange() const { return impl_->range; }
const std::vector<StateMetaInfo>& CanonicalSnapshotReader::states() const { return impl_->states; }
const std::string& CanonicalSnapshotReader::sourceName() const { return impl_->source; }
uint32_t CanonicalSnapshotReader::formatVersion() const { return impl_->version; }

void CanonicalSnapshotReader::verify() const {
  const Impl& s = *impl_;
  if (s.version >= 2) {
    std::string buffer;
    for (size_t i = 0; i < s.offsets.size(); ++i) s.readBlock(i, buffer);
    return;
  }
  // Version 1 has no checksums: parse every block instead.
  forEachEntry(s.range, [](int32_t, uint16_t, std::string_view, std::string_view) {});
}

void CanonicalSnapshotReader::forEachEntry(KeyGroupRange range, const EntryFn& fn) const {
  const Impl& s = *impl_;
  const int32_t first = std::max(range.startKeyGroup, s.range.startKeyGroup);
  const int32_t last = std::min(range.endKeyGroup, s.range.endKeyGroup);
  std::string buffer;
  for (int32_t group = first; group <= last; ++group) {
    const size_t i = static_cast<size_t>(group - s.range.startKeyGroup);
    const auto [start, end] = s.blockBounds(i);
    const uint8_t* data = s.readBlock(i, buffer);
    BlockCursor cur(s.source, data, static_cast<size_t>(end - start), start, group);
    for (;;) {
      const uint64_t entryAt = cur.offset();
      const uint16_t stateIndex = cur.readU16();
      if (stateIndex == kEndOfBlock) break;
      if (stateIndex >= s.states.size()) {
        cur.fail(static_cast<size_t>(entryAt - start),
                 "state index " + std::to_string(stateIndex) + " out of range (" +
                     std::to_string(s.states.size()) + " states)");
      }
      const uint64_t keyLen = cur.readVarUint("key length");
      const std::string_view key = cur.readBytes(keyLen, "key");
      const uint64_t valueLen = cur.readVarUint("value length");
      const std::string_view value = cur.readBytes(valueLen, "value");
      fn(group, stateIndex, key, value);
    }
    if (!cur.atEnd()) {
      cur.fail(static_cast<size_t>(cur.offset() - start),
               "end-of-block marker before the end of the block");
    }
  }
}

// ---------------------------------------------------------------------------
// TTL helpers

bool ListValueReader::next(std::string_view& element, std::string_view* whole) {
  if (pos_ == value_.size()) return false;
  if (value_.size() - pos_ < 4) {
    throw SerializationError("truncated list element length at byte offset " +
                             std::to_string(pos_) + " of a list value of " +
                             std::to_string(value_.size()) + " bytes");
  }
  const auto* p = reinterpret_cast<const uint8_t*>(value_.data() + pos_);
  const uint32_t len = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                       (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
  if (len > value_.size() - pos_ - 4) {
    throw SerializationError("list element length " + std::to_string(len) +
                             " exceeds the bytes that remain at byte offset " +
                             std::to_string(pos_) + " of a list value of " +
                             std::to_string(value_.size()) + " bytes");
  }
  element = value_.substr(pos_ + 4, len);
  if (whole != nullptr) *whole = value_.substr(pos_, 4 + len);
  pos_ += 4 + len;
  return true;
}

size_t beginListElement(std::vector<uint8_t>& out) {
  const size_t begin = out.size();
  out.resize(begin + 4);
  return begin;
}

void endListElement(std::vector<uint8_t>& out, size_t begin) {
  const auto len = static_cast<uint32_t>(out.size() - begin - 4);
  for (int i = 0; i < 4; ++i) out[begin + i] = static_cast<uint8_t>(len >> (8 * i));
}

namespace ttl {

int64_t timestampOf(std::string_view ttlValue) {
  if (ttlValue.size() < 8) {
    throw SerializationError("a time-to-live value needs at least 8 bytes, got " +
                             std::to_string(ttlValue.size()));
  }
  return static_cast<int64_t>(loadU64(reinterpret_cast<const uint8_t*>(ttlValue.data())));
}

bool keepEntry(const StateMetaInfo& meta, std::string_view value, int64_t now, std::string& kept,
               bool& changed) {
  changed = false;
  if (meta.ttlMillis <= 0) return true;
  if (meta.storage() != StateStorage::kList) {
    return !expired(timestampOf(value), meta.ttlMillis, now);
  }
  // A list: [u32 len][element] ..., each element starting with its timestamp.
  auto forEachElement = [&](auto&& f) {
    ListValueReader reader(value);
    std::string_view element, whole;
    while (reader.next(element, &whole)) f(whole, element);
  };
  size_t total = 0;
  size_t live = 0;
  forEachElement([&](std::string_view, std::string_view element) {
    ++total;
    if (!expired(timestampOf(element), meta.ttlMillis, now)) ++live;
  });
  if (live == total) return total > 0;
  if (live == 0) return false;
  kept.clear();
  forEachElement([&](std::string_view whole, std::string_view element) {
    if (!expired(timestampOf(element), meta.ttlMillis, now)) kept.append(whole);
  });
  changed = true;
  return true;
}

}  // namespace ttl

}  // namespace sluice
