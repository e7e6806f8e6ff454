// Damaged and unavailable checkpoint storage in running jobs: a damaged
// savepoint fails the submission naming the file, a recovery skips a
// damaged checkpoint for an older one (and fails when none is left), a
// mutated checkpoint never loads as different state, a full disk names the
// file and the OS error, an unusable state.checkpoints.dir fails at
// submission, and a restart loop is pointed out once.
#include "checkpoint/checkpoint_integrity.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <new>
#include <random>
#include <set>

#include <gmock/gmock.h>

#include "checkpoint/checkpoint_metadata.h"
#include "core/checksum.h"
#include "harness/checkpoint_jobs.h"
#include "harness/file_size_limit.h"

// The largest single allocation while `armed` is set on this thread: the
// fuzz test below bounds what a damaged checkpoint can make the loader
// allocate. Inert elsewhere in the binary.
namespace checkpoint_integrity_test {
thread_local bool armed = false;
std::atomic<size_t> largestAllocation{0};
}  // namespace checkpoint_integrity_test

void* operator new(size_t n) {
  if (checkpoint_integrity_test::armed) {
    size_t cur = checkpoint_integrity_test::largestAllocation.load();
    while (n > cur && !checkpoint_integrity_test::largestAllocation.compare_exchange_weak(cur, n)) {
    }
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace sluice::checkpointing {
namespace checkpoint_integrity_test {
namespace {

using ::checkpoint_integrity_test::armed;
using ::checkpoint_integrity_test::largestAllocation;
using std::chrono::milliseconds;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string readAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void writeAll(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}
void flipByte(const fs::path& p, size_t at) {
  std::string b = readAll(p);
  ASSERT_LT(at, b.size()) << p;
  b[at] = static_cast<char>(b[at] ^ 0x5a);
  writeAll(p, b);
}
std::vector<fs::path> filesNamed(const fs::path& dir, const std::string& suffix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Every entry of a keyed snapshot, as a comparable value.
using Entries = std::vector<std::tuple<int32_t, uint16_t, std::string, std::string>>;
Entries entriesOf(const CanonicalSnapshotReader& r) {
  Entries out;
  r.forEachEntry(r.keyGroupRange(),
                 [&](int32_t g, uint16_t s, std::string_view k, std::string_view v) {
                   out.emplace_back(g, s, std::string(k), std::string(v));
                 });
  return out;
}

// What a restore reads from a checkpoint, in a comparable form: operator
// and timer state, coordinator state, and every keyed entry.
std::string describeState(const checkpoint::CompletedCheckpoint& cp) {
  std::string out = std::to_string(cp.id) + "|" + cp.jobId;
  for (const auto& op : cp.operators) {
    out += "|" + op.uid + "|" + op.name + "|" + std::to_string(op.parallelism) + "|" +
           std::to_string(op.maxParallelism) + "|" + op.coordinatorState;
    for (const auto& st : op.subtasks) {
      out += "|" + st.operatorState + "|" + st.timers;
      if (!st.keyed.path.empty()) {
        for (const auto& [g, s, k, v] :
             entriesOf(CanonicalSnapshotReader::fromFile(st.keyed.path))) {
          out += "|" + std::to_string(g) + "/" + std::to_string(s) + "/" + k + "/" + v;
        }
      }
    }
  }
  return out;
}

// The gated running-sum job at parallelism 2, `steps` checkpoints taken at
// gate steps of 500 records per split, then cancelled with its checkpoints
// retained. Returns the job's checkpoint directory.
struct RetainedRun {
  fs::path jobDir;
  std::vector<int64_t> ids;
};
RetainedRun retainedCheckpoints(const TempDir& dir, int steps, Configuration config = {}) {
  StreamExecutionEnvironment env(config);
  env.setParallelism(2);
  env.enableCheckpointing(std::chrono::hours(1));
  env.getCheckpointConfig()
      .setCheckpointStorage(dir.str())
      .setNumRetainedCheckpoints(steps)
      .setExternalizedCheckpointRetention(ExternalizedCheckpointRetention::kRetainOnCancellation);
  auto gate = std::make_shared<SourceGate>();
  const int64_t count = 1'000'000;
  buildGatedRunningSum(env, count, gate, std::make_shared<FaultPlan>(std::vector<Fault>{}));
  JobClient client = env.executeAsync("retained");
  RetainedRun run;
  for (int s = 1; s <= steps; ++s) {
    run.ids.push_back(
        checkpointAtGate(client, *gate, 500 * s, recordsThroughGate(count, 2, 500 * s)));
  }
  client.cancel();
  EXPECT_THROW(client.getJobExecutionResult(), JobExecutionException);
  run.jobDir = dir.path() / client.getJobId();
  return run;
}

fs::path chk(const RetainedRun& run, size_t i) {
  return run.jobDir / ("chk-" + std::to_string(run.ids.at(i)));
}

// ---------------------------------------------------------------------------
// Mutations of real checkpoints

// Random damage: a flipped bit, a byte set, a truncation, bytes appended, a
// zeroed range.
std::string mutate(std::string bytes, std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> pos(0, bytes.size() - 1);
  switch (rng() % 5) {
    case 0: bytes[pos(rng)] ^= static_cast<char>(1u << (rng() % 8)); break;
    case 1: {
      const size_t at = pos(rng);
      const char old = bytes[at];
      do bytes[at] = static_cast<char>(rng());
      while (bytes[at] == old);
      break;
    }
    case 2: bytes.resize(pos(rng)); break;
    case 3: bytes.append(1 + rng() % 64, static_cast<char>(rng())); break;
    default: {
      const size_t at = pos(rng);
      const size_t n = std::min<size_t>(8, bytes.size() - at);
      std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(at), n, '\0');
    }
  }
  return bytes;
}

// Loads and verifies `dir` with the allocation probe armed.
Status loadAndVerify(const fs::path& dir, std::string* state) {
  largestAllocation.store(0);
  armed = true;
  Result<checkpoint::CompletedCheckpoint> cp = checkpoint::loadCheckpoint(dir.string());
  Status st = cp.isOk() ? checkpoint::verifyCheckpoint(cp.value()) : cp.status();
  if (st.isOk() && state != nullptr) *state = describeState(cp.value());
  armed = false;
  return st;
}

TEST(CheckpointFuzzTest, AMutatedCheckpointFailsNamingTheFileOrRestoresTheSameState) {
  TempDir dir("fuzz");
  RetainedRun run = retainedCheckpoints(dir, 1);
  const fs::path cp = chk(run, 0);
  std::string original;
  ASSERT_TRUE(loadAndVerify(cp, &original).isOk());
  std::vector<fs::path> targets = filesNamed(cp, ".keyed");
  ASSERT_EQ(targets.size(), 2u) << "one keyed snapshot per subtask of the sum";
  targets.push_back(cp / "_metadata");
  std::mt19937_64 rng(20261202);
  int sameState = 0;
  for (const fs::path& target : targets) {
    const std::string bytes = readAll(target);
    for (int i = 0; i < 150; ++i) {
      const std::string damaged = mutate(bytes, rng);
      if (damaged == bytes) continue;  // a zeroed range that was zero
      writeAll(target, damaged);
      std::string state;
      Status st = loadAndVerify(cp, &state);
      if (st.isOk()) {
        EXPECT_EQ(state, original) << "mutation " << i << " of " << target << " restored "
                                   << "different state without an error";
        ++sameState;
      } else {
        EXPECT_THAT(st.message(), HasSubstr(target.string())) << "mutation " << i;
        EXPECT_THAT(st.message(), testing::AnyOf(HasSubstr("checksum"), HasSubstr("truncated"),
                                                 HasSubstr("too short"), HasSubstr("footer"),
                                                 HasSubstr("magic"), HasSubstr("end marker")))
            << st.message();
      }
      EXPECT_LE(largestAllocation.load(), 16 * damaged.size() + (1u << 20))
          << "mutation " << i << " of " << target << ": " << st.message();
    }
    writeAll(target, bytes);
  }
  // Every mutation changes bytes a checksum covers.
  EXPECT_EQ(sameState, 0);
}

// The parsers behind the checksums: mutations with the checksums made to
// match again (as a writer bug would) must still fail cleanly or load, never
// crash or allocate without bound.
void refreshMetadataChecksum(std::string& bytes) {
  if (bytes.size() < 20) return;
  const uint64_t sum = checksum64(bytes.data(), bytes.size() - 8);
  for (int i = 0; i < 8; ++i) bytes[bytes.size() - 8 + i] = static_cast<char>(sum >> (8 * i));
}
uint64_t loadU64(const std::string& b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[at + i]);
  return v;
}
void storeU64(std::string& b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<char>(v >> (8 * i));
}
// Damages one byte inside a key-group block of a version-2 keyed snapshot
// and rewrites that block's checksum and the footer's.
bool damageBlockKeepingChecksums(std::string& b, std::mt19937_64& rng) {
  const size_t trailer = b.size() - 32;
  const uint64_t footer = loadU64(b, trailer + 8);
  const size_t blocks = (trailer - 8 - footer) / 16;
  if (blocks == 0) return false;
  const size_t i = rng() % blocks;
  const uint64_t start = loadU64(b, footer + 16 * i);
  const uint64_t end = i + 1 < blocks ? loadU64(b, footer + 16 * (i + 1)) : footer;
  if (end <= start) return false;
  b[start + rng() % (end - start)] ^= static_cast<char>(1 + rng() % 255);
  storeU64(b, footer + 16 * i + 8, checksum64(b.data() + start, end - start));
  storeU64(b, trailer + 16, checksum64(b.data() + footer, trailer + 16 - footer));
  return true;
}

TEST(CheckpointFuzzTest, ParsersBehindTheChecksumsFailCleanlyOnDamagedContent) {
  TempDir dir("fuzz-parse");
  RetainedRun run = retainedCheckpoints(dir, 1);
  const fs::path cp = chk(run, 0);
  std::mt19937_64 rng(7);
  const fs::path metadata = cp / "_metadata";
  const std::string bytes = readAll(metadata);
  for (int i = 0; i < 300; ++i) {
    std::string damaged = bytes;
    const size_t at = 12 + rng() % (bytes.size() - 20);
    damaged[at] = static_cast<char>(rng() % 4 == 0 ? 0xff : rng());
    refreshMetadataChecksum(damaged);
    writeAll(metadata, damaged);
    Status st = loadAndVerify(cp, nullptr);
    if (!st.isOk()) {
      EXPECT_THAT(st.message(), HasSubstr(cp.string())) << "mutation " << i;
    }
    EXPECT_LE(largestAllocation.load(), 16 * damaged.size() + (1u << 20))
        << "mutation " << i << " at byte " << at << ": " << st.message();
  }
  writeAll(metadata, bytes);
  const fs::path keyed = filesNamed(cp, ".keyed").front();
  const std::string keyedBytes = readAll(keyed);
  int failed = 0;
  for (int i = 0; i < 200; ++i) {
    std::string damaged = keyedBytes;
    if (!damageBlockKeepingChecksums(damaged, rng)) continue;
    writeAll(keyed, damaged);
    try {
      armed = true;
      largestAllocation.store(0);
      entriesOf(CanonicalSnapshotReader::fromFile(keyed.string()));
      armed = false;
    } catch (const SerializationError& e) {
      armed = false;
      ++failed;
      EXPECT_THAT(e.what(), HasSubstr(keyed.string()));
    }
    EXPECT_LE(largestAllocation.load(), 16 * damaged.size() + (1u << 20)) << "mutation " << i;
  }
  writeAll(keyed, keyedBytes);
  EXPECT_GT(failed, 0) << "some damage breaks the entry structure";
}

// ---------------------------------------------------------------------------
// Damaged savepoints, damaged checkpoints in a recovery

TEST(CheckpointIntegrityTest, ADamagedSavepointFailsTheSubmissionNamingTheFile) {
  TempDir dir("damaged-savepoint");
  RetainedRun run = retainedCheckpoints(dir, 1);
  const fs::path cp = chk(run, 0);
  const fs::path keyed = filesNamed(cp, ".keyed").front();
  const std::string bytes = readAll(keyed);
  flipByte(keyed, bytes.size() / 2);
  for (int round = 0; round < 2; ++round) {
    Configuration config;
    config.setString("execution.savepoint.path", cp.string());
    StreamExecutionEnvironment env(config);
    env.setParallelism(2);
    buildRunningSum(env, 1000, 0, std::make_shared<FaultPlan>(std::vector<Fault>{}));
    try {
      env.execute("resume from damage");
      FAIL() << "a damaged savepoint must fail the submission";
    } catch (const JobExecutionException& e) {
      if (round == 0) {
        EXPECT_THAT(e.what(), AllOf(HasSubstr(keyed.string()), HasSubstr("checksum"),
                                    HasSubstr("the footer recorded")));
      } else {
        EXPECT_THAT(e.what(),
                    AllOf(HasSubstr((cp / "_metadata").string()), HasSubstr("checksum mismatch")));
      }
    }
    // The second round damages _metadata instead.
    writeAll(keyed, bytes);
    flipByte(cp / "_metadata", 40);
  }
}

// Fails once, the first time `trigger` is set.
struct FailOnce : public MapFunction<Row, Row> {
  explicit FailOnce(std::shared_ptr<std::atomic<bool>> t) : trigger(std::move(t)) {}
  Row map(const Row& r) override {
    if (trigger->exchange(false)) throw std::runtime_error("injected failure");
    return r;
  }
  std::shared_ptr<std::atomic<bool>> trigger;
};

// Running counts may repeat after a fallback restore, but every count of
// every key is there and the state ends right.
void expectAtLeastOnceWithExactState(const std::vector<Row>& rows, int64_t count) {
  // A replayed count may carry another sum (records of a key from two
  // source subtasks interleave differently), except the last one.
  std::map<std::pair<int64_t, int64_t>, Row> byCount;
  for (const Row& r : rows) {
    auto [it, fresh] = byCount.emplace(std::pair{std::get<0>(r), std::get<1>(r)}, r);
    if (!fresh && std::get<1>(r) == expectedTotals(count)[std::get<0>(r)].first) {
      EXPECT_EQ(std::get<2>(it->second), std::get<2>(r)) << "the final sum differs";
    }
  }
  std::vector<Row> unique;
  for (const auto& [k, r] : byCount) unique.push_back(r);
  expectExactlyOnce(unique, count);
}

struct RecoveryRun {
  std::shared_ptr<internal::CollectBuffer<Row>> out;
  std::optional<JobClient> client;
  std::shared_ptr<SourceGate> gate = std::make_shared<SourceGate>();
  std::shared_ptr<std::atomic<bool>> fail = std::make_shared<std::atomic<bool>>(false);
  std::vector<int64_t> ids;
};

// Two retained checkpoints; then `damage` gets the job directory, a failure
// is injected and the job runs to its end.
void runWithDamage(
    RecoveryRun& r, const TempDir& dir, int64_t count,
    const std::function<void(const fs::path&, const std::vector<int64_t>&)>& damage) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  env.enableCheckpointing(std::chrono::hours(1));
  env.getCheckpointConfig().setCheckpointStorage(dir.str()).setNumRetainedCheckpoints(2);
  env.setRestartStrategy(RestartStrategies::fixedDelayRestart(3, milliseconds(0)));
  r.out = buildRunningSumFrom(
      env.fromSource(GatedGeneratorSource(r.gate, input, count), "Generator Source")
          .uid("generator")
          .map(FailOnce(r.fail)),
      std::make_shared<FaultPlan>(std::vector<Fault>{}));
  r.client.emplace(env.executeAsync("damaged recovery"));
  for (int s = 1; s <= 2; ++s) {
    r.ids.push_back(
        checkpointAtGate(*r.client, *r.gate, 500 * s, recordsThroughGate(count, 2, 500 * s)));
  }
  damage(dir.path() / r.client->getJobId(), r.ids);
  r.fail->store(true);
  r.gate->open(1500);
  ASSERT_TRUE(waitUntil([&] { return r.client->getCheckpointStats().restarts >= 1; }));
  r.gate->openFully();
}

TEST(CheckpointIntegrityTest, ARecoverySkipsADamagedCheckpointForTheNextOlderOne) {
  TempDir dir("fallback");
  const int64_t count = 4000;
  RecoveryRun r;
  runWithDamage(r, dir, count, [](const fs::path& job, const std::vector<int64_t>& ids) {
    const fs::path keyed = filesNamed(job / ("chk-" + std::to_string(ids[1])), ".keyed").front();
    flipByte(keyed, readAll(keyed).size() / 2);
  });
  r.client->getJobExecutionResult();
  EXPECT_EQ(r.client->getCheckpointStats().restarts, 1);
  expectAtLeastOnceWithExactState(r.out->take(), count);
}

TEST(CheckpointIntegrityTest, ARecoveryWithEveryCheckpointDamagedFailsTheJob) {
  TempDir dir("all-damaged");
  RecoveryRun r;
  runWithDamage(r, dir, 4000, [](const fs::path& job, const std::vector<int64_t>& ids) {
    for (int64_t id : ids) {
      const fs::path keyed = filesNamed(job / ("chk-" + std::to_string(id)), ".keyed").back();
      flipByte(keyed, readAll(keyed).size() / 3);
    }
  });
  try {
    r.client->getJobExecutionResult();
    FAIL() << "no checkpoint is usable: the job must fail, not restart forever";
  } catch (const JobExecutionException& e) {
    EXPECT_THAT(e.what(),
                AllOf(HasSubstr("no usable checkpoint to restore from"),
                      HasSubstr("chk-" + std::to_string(r.ids[0])),
                      HasSubstr("chk-" + std::to_string(r.ids[1])), HasSubstr("checksum")));
  }
  EXPECT_EQ(r.client->getCheckpointStats().restarts, 1);
}

TEST(CheckpointIntegrityTest, ADamagedFileOfAnIncrementalCheckpointIsNamedWithBothSums) {
  TempDir dir("incremental");
  Configuration config;
  config.setString("state.backend.type", "rocksdb");
  config.setString("state.backend.incremental", "true");
  RetainedRun run = retainedCheckpoints(dir, 2, config);
  const fs::path cp = chk(run, 1);
  Result<checkpoint::CompletedCheckpoint> loaded = checkpoint::loadCheckpoint(cp.string());
  ASSERT_TRUE(loaded.isOk()) << loaded.status().message();
  ASSERT_TRUE(checkpoint::verifyCheckpoint(loaded.value()).isOk());
  // A shared SST file (referred to by both checkpoints), then a private
  // file of the newer one.
  const std::vector<fs::path> ssts = filesNamed(run.jobDir / "shared", ".sst");
  ASSERT_FALSE(ssts.empty());
  std::vector<fs::path> privates;
  for (const auto& e : fs::recursive_directory_iterator(cp)) {
    if (e.is_regular_file() && e.path().filename().string().rfind("MANIFEST", 0) == 0) {
      privates.push_back(e.path());
    }
  }
  ASSERT_FALSE(privates.empty());
  for (const fs::path& damaged : {ssts.front(), privates.front()}) {
    const std::string bytes = readAll(damaged);
    flipByte(damaged, bytes.size() / 2);
    Status st = checkpoint::verifyCheckpoint(loaded.value());
    EXPECT_THAT(st.message(), AllOf(HasSubstr(damaged.string()), HasSubstr("is corrupt"),
                                    HasSubstr("its checksum is 0x"), HasSubstr("recorded 0x")));
    // A restore from it fails the submission the same way.
    Configuration resume = config;
    resume.setString("execution.savepoint.path", cp.string());
    StreamExecutionEnvironment env(resume);
    env.setParallelism(2);
    buildRunningSum(env, 1000, 0, std::make_shared<FaultPlan>(std::vector<Fault>{}));
    try {
      env.execute("resume from a damaged incremental checkpoint");
      ADD_FAILURE() << "expected the submission to fail";
    } catch (const JobExecutionException& e) {
      EXPECT_THAT(e.what(), HasSubstr(damaged.string()));
    }
    writeAll(damaged, bytes);
    // Truncated: the size is checked first.
    writeAll(damaged, bytes.substr(0, bytes.size() - 1));
    EXPECT_THAT(checkpoint::verifyCheckpoint(loaded.value()).message(),
                AllOf(HasSubstr(damaged.string()),
                      HasSubstr("has " + std::to_string(bytes.size() - 1) + " bytes")));
    writeAll(damaged, bytes);
  }
  EXPECT_TRUE(checkpoint::verifyCheckpoint(loaded.value()).isOk());
}

TEST(CheckpointIntegrityTest, ACheckpointThatCannotBeReadNowIsRetriedNotSkipped) {
  TempDir dir("unreadable");
  RecoveryRun r;
  fs::path keyed;
  runWithDamage(r, dir, 4000, [&](const fs::path& job, const std::vector<int64_t>& ids) {
    // A directory where the file was: open() works, read() fails (EISDIR),
    // as an I/O error does, which is not damage.
    keyed = filesNamed(job / ("chk-" + std::to_string(ids[1])), ".keyed").front();
    fs::remove(keyed);
    fs::create_directory(keyed);
  });
  try {
    r.client->getJobExecutionResult();
    FAIL() << "every restart fails to read the checkpoint";
  } catch (const JobExecutionException& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("restart failed"), HasSubstr(keyed.string()),
                                HasSubstr("Is a directory")));
    EXPECT_THAT(e.what(), testing::Not(HasSubstr("no usable checkpoint")));
  }
  // fixed-delay(3): three restarts tried it, none fell back to chk-1.
  EXPECT_EQ(r.client->getCheckpointStats().restarts, 3);
}

// ---------------------------------------------------------------------------
// Unavailable storage

// The error of a checkpoint triggered while no file of the process may grow
// past `bytes` (a full disk); empty when it completed.
std::string checkpointErrorWithFilesUpTo(JobClient& client, uint64_t bytes) {
  test::FileSizeLimit full(bytes);
  try {
    client.triggerCheckpoint();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(CheckpointIntegrityTest, AFullDiskNamesTheFileAndTheOsError) {
  TempDir dir("full");
  StreamExecutionEnvironment env;
  env.setParallelism(1);
  env.enableCheckpointing(std::chrono::hours(1));
  env.getCheckpointConfig().setCheckpointStorage(dir.str()).setTolerableCheckpointFailureNumber(5);
  auto gate = std::make_shared<SourceGate>();
  const int64_t keys = 20000;
  env.fromSource(GatedGeneratorSource(
                     gate, [](int64_t i) { return i; }, 2 * keys),
                 "Keys")
      .uid("keys")
      .keyBy([](int64_t v) { return v % keys; })
      .reduce([](int64_t a, int64_t b) { return a + b; })
      .uid("sum")
      .sinkTo(CollectSink<int64_t>(std::make_shared<internal::CollectBuffer<int64_t>>()))
      .uid("collect");
  JobClient client = env.executeAsync("full disk");
  gate->open(keys);
  ASSERT_TRUE(waitUntil([&] { return gate->emitted() >= keys; }));
  // Files may grow to 16 KiB: the keyed snapshot of 20000 keys cannot.
  const std::string error = checkpointErrorWithFilesUpTo(client, 16 * 1024);
  EXPECT_THAT(error, AllOf(HasSubstr("could not write its state"), HasSubstr(".keyed"),
                           HasSubstr(dir.str()), HasSubstr("File too large")));
  // Space again: the next checkpoint completes.
  EXPECT_GT(client.triggerCheckpoint(), 0);
  client.cancel();
  EXPECT_THROW(client.getJobExecutionResult(), JobExecutionException);
}

// A full disk under the rocksdb backend with incremental checkpoints: the
// checkpoint fails naming the SST file and the OS error (RocksDB's flush
// cannot write), the task then fails at its next state write, since RocksDB
// stopped writing, restarts from the last completed checkpoint and ends
// with every key's sum right. Before RocksDB's log went to Sluice's, its
// LOG file on the same disk made the process abort.
TEST(CheckpointIntegrityTest, AFullDiskUnderRocksDbFailsTheTaskNotTheProcess) {
  TempDir dir("full-rocksdb");
  Configuration config;
  config.set(options::kStateBackendIncremental, true);
  StreamExecutionEnvironment env(config);
  env.setParallelism(1).setStateBackend("rocksdb");
  env.setRestartStrategy(RestartStrategies::fixedDelayRestart(3, milliseconds(0)));
  env.enableCheckpointing(std::chrono::hours(1));
  env.getCheckpointConfig().setCheckpointStorage(dir.str()).setTolerableCheckpointFailureNumber(5);
  auto gate = std::make_shared<SourceGate>();
  const int64_t keys = 20000;
  auto out = std::make_shared<internal::CollectBuffer<std::pair<int64_t, int64_t>>>();
  env.fromSource(GatedGeneratorSource(
                     gate,
                     [](int64_t i) {
                       return std::pair<int64_t, int64_t>{i % keys, i};
                     },
                     2 * keys),
                 "Keys")
      .uid("keys")
      .keyBy([](const std::pair<int64_t, int64_t>& v) { return v.first; })
      .reduce([](std::pair<int64_t, int64_t> a, const std::pair<int64_t, int64_t>& b) {
        a.second += b.second;
        return a;
      })
      .uid("sum")
      .sinkTo(CollectSink<std::pair<int64_t, int64_t>>(out))
      .uid("collect");
  JobClient client = env.executeAsync("full disk under rocksdb");
  gate->open(keys);
  ASSERT_TRUE(waitUntil([&] { return gate->emitted() >= keys; }));
  EXPECT_GT(client.triggerCheckpoint(), 0);
  // Changes since that checkpoint, for the next one to flush.
  gate->open(keys + keys / 2);
  ASSERT_TRUE(waitUntil([&] { return gate->emitted() >= keys + keys / 2; }));
  // The flush of 10000 keys' changes cannot fit in 16 KiB.
  const std::string error = checkpointErrorWithFilesUpTo(client, 16 * 1024);
  EXPECT_THAT(error, AllOf(HasSubstr("Checkpoint 2 failed"), HasSubstr("operator 'Keyed Reduce'"),
                           HasSubstr(".sst"), HasSubstr("File too large")));
  gate->openFully();
  client.getJobExecutionResult();
  EXPECT_EQ(client.getCheckpointStats().restarts, 1);
  // The last sum of key k: k + (k + keys), whatever the restart replayed.
  std::map<int64_t, int64_t> last;
  for (const auto& [key, sum] : out->take()) last[key] = std::max(last[key], sum);
  ASSERT_EQ(last.size(), static_cast<size_t>(keys));
  for (const auto& [key, sum] : last) ASSERT_EQ(sum, 2 * key + keys) << "key " << key;
}

TEST(CheckpointIntegrityTest, AnUnusableCheckpointDirectoryFailsTheSubmissionAtAnyTolerance) {
  TempDir dir("not-a-dir");
  std::ofstream(dir.path() / "a-file") << "not a directory";
  StreamExecutionEnvironment env;
  env.enableCheckpointing(milliseconds(10));
  env.getCheckpointConfig()
      .setCheckpointStorage((dir.path() / "a-file").string())
      .setTolerableCheckpointFailureNumber(std::numeric_limits<int32_t>::max());
  buildRunningSum(env, 100, 0, std::make_shared<FaultPlan>(std::vector<Fault>{}));
  try {
    env.execute("unusable");
    FAIL() << "expected the submission to fail";
  } catch (const JobExecutionException& e) {
    EXPECT_THAT(e.what(),
                AllOf(HasSubstr("state.checkpoints.dir"),
                      HasSubstr((dir.path() / "a-file").string()), HasSubstr("Not a directory")));
  }
}

TEST(CheckpointIntegrityTest, ARestartLoopWithTheSameErrorIsPointedOutOnce) {
  StreamExecutionEnvironment env;
  env.setRestartStrategy(RestartStrategies::fixedDelayRestart(12, milliseconds(0)));
  env.fromSequence(1, 10)
      .uid("numbers")
      .map([](int64_t) -> int64_t { throw std::runtime_error("always the same"); })
      .uid("fail")
      .sinkTo(CollectSink<int64_t>(std::make_shared<internal::CollectBuffer<int64_t>>()))
      .uid("collect");
  testing::internal::CaptureStderr();
  EXPECT_THROW(env.execute("loop"), JobExecutionException);
  const std::string log = testing::internal::GetCapturedStderr();
  const std::string needle = "has failed 10 times in a row with the same error";
  const size_t at = log.find(needle);
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_EQ(log.find(needle, at + 1), std::string::npos) << "logged once";
  EXPECT_THAT(log, HasSubstr("restart-strategy.fixed-delay.attempts"));
}

}  // namespace
}  // namespace checkpoint_integrity_test
}  // namespace sluice::checkpointing
