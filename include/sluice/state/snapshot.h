// The canonical keyed-state snapshot: one backend-independent format, so a
// snapshot written from the hashmap backend restores into RocksDB and back,
// and a subtask of a rescaled job reads exactly the key groups it now owns.
//
// Layout (all integers little-endian unless noted):
//
//   header   "SLUICEKS" u32 version=2
//            string keySchema, i32 maxParallelism,
//            i32 firstKeyGroup, i32 lastKeyGroup,
//            u32 numStates, numStates x StateMetaInfo
//   blocks   one per key group of the range, in order:
//              (u16 stateIndex, varuint keyLen, key, varuint valueLen, value)*
//              u16 0xFFFF
//   footer   per block: u64 offset (from the file start), u64 checksum of
//            the block's bytes; u64 checksum of the header
//   trailer  u64 number of entries, u64 footer offset, u64 checksum of the
//            footer and these first 16 trailer bytes, "SLUICEKE"
//
// Checksums are XXH3-64. Version 1 (no checksums; footer: u64 offsets, u64
// entries, u64 footer offset, magic) still reads.
//
// Entry keys and values use the same bytes as the RocksDB backend's column
// families, minus the 2-byte key-group prefix:
//
//   key    serialized key | serialized namespace            (value, list, ...)
//          serialized key | serialized namespace | user key  (map)
//   value  value / reducing / aggregating: the serialized value (accumulator)
//          list: each element as u32 length + serialized element
//          map:  the serialized user value
//
// With time-to-live, each stored value (each list element, each map value)
// starts with the i64 timestamp of its last access, followed by the value.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/core/key_hash.h>
#include <sluice/state/state.h>

namespace sluice {

// How the value bytes of a state are laid out (see above).
enum class StateStorage : uint8_t { kValue = 0, kList = 1, kMap = 2 };

inline StateStorage storageOf(StateKind kind) {
  switch (kind) {
    case StateKind::kList: return StateStorage::kList;
    case StateKind::kMap: return StateStorage::kMap;
    default: return StateStorage::kValue;
  }
}

// What a snapshot records about one registered state, and what a restore
// checks the registering descriptor against.
struct StateMetaInfo {
  std::string name;
  StateKind kind = StateKind::kValue;
  std::string namespaceSchema;
  // The stored type: value, accumulator, list element or map value. With TTL
  // this is the schema of the TTL-wrapped type.
  std::string valueSchema;
  std::string userKeySchema;  // map state only
  // Time to live in milliseconds; 0 when the state has none.
  int64_t ttlMillis = 0;
  bool ttlCleanupFullSnapshot = false;
  bool ttlCleanupInCompaction = false;
  int64_t ttlQueryTimeAfterNumEntries = 1000;

  StateStorage storage() const { return storageOf(kind); }
  // True when a state registered as `other` can read data written as this.
  bool compatibleWith(const StateMetaInfo& other) const;
  // "value state 'count' of int64 in namespace void".
  std::string describe() const;
};

void writeStateMetaInfo(const StateMetaInfo& meta, DataOutputView& out);
StateMetaInfo readStateMetaInfo(DataInputView& in);

// Where the blocks of a written snapshot start.
struct KeyedSnapshotInfo {
  KeyGroupRange keyGroupRange;
  std::vector<uint64_t> keyGroupOffsets;
  uint64_t numEntries = 0;
  uint64_t sizeBytes = 0;
};

// Streams a canonical snapshot to `out`. Key groups must be begun in
// increasing order; groups of the range that are never begun are written
// empty. Not thread-safe; any single thread.
class CanonicalSnapshotWriter {
 public:
  CanonicalSnapshotWriter(std::ostream& out, std::string keySchema, int32_t maxParallelism,
                          KeyGroupRange range, std::vector<StateMetaInfo> states);
  ~CanonicalSnapshotWriter();
  CanonicalSnapshotWriter(const CanonicalSnapshotWriter&) = delete;
  CanonicalSnapshotWriter& operator=(const CanonicalSnapshotWriter&) = delete;

  void beginKeyGroup(int32_t keyGroup);
  void writeEntry(uint16_t stateIndex, std::string_view key, std::string_view value);
  // Ends the last key group and writes the footer. Throws on an I/O error.
  KeyedSnapshotInfo finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Reads a canonical snapshot from memory or from a file. Every read is
// checked, and every block against its checksum before it is parsed; a
// truncated or corrupt snapshot throws SerializationError naming the
// source, the block or offset and, for a checksum, both sums. Opening checks
// the header and the footer.
class CanonicalSnapshotReader {
 public:
  static CanonicalSnapshotReader fromBytes(std::shared_ptr<const std::string> bytes,
                                           std::string sourceName = "snapshot");
  static CanonicalSnapshotReader fromFile(const std::string& path);

  const std::string& keySchema() const;
  int32_t maxParallelism() const;
  KeyGroupRange keyGroupRange() const;
  const std::vector<StateMetaInfo>& states() const;
  const std::string& sourceName() const;
  uint32_t formatVersion() const;

  // Reads every block and checks its checksum (version 1: parses it),
  // throwing SerializationError as forEachEntry would. What a restore
  // runs before any task starts.
  void verify() const;

  using EntryFn = std::function<void(int32_t keyGroup, uint16_t stateIndex, std::string_view key,
                                     std::string_view value)>;
  // Every entry of the key groups in `range` (intersected with the
  // snapshot's own range), in key-group order; blocks outside are skipped
  // without being read.
  void forEachEntry(KeyGroupRange range, const EntryFn& fn) const;

  CanonicalSnapshotReader(CanonicalSnapshotReader&&) noexcept;
  CanonicalSnapshotReader& operator=(CanonicalSnapshotReader&&) noexcept;
  ~CanonicalSnapshotReader();

 private:
  struct Impl;
  explicit CanonicalSnapshotReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The list value layout (above): elements as [u32 little-endian length |
// element bytes]. The one codec every backend and the snapshot code use.
class ListValueReader {
 public:
  explicit ListValueReader(std::string_view value) : value_(value) {}
  // The next element's bytes, and in `whole` the same with its length
  // prefix; false at the end. Throws SerializationError naming the byte
  // offset when the value is truncated.
  bool next(std::string_view& element, std::string_view* whole = nullptr);

 private:
  std::string_view value_;
  size_t pos_ = 0;
};
// Writing one element: beginListElement() reserves its length, the caller
// appends the element's bytes, endListElement() fills the length in.
size_t beginListElement(std::vector<uint8_t>& out);
void endListElement(std::vector<uint8_t>& out, size_t begin);

// Time-to-live helpers on stored bytes (see the layout above), shared by the
// snapshot writers and RocksDB's compaction filter.
namespace ttl {

// The last-access timestamp a TTL value starts with.
int64_t timestampOf(std::string_view ttlValue);
// True when an entry last accessed at `timestamp` has expired at `now`.
inline bool expired(int64_t timestamp, int64_t ttlMillis, int64_t now) {
  // As Flink: expired once lastAccess + ttl <= now, without overflowing
  // for timestamps near the maximum.
  return timestamp <= now && now - timestamp >= ttlMillis;
}
// Filters the stored `value` of a state with TTL for a snapshot or a
// compaction: returns false when the whole entry is expired; for a list,
// writes the unexpired elements to `kept` and sets `changed` when some were
// dropped.
bool keepEntry(const StateMetaInfo& meta, std::string_view value, int64_t now, std::string& kept,
               bool& changed);

}  // namespace ttl

}  // namespace sluice
