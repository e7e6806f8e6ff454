// The canonical keyed-state snapshot format (snapshot.h): the exact bytes,
// writer/reader round trips from memory and from a file, reading only the
// key groups asked for, the checks on truncated and corrupt input, state
// meta compatibility, and the time-to-live helpers.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sluice/core/serializer.h>
#include <sluice/state/snapshot.h>

#include "core/checksum.h"

namespace sluice {
namespace snapshot_format_test {
namespace {

using ::testing::HasSubstr;

// Little-endian byte builder for the expected layout.
struct Bytes {
  std::string s;
  Bytes& raw(std::string_view v) {
    s.append(v);
    return *this;
  }
  template <class U>
  Bytes& le(U v) {
    for (size_t i = 0; i < sizeof(U); ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
    return *this;
  }
  Bytes& u8(uint8_t v) { return le(v); }
  Bytes& u16(uint16_t v) { return le(v); }
  Bytes& u32(uint32_t v) { return le(v); }
  Bytes& i32(int32_t v) { return le(static_cast<uint32_t>(v)); }
  Bytes& u64(uint64_t v) { return le(v); }
  Bytes& i64(int64_t v) { return le(static_cast<uint64_t>(v)); }
  Bytes& str(std::string_view v) {  // short strings only: one varuint byte
    u8(static_cast<uint8_t>(v.size()));
    return raw(v);
  }
};

StateMetaInfo valueMeta(std::string name) {
  StateMetaInfo m;
  m.name = std::move(name);
  m.kind = StateKind::kValue;
  m.namespaceSchema = "void";
  m.valueSchema = "int64";
  return m;
}

StateMetaInfo mapMeta(std::string name) {
  StateMetaInfo m;
  m.name = std::move(name);
  m.kind = StateKind::kMap;
  m.namespaceSchema = "void";
  m.userKeySchema = "string";
  m.valueSchema = "int64";
  return m;
}

using Entry = std::tuple<int32_t, uint16_t, std::string, std::string>;

std::vector<Entry> readAll(const CanonicalSnapshotReader& reader, KeyGroupRange range) {
  std::vector<Entry> out;
  reader.forEachEntry(range,
                      [&](int32_t kg, uint16_t state, std::string_view k, std::string_view v) {
                        out.emplace_back(kg, state, std::string(k), std::string(v));
                      });
  return out;
}

// A snapshot of groups [10, 19] with two states; some groups left out.
std::vector<Entry> sampleEntries() {
  std::vector<Entry> entries;
  for (int32_t kg = 10; kg <= 19; ++kg) {
    if (kg % 3 == 0) continue;  // never begun: written empty
    for (int i = 0; i < kg % 4 + 1; ++i) {
      entries.emplace_back(kg, static_cast<uint16_t>(i % 2), "key" + std::to_string(kg * 10 + i),
                           std::string(static_cast<size_t>(i * 50), static_cast<char>('a' + i)));
    }
  }
  return entries;
}

std::string writeSample(KeyedSnapshotInfo* info = nullptr) {
  std::ostringstream out;
  CanonicalSnapshotWriter writer(out, "string", 128, KeyGroupRange{10, 19},
                                 {valueMeta("a"), mapMeta("b")});
  int32_t current = -1;
  for (const auto& [kg, state, k, v] : sampleEntries()) {
    if (kg != current) writer.beginKeyGroup(kg);
    current = kg;
    writer.writeEntry(state, k, v);
  }
  KeyedSnapshotInfo i = writer.finish();
  if (info != nullptr) *info = i;
  return out.str();
}

std::vector<Entry> entriesIn(const std::vector<Entry>& all, KeyGroupRange range) {
  std::vector<Entry> out;
  for (const Entry& e : all)
    if (range.contains(std::get<0>(e))) out.push_back(e);
  return out;
}

class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "sluice_snapshot_test_XXXXXX").string();
    const int fd = ::mkstemp(tmpl.data());
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    ::close(fd);
    path_ = tmpl;
    std::ofstream(path_, std::ios::binary) << contents;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(SnapshotFormatTest, BytesFollowTheDocumentedLayout) {
  std::ostringstream out;
  CanonicalSnapshotWriter writer(out, "int64", 128, KeyGroupRange{2, 4}, {valueMeta("v")});
  writer.beginKeyGroup(2);
  writer.writeEntry(0, "k1", "v");
  const KeyedSnapshotInfo info = writer.finish();

  Bytes expected;
  expected.raw("SLUICEKS").u32(2).str("int64").i32(128).i32(2).i32(4).u32(1);
  // StateMetaInfo: name, kind, namespace, value, user key, ttl, two flags,
  // query-time entries.
  expected.str("v").u8(0).str("void").str("int64").str("").i64(0).u8(0).u8(0).i64(1000);
  const uint64_t block2 = expected.s.size();
  expected.u16(0).u8(2).raw("k1").u8(1).raw("v").u16(0xFFFF);
  const uint64_t block3 = expected.s.size();
  expected.u16(0xFFFF);
  const uint64_t block4 = expected.s.size();
  expected.u16(0xFFFF);
  const uint64_t footer = expected.s.size();
  auto sum = [&](uint64_t from, uint64_t to) {
    return checksum64(expected.s.data() + from, static_cast<size_t>(to - from));
  };
  // Per block its offset and checksum, then the header's checksum.
  expected.u64(block2).u64(sum(block2, block3));
  expected.u64(block3).u64(sum(block3, block4));
  expected.u64(block4).u64(sum(block4, footer));
  expected.u64(sum(0, block2));
  // Trailer: entries, footer offset, the checksum of all from the footer on.
  expected.u64(1).u64(footer);
  expected.u64(sum(footer, expected.s.size())).raw("SLUICEKE");

  EXPECT_EQ(out.str(), expected.s);
  EXPECT_EQ(info.keyGroupOffsets, (std::vector<uint64_t>{block2, block3, block4}));
  EXPECT_EQ(info.numEntries, 1u);
  EXPECT_EQ(info.sizeBytes, expected.s.size());
  EXPECT_EQ(info.keyGroupRange, (KeyGroupRange{2, 4}));
}

TEST(SnapshotFormatTest, RoundTripsFromMemoryAndFromAFile) {
  KeyedSnapshotInfo info;
  const std::string bytes = writeSample(&info);
  EXPECT_EQ(info.numEntries, sampleEntries().size());
  EXPECT_EQ(info.keyGroupOffsets.size(), 10u);
  TempFile file(bytes);
  std::vector<CanonicalSnapshotReader> readers;
  readers.push_back(
      CanonicalSnapshotReader::fromBytes(std::make_shared<const std::string>(bytes), "mem"));
  readers.push_back(CanonicalSnapshotReader::fromFile(file.path()));
  for (const CanonicalSnapshotReader& r : readers) {
    EXPECT_EQ(r.keySchema(), "string");
    EXPECT_EQ(r.maxParallelism(), 128);
    EXPECT_EQ(r.keyGroupRange(), (KeyGroupRange{10, 19}));
    ASSERT_EQ(r.states().size(), 2u);
    EXPECT_EQ(r.states()[0].name, "a");
    EXPECT_EQ(r.states()[1].kind, StateKind::kMap);
    EXPECT_EQ(r.states()[1].userKeySchema, "string");
    EXPECT_EQ(readAll(r, KeyGroupRange{0, 127}), sampleEntries());
    // Only the groups asked for, intersected with the snapshot's range.
    EXPECT_EQ(readAll(r, KeyGroupRange{13, 14}), entriesIn(sampleEntries(), {13, 14}));
    EXPECT_EQ(readAll(r, KeyGroupRange{18, 40}), entriesIn(sampleEntries(), {18, 19}));
    EXPECT_TRUE(readAll(r, KeyGroupRange{0, 9}).empty());
    EXPECT_TRUE(readAll(r, KeyGroupRange{20, 30}).empty());
  }
  EXPECT_EQ(readers[0].sourceName(), "mem");
  EXPECT_EQ(readers[1].sourceName(), file.path());
}

TEST(SnapshotFormatTest, BlocksOutsideTheRequestedRangeAreNotRead) {
  KeyedSnapshotInfo info;
  std::string bytes = writeSample(&info);
  // Garbage over the whole block of key group 17 (offset index 7).
  for (uint64_t i = info.keyGroupOffsets[7]; i < info.keyGroupOffsets[8]; ++i) bytes[i] = '\x77';
  TempFile file(bytes);
  CanonicalSnapshotReader r = CanonicalSnapshotReader::fromFile(file.path());
  EXPECT_EQ(readAll(r, KeyGroupRange{10, 16}), entriesIn(sampleEntries(), {10, 16}));
  EXPECT_EQ(readAll(r, KeyGroupRange{18, 19}), entriesIn(sampleEntries(), {18, 19}));
  try {
    readAll(r, KeyGroupRange{17, 17});
    FAIL() << "expected SerializationError";
  } catch (const SerializationError& e) {
    EXPECT_THAT(e.what(), HasSubstr(file.path()));
    EXPECT_THAT(e.what(), HasSubstr("key group 17"));
    EXPECT_THAT(e.what(), HasSubstr("(bytes " + std::to_string(info.keyGroupOffsets[7]) + ".." +
                                    std::to_string(info.keyGroupOffsets[8]) + ") has checksum"));
    EXPECT_THAT(e.what(), HasSubstr("the footer recorded 0x"));
  }
}

TEST(SnapshotFormatTest, EveryTruncationThrowsSerializationErrorNamingTheSource) {
  const std::string bytes = writeSample();
  for (size_t len = 0; len < bytes.size(); ++len) {
    auto cut = std::make_shared<const std::string>(bytes.substr(0, len));
    try {
      CanonicalSnapshotReader r = CanonicalSnapshotReader::fromBytes(cut, "cut-snapshot");
      readAll(r, KeyGroupRange{0, 127});
      ADD_FAILURE() << "no error for a snapshot truncated to " << len << " bytes";
    } catch (const SerializationError& e) {
      EXPECT_THAT(e.what(), HasSubstr("cut-snapshot")) << len;
      EXPECT_THAT(e.what(), HasSubstr("offset")) << len;
    }
  }
  // The same from a file.
  TempFile file(bytes.substr(0, bytes.size() - 1));
  EXPECT_THROW(CanonicalSnapshotReader::fromFile(file.path()), SerializationError);
  EXPECT_THROW(CanonicalSnapshotReader::fromFile(file.path() + ".missing"), SerializationError);
}

// Rewrites the checksums of a version-2 snapshot after `b` was edited (as a
// writer bug would leave it), so the checks behind them are reached.
std::string resealed(std::string b, const KeyedSnapshotInfo& info) {
  const size_t trailer = b.size() - 32;
  const size_t footer = trailer - 8 - 16 * info.keyGroupOffsets.size();
  auto put = [&](size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i) b[at + i] = static_cast<char>(v >> (8 * i));
  };
  for (size_t i = 0; i < info.keyGroupOffsets.size(); ++i) {
    const uint64_t start = info.keyGroupOffsets[i];
    const uint64_t end = i + 1 < info.keyGroupOffsets.size() ? info.keyGroupOffsets[i + 1] : footer;
    put(footer + 16 * i + 8, checksum64(b.data() + start, static_cast<size_t>(end - start)));
  }
  put(trailer + 16, checksum64(b.data() + footer, trailer + 16 - footer));
  return b;
}

TEST(SnapshotFormatTest, EveryDamagedByteIsFoundNamingThePartAndBothSums) {
  const std::string good = writeSample();
  for (size_t at = 0; at < good.size(); ++at) {
    std::string b = good;
    b[at] = static_cast<char>(b[at] ^ 0x10);
    try {
      CanonicalSnapshotReader r = CanonicalSnapshotReader::fromBytes(
          std::make_shared<const std::string>(std::move(b)), "flipped");
      r.verify();
      ADD_FAILURE() << "no error for the byte at " << at;
    } catch (const SerializationError& e) {
      const std::string what = e.what();
      EXPECT_THAT(what, HasSubstr("'flipped'")) << at;
      // The magics, the version and the footer offset are checked before
      // any checksum can be; everything else by one.
      if (what.find("magic") == std::string::npos && what.find("version") == std::string::npos &&
          what.find("footer offset") == std::string::npos) {
        EXPECT_THAT(what, HasSubstr("has checksum 0x")) << at << ": " << what;
        EXPECT_THAT(what, HasSubstr("recorded 0x")) << at << ": " << what;
      }
    }
  }
}

TEST(SnapshotFormatTest, CorruptBytesThrowSerializationErrorWithTheOffset) {
  KeyedSnapshotInfo info;
  const std::string good = writeSample(&info);
  auto expectError = [](std::string bytes, const std::string& what, const std::string& offset) {
    try {
      CanonicalSnapshotReader r = CanonicalSnapshotReader::fromBytes(
          std::make_shared<const std::string>(std::move(bytes)), "bad");
      readAll(r, KeyGroupRange{0, 127});
      ADD_FAILURE() << "no error for " << what;
    } catch (const SerializationError& e) {
      EXPECT_THAT(e.what(), HasSubstr("'bad'")) << what;
      EXPECT_THAT(e.what(), HasSubstr("offset " + offset)) << what << ": " << e.what();
    }
  };
  {
    std::string b = good;
    b[0] = 'X';
    expectError(b, "header magic", "0");
  }
  {
    std::string b = good;
    b[b.size() - 1] = 'X';
    expectError(b, "footer magic", std::to_string(good.size() - 8));
  }
  {
    std::string b = good;
    b[8] = 3;  // version
    expectError(b, "version", "8");
  }
  {
    // Block of group 10 starts with state index 0; make it 5 (only 2 states).
    std::string b = good;
    const uint64_t at = info.keyGroupOffsets[0];
    b[at] = 5;
    expectError(resealed(b, info), "state index", std::to_string(at));
  }
  {
    // The key length of the first entry of group 10, far beyond the block:
    // a continuation bit makes the key's first byte part of the length.
    std::string b = good;
    const uint64_t at = info.keyGroupOffsets[0] + 2;
    b[at] = '\xFF';
    expectError(resealed(b, info), "key length", std::to_string(at + 2));
  }
  {
    // An end-of-block marker before the end of group 10's block.
    std::string b = good;
    const uint64_t at = info.keyGroupOffsets[0];
    b[at] = '\xFF';
    b[at + 1] = '\xFF';
    expectError(resealed(b, info), "early end of block", std::to_string(at + 2));
  }
  {
    // A footer offset pointing past the trailer.
    std::string b = good;
    b[good.size() - 24] = '\x7f';
    b[good.size() - 17] = '\x01';
    expectError(b, "footer offset", std::to_string(good.size() - 24));
  }
}

TEST(SnapshotFormatTest, EmptyRangeAndGroupsNeverBegunAreValid) {
  std::ostringstream out;
  CanonicalSnapshotWriter writer(out, "int64", 128, KeyGroupRange{0, -1}, {valueMeta("v")});
  EXPECT_THROW(writer.beginKeyGroup(0), SluiceException);
  const KeyedSnapshotInfo info = writer.finish();
  EXPECT_TRUE(info.keyGroupOffsets.empty());
  auto r = CanonicalSnapshotReader::fromBytes(std::make_shared<const std::string>(out.str()));
  EXPECT_EQ(r.keyGroupRange().numberOfKeyGroups(), 0);
  EXPECT_TRUE(readAll(r, KeyGroupRange{0, 127}).empty());

  std::ostringstream out2;
  CanonicalSnapshotWriter none(out2, "int64", 128, KeyGroupRange{0, 127}, {});
  EXPECT_EQ(none.finish().keyGroupOffsets.size(), 128u);
  auto r2 = CanonicalSnapshotReader::fromBytes(std::make_shared<const std::string>(out2.str()));
  EXPECT_TRUE(readAll(r2, KeyGroupRange{0, 127}).empty());
}

TEST(SnapshotFormatTest, WriterRejectsMisuse) {
  std::ostringstream out;
  EXPECT_THROW(CanonicalSnapshotWriter(out, "int64", 128, KeyGroupRange{0, 128}, {}),
               SluiceException);
  CanonicalSnapshotWriter writer(out, "int64", 128, KeyGroupRange{4, 8}, {valueMeta("v")});
  EXPECT_THROW(writer.writeEntry(0, "k", "v"), SluiceException) << "before any key group";
  EXPECT_THROW(writer.beginKeyGroup(3), SluiceException) << "outside the range";
  writer.beginKeyGroup(6);
  EXPECT_THROW(writer.writeEntry(1, "k", "v"), SluiceException) << "no state 1";
  EXPECT_THROW(writer.beginKeyGroup(5), SluiceException) << "out of order";
  EXPECT_THROW(writer.beginKeyGroup(6), SluiceException) << "twice";
  writer.finish();
  EXPECT_THROW(writer.finish(), SluiceException);
}

TEST(SnapshotFormatTest, LargeValuesSpanTheWriteBuffer) {
  std::ostringstream out;
  CanonicalSnapshotWriter writer(out, "int64", 128, KeyGroupRange{0, 1}, {valueMeta("v")});
  const std::string big(300000, 'q');
  writer.beginKeyGroup(0);
  for (int i = 0; i < 5; ++i) writer.writeEntry(0, "k" + std::to_string(i), big);
  writer.beginKeyGroup(1);
  writer.writeEntry(0, "last", "x");
  writer.finish();
  TempFile file(out.str());
  auto r = CanonicalSnapshotReader::fromFile(file.path());
  auto entries = readAll(r, KeyGroupRange{0, 1});
  ASSERT_EQ(entries.size(), 6u);
  EXPECT_EQ(std::get<3>(entries[4]), big);
  EXPECT_EQ(std::get<2>(entries[5]), "last");
}

TEST(SnapshotFormatTest, StateMetaInfoRoundTripsAndChecksItsKind) {
  StateMetaInfo m = mapMeta("m");
  m.ttlMillis = 5000;
  m.ttlCleanupFullSnapshot = true;
  m.ttlCleanupInCompaction = true;
  m.ttlQueryTimeAfterNumEntries = 77;
  m.valueSchema = "ttl<int64>";
  std::vector<uint8_t> buf;
  DataOutputView out(buf);
  writeStateMetaInfo(m, out);
  DataInputView in(buf.data(), buf.size());
  StateMetaInfo back = readStateMetaInfo(in);
  EXPECT_EQ(in.remaining(), 0u);
  EXPECT_EQ(back.name, "m");
  EXPECT_EQ(back.kind, StateKind::kMap);
  EXPECT_EQ(back.namespaceSchema, "void");
  EXPECT_EQ(back.userKeySchema, "string");
  EXPECT_EQ(back.valueSchema, "ttl<int64>");
  EXPECT_EQ(back.ttlMillis, 5000);
  EXPECT_TRUE(back.ttlCleanupFullSnapshot);
  EXPECT_TRUE(back.ttlCleanupInCompaction);
  EXPECT_EQ(back.ttlQueryTimeAfterNumEntries, 77);

  buf[2] = 9;  // the kind byte after the 1-byte name
  DataInputView bad(buf.data(), buf.size());
  EXPECT_THROW(readStateMetaInfo(bad), SerializationError);
}

TEST(SnapshotFormatTest, MetaCompatibilityComparesLayoutNotTtlDuration) {
  const StateMetaInfo a = valueMeta("v");
  EXPECT_TRUE(a.compatibleWith(a));
  StateMetaInfo b = a;
  b.valueSchema = "string";
  EXPECT_FALSE(a.compatibleWith(b));
  b = a;
  b.namespaceSchema = "TimeWindow";
  EXPECT_FALSE(a.compatibleWith(b));
  b = a;
  b.kind = StateKind::kReducing;
  EXPECT_FALSE(a.compatibleWith(b));
  StateMetaInfo withTtl = a;
  withTtl.valueSchema = "ttl<int64>";
  withTtl.ttlMillis = 100;
  StateMetaInfo longerTtl = withTtl;
  longerTtl.ttlMillis = 5000;
  longerTtl.ttlCleanupFullSnapshot = true;
  EXPECT_TRUE(withTtl.compatibleWith(longerTtl));
  EXPECT_FALSE(a.compatibleWith(withTtl));
  StateMetaInfo m1 = mapMeta("m"), m2 = mapMeta("m");
  m2.userKeySchema = "int64";
  EXPECT_FALSE(m1.compatibleWith(m2));

  EXPECT_EQ(a.describe(), "value state 'v' of int64 in namespace void");
  EXPECT_EQ(m1.describe(), "map state 'm' of string -> int64 in namespace void");
}

std::string ttlValueBytes(int64_t ts, std::string_view payload) {
  Bytes b;
  b.i64(ts).raw(payload);
  return b.s;
}

std::string listBytes(const std::vector<std::string>& elements) {
  Bytes b;
  for (const std::string& e : elements) b.u32(static_cast<uint32_t>(e.size())).raw(e);
  return b.s;
}

TEST(SnapshotFormatTest, TtlHelpersKeepOnlyUnexpiredEntriesAndElements) {
  EXPECT_EQ(ttl::timestampOf(ttlValueBytes(1234567, "x")), 1234567);
  EXPECT_EQ(ttl::timestampOf(ttlValueBytes(-5, "")), -5);
  EXPECT_THROW(ttl::timestampOf("short"), SerializationError);
  // Expired from lastAccess + ttl on.
  EXPECT_FALSE(ttl::expired(1000, 100, 1099));
  EXPECT_TRUE(ttl::expired(1000, 100, 1100));
  EXPECT_FALSE(ttl::expired(INT64_MAX, 100, 0));

  StateMetaInfo value = valueMeta("v");
  value.ttlMillis = 100;
  std::string kept;
  bool changed = true;
  EXPECT_TRUE(ttl::keepEntry(value, ttlValueBytes(1000, "abc"), 1099, kept, changed));
  EXPECT_FALSE(changed);
  EXPECT_FALSE(ttl::keepEntry(value, ttlValueBytes(1000, "abc"), 1100, kept, changed));
  StateMetaInfo map = mapMeta("m");
  map.ttlMillis = 100;
  EXPECT_FALSE(ttl::keepEntry(map, ttlValueBytes(1, "v"), 500, kept, changed));
  // No TTL: everything is kept, without looking at the bytes.
  EXPECT_TRUE(ttl::keepEntry(valueMeta("v"), "", 1 << 30, kept, changed));

  StateMetaInfo list = valueMeta("l");
  list.kind = StateKind::kList;
  list.ttlMillis = 100;
  const std::string e1 = ttlValueBytes(1000, "one"), e2 = ttlValueBytes(1050, "two"),
                    e3 = ttlValueBytes(900, "three");
  // Some expired: the rest, in order.
  EXPECT_TRUE(ttl::keepEntry(list, listBytes({e1, e2, e3}), 1100, kept, changed));
  EXPECT_TRUE(changed);
  EXPECT_EQ(kept, listBytes({e2}));
  // None expired: unchanged.
  EXPECT_TRUE(ttl::keepEntry(list, listBytes({e1, e2}), 1000, kept, changed));
  EXPECT_FALSE(changed);
  // All expired: the entry goes.
  EXPECT_FALSE(ttl::keepEntry(list, listBytes({e1, e3}), 1100, kept, changed));
  // A malformed list.
  EXPECT_THROW(ttl::keepEntry(list, listBytes({e1}) + "\x05", 0, kept, changed),
               SerializationError);
  EXPECT_THROW(ttl::keepEntry(list, listBytes({"abc"}), 0, kept, changed), SerializationError);
}

}  // namespace
}  // namespace snapshot_format_test
}  // namespace sluice
