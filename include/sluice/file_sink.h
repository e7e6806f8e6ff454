// FileSink: exactly-once row-format files, as Flink's FileSink.
//
//   auto sink = sluice::FileSink<Order>::forRowFormat("/data/orders",
//                                                     sluice::JsonLinesEncoder<Order>())
//                   .withRollingPolicy(sluice::DefaultRollingPolicy::builder()
//                                          .withMaxPartSize(64 << 20)
//                                          .withRolloverInterval(std::chrono::minutes(15))
//                                          .build())
//                   .withBucketAssigner(sluice::DateTimeBucketAssigner<Order>("yyyy-MM-dd"))
//                   .withOutputFileConfig("orders", ".jsonl")
//                   .build();
//   orders.sinkTo(sink, "Orders");
//
// Layout. Every element goes to a bucket, a directory below the base path
// named by the BucketAssigner (DateTimeBucketAssigner by default: one
// directory per hour, "2024-05-01--13"). Each subtask writes its own part
// files into the buckets it sees:
//
//   <base>/<bucket>/.<prefix>-<uuid>-<subtask>-<counter>.inprogress   in progress or pending
//   <base>/<bucket>/<prefix>-<uuid>-<subtask>-<counter><suffix>       finished (committed)
//
// <uuid> is new for every writer instance (every start and restart of a
// subtask) and <counter> counts the writer's part files from 0, so names never
// repeat. A part file is "in progress" while it is written, "pending" once it
// was rolled (closed and synced to disk), and "finished" when the checkpoint
// its data belongs to completed: only then is it renamed to its visible name.
// Hidden names (a leading '.') keep readers that skip hidden files (Sluice's
// readTextFile, Flink, Hive, Spark) away from data that may still be rolled
// back.
//
// Rolling: a part file is closed (and a new one started for the next element
// of its bucket) when the RollingPolicy says so, and always at a checkpoint:
//   - DefaultRollingPolicy (the default): once the part holds maxPartSize
//     bytes (checked before each element is written, so a part exceeds the
//     size by at most one element), once it is older than rolloverInterval,
//     or when nothing was written to it for inactivityInterval;
//   - OnCheckpointRollingPolicy: only at checkpoints.
// Time is processing time from the operator's clock; the time limits are
// checked before each element of the bucket is written and by a timer every
// bucket check interval. Unlike Flink's row format, where a DefaultRollingPolicy
// may keep an in-progress file open across checkpoints (resuming it after a
// restore), this sink rolls every part file at every checkpoint: a checkpoint
// interval shorter than the rollover interval gives more, smaller files.
//
// Exactly-once: FileSink is a TwoPhaseCommitSink (<sluice/two_phase_commit.h>)
// whose transaction is the set of part files written between two
// checkpoints. Pre-commit rolls and syncs them, commit renames them (a part
// whose visible file exists and whose hidden file is gone was committed
// already; a part with neither fails the commit, naming both files), abort
// deletes them. After a failure the restored subtasks commit the parts of
// the completed checkpoint and delete every hidden part the failed writer
// created after it. Without checkpointing nothing becomes visible before the
// end of a bounded input. See docs/file-sink.md.
//
// Abandoned files: a writer that dies before a checkpoint naming its files
// completes (a restart attempt that failed early, a killed process) leaves
// hidden files that no checkpoint knows. On every start, fresh or restored,
// each subtask deletes the in-progress files of its base path and part
// prefix, ".<prefix>-<uuid>-<i>-<counter>.inprogress", whose writer the
// restored checkpoint does not name and whose subtask index i is its own
// (i % parallelism, so the indices a smaller parallelism left behind are
// covered too). The sink keeps the names of its writers in a union list
// state (kWritersStateName), so every subtask of a restore knows all of
// them, at any parallelism. Finished files and other names are never
// touched. A restore from a checkpoint of a version without that state
// deletes no abandoned files (the next restore does). The sink assumes it
// is the only writer of its base path with its part prefix: two sinks or
// jobs sharing a base path need different part prefixes.
//
// Paths: a relative base path is made absolute (against the working
// directory) when forRowFormat() is called, and checkpoints hold absolute
// paths, so a restore from another working directory commits the same files.
//
// Errors: invalid options throw SluiceException when the builder is called;
// a base path that cannot be created or written fails the task at start with
// "FileSink: ... '<path>': <strerror>"; I/O errors fail the task the same way
// (the job restarts from its last checkpoint; nothing is lost silently).
//
// Threads: the sink, its encoder, bucket assigner and rolling policy are
// shared by all subtasks and must be safe to call from several threads at
// once (all built-in ones are); each subtask's writer runs on its task
// thread.
#pragma once

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ranges>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <sluice/core/serializer.h>
#include <sluice/core/status.h>
#include <sluice/format.h>
#include <sluice/sink.h>
#include <sluice/two_phase_commit.h>

namespace sluice {

// ---------------------------------------------------------------------------
// Encoders: how one element becomes bytes in a part file.

// Appends the bytes of one element (with its line or row terminator) to
// `out`. Called from several subtasks' threads at once.
template <class T>
class Encoder {
 public:
  virtual ~Encoder() = default;
  virtual void encode(const T& element, std::string& out) const = 0;
};

// sluice::toString(element) and "\n" per element (Flink's SimpleStringEncoder).
template <class T>
class SimpleStringEncoder final : public Encoder<T> {
 public:
  void encode(const T& element, std::string& out) const override {
    appendTo(out, element);
    out += '\n';
  }
};

namespace internal {

// Quotes the CSV field that starts at out[start] as RFC 4180 says, when it
// contains `fieldDelimiter`, `rowDelimiter`, '"', '\r' or '\n': surrounds it
// with '"' and doubles every '"' inside.
void quoteCsvField(std::string& out, size_t start, std::string_view fieldDelimiter,
                   std::string_view rowDelimiter);

// Appends `s` as a JSON string: quoted, with '"', '\\' and the control
// characters escaped. Throws SluiceException when `s` is not valid UTF-8.
void appendJsonString(std::string& out, std::string_view s);

template <class T>
struct IsCsvRow : std::false_type {};
template <class A, class B>
struct IsCsvRow<std::pair<A, B>> : std::true_type {};
template <class... Ts>
struct IsCsvRow<std::tuple<Ts...>> : std::true_type {};

template <class>
inline constexpr bool kJsonAlwaysFalse = false;

template <class V>
void appendJson(std::string& out, const V& value);

// A JSON string holding toString(value).
template <class V>
void appendJsonText(std::string& out, const V& value) {
  std::string text;
  appendTo(text, value);
  appendJsonString(out, text);
}

template <class V>
void appendJson(std::string& out, const V& value) {
  using U = std::remove_cvref_t<V>;
  if constexpr (std::is_same_v<U, bool>) {
    out += value ? "true" : "false";
  } else if constexpr (std::is_same_v<U, char>) {
    appendJsonString(out, std::string_view(&value, 1));
  } else if constexpr (std::is_integral_v<U>) {
    appendInteger(out, value);
  } else if constexpr (std::is_floating_point_v<U>) {
    if (std::isfinite(value)) {
      appendJavaFloatingPoint(out, value);  // "1.0", "1.0E-5": valid JSON numbers
    } else {
      out += '"';  // JSON has no NaN or infinities: "NaN", "Infinity", "-Infinity"
      appendJavaFloatingPoint(out, value);
      out += '"';
    }
  } else if constexpr (HasToStringMember<U>) {
    appendJsonString(out, value.toString());
  } else if constexpr (std::is_enum_v<U> && !HasStreamOperator<U>) {
    appendInteger(out, static_cast<std::underlying_type_t<U>>(value));
  } else if constexpr (StringLike<U>) {
    appendJsonString(out, std::string_view(value));
  } else if constexpr (IsOptional<U>::value) {
    if (value) {
      appendJson(out, *value);
    } else {
      out += "null";
    }
  } else if constexpr (IsPair<U>::value) {
    out += '[';
    appendJson(out, value.first);
    out += ',';
    appendJson(out, value.second);
    out += ']';
  } else if constexpr (IsTuple<U>::value) {
    out += '[';
    std::apply(
        [&](const auto&... fields) {
          bool first = true;
          ((out += (first ? "" : ","), first = false, appendJson(out, fields)), ...);
        },
        value);
    out += ']';
  } else if constexpr (MapLike<U>) {
    // Keys become JSON strings: their text form when they are not strings.
    out += '{';
    bool first = true;
    for (const auto& [k, v] : value) {
      if (!first) out += ',';
      first = false;
      if constexpr (StringLike<std::remove_cvref_t<decltype(k)>>) {
        appendJsonString(out, std::string_view(k));
      } else {
        appendJsonText(out, k);
      }
      out += ':';
      appendJson(out, v);
    }
    out += '}';
  } else if constexpr (std::ranges::range<const U>) {
    out += '[';
    bool first = true;
    for (const auto& e : value) {
      if (!first) out += ',';
      first = false;
      appendJson(out, e);
    }
    out += ']';
  } else if constexpr (SluiceStruct<U>) {
    out += '{';
    bool first = true;
    forEachField(value, [&](std::string_view name, const auto& field) {
      if (!first) out += ',';
      first = false;
      appendJsonString(out, name);
      out += ':';
      appendJson(out, field);
    });
    out += '}';
  } else if constexpr (HasStreamOperator<U>) {
    appendJsonText(out, value);
  } else {
    static_assert(kJsonAlwaysFalse<U>,
                  "JsonLinesEncoder: no JSON form for this type. Accepted: bool, integers, "
                  "float/double, char, strings, enums, std::optional, std::pair, std::tuple, "
                  "ranges, maps, SLUICE_STRUCT types, and types with toString() or operator<<");
  }
}

}  // namespace internal

// One CSV row per element: a column per field of a std::pair, std::tuple or
// SLUICE_STRUCT (in declared order), each field's toString text, joined by
// `fieldDelimiter` and ended by `rowDelimiter`. Unlike writeAsCsv, a field
// that contains a delimiter, a '"' or a line break is quoted as RFC 4180
// says, so every row reads back unambiguously. No header row.
template <class T>
class CsvEncoder final : public Encoder<T> {
  static_assert(internal::IsCsvRow<T>::value || SluiceStruct<T>,
                "CsvEncoder: the element type must be a std::pair, a std::tuple or a "
                "SLUICE_STRUCT type (one CSV column per field); use SimpleStringEncoder or map "
                "to a tuple first");

 public:
  // Throws SluiceException when a delimiter is empty or they are equal.
  explicit CsvEncoder(std::string fieldDelimiter = ",", std::string rowDelimiter = "\n")
      : fieldDelimiter_(std::move(fieldDelimiter)), rowDelimiter_(std::move(rowDelimiter)) {
    if (fieldDelimiter_.empty() || rowDelimiter_.empty()) {
      throw SluiceException("CsvEncoder: the field and row delimiters must not be empty");
    }
    if (fieldDelimiter_ == rowDelimiter_) {
      throw SluiceException("CsvEncoder: the field and row delimiters must differ");
    }
    if (fieldDelimiter_.find('"') != std::string::npos ||
        rowDelimiter_.find('"') != std::string::npos) {
      throw SluiceException("CsvEncoder: a delimiter must not contain '\"' (the quote character)");
    }
  }

  void encode(const T& element, std::string& out) const override {
    bool first = true;
    auto field = [&](const auto& f) {
      if (!first) out += fieldDelimiter_;
      first = false;
      const size_t start = out.size();
      appendTo(out, f);
      internal::quoteCsvField(out, start, fieldDelimiter_, rowDelimiter_);
    };
    if constexpr (SluiceStruct<T>) {
      forEachField(element, [&](std::string_view, const auto& f) { field(f); });
    } else {
      std::apply([&](const auto&... fs) { (field(fs), ...); }, element);
    }
    out += rowDelimiter_;
  }

 private:
  std::string fieldDelimiter_;
  std::string rowDelimiter_;
};

// One JSON document per line (JSON Lines): a SLUICE_STRUCT becomes an object
// with its field names, pairs, tuples and ranges arrays, maps objects (keys
// as text), optionals their value or null, strings escaped strings (the
// element fails with SluiceException when a string is not valid UTF-8).
// Floating-point numbers print as in Java ("1.0", "2.5E-7"); NaN and the
// infinities, which JSON lacks, become the strings "NaN", "Infinity",
// "-Infinity". Integers print in full, even beyond 2^53.
template <class T>
class JsonLinesEncoder final : public Encoder<T> {
 public:
  void encode(const T& element, std::string& out) const override {
    internal::appendJson(out, element);
    out += '\n';
  }
};

// ---------------------------------------------------------------------------
// Buckets: which directory below the base path an element goes to.

// What a BucketAssigner may look at besides the element.
class BucketContext {
 public:
  virtual ~BucketContext() = default;
  // The operator's processing time, in milliseconds since the epoch.
  virtual int64_t currentProcessingTime() const = 0;
  virtual int64_t currentWatermark() const = 0;
  // The element's timestamp, or nullopt when it has none.
  virtual std::optional<int64_t> timestamp() const = 0;
};

// Names the bucket of each element: a relative directory below the base path
// ("" for the base path itself, "a/b" for nested directories). Absolute paths
// and "." or ".." components fail the task. Called from several subtasks'
// threads at once.
template <class T>
class BucketAssigner {
 public:
  using Context = BucketContext;
  virtual ~BucketAssigner() = default;
  virtual std::string getBucketId(const T& element, const BucketContext& context) const = 0;
};

namespace internal {

// A Java DateTimeFormatter pattern, translated to strftime at construction.
class DateTimeFormat {
 public:
  // Throws SluiceException naming an unsupported letter or a bad quote.
  DateTimeFormat(const std::string& javaPattern, std::chrono::minutes utcOffset);
  // The time `epochMillis` (shifted by the offset) in the pattern.
  std::string format(int64_t epochMillis) const;
  const std::string& strftimePattern() const { return strftime_; }

 private:
  std::string java_;
  std::string strftime_;
  int64_t offsetSeconds_;
};

}  // namespace internal

// One bucket per processing-time period, named by `formatString`, a Java
// DateTimeFormatter pattern as in Flink (default "yyyy-MM-dd--HH": one
// directory per hour). Supported letters: yyyy (year), yy (two-digit year),
// MM (month), dd (day of month), HH (hour 0-23), mm (minute), ss (second);
// any other character is copied as is, text in single quotes is literal and
// '' is a quote. The time is UTC shifted by `utcOffset` (Flink uses the
// system's zone; pass the offset you want, e.g. std::chrono::hours(2)), at
// most 18 hours either way. An unsupported letter, an unterminated quote or
// an empty pattern throws SluiceException at construction.
template <class T>
class DateTimeBucketAssigner final : public BucketAssigner<T> {
 public:
  static constexpr const char* kDefaultFormatString = "yyyy-MM-dd--HH";

  explicit DateTimeBucketAssigner(std::string formatString = kDefaultFormatString,
                                  std::chrono::minutes utcOffset = std::chrono::minutes(0))
      : format_(std::make_shared<const internal::DateTimeFormat>(formatString, utcOffset)) {}
  explicit DateTimeBucketAssigner(std::chrono::minutes utcOffset)
      : DateTimeBucketAssigner(kDefaultFormatString, utcOffset) {}

  std::string getBucketId(const T&, const BucketContext& context) const override {
    return format_->format(context.currentProcessingTime());
  }

 private:
  std::shared_ptr<const internal::DateTimeFormat> format_;
};

// Every element into the base path itself.
template <class T>
class BasePathBucketAssigner final : public BucketAssigner<T> {
 public:
  std::string getBucketId(const T&, const BucketContext&) const override { return {}; }
};

// ---------------------------------------------------------------------------
// Rolling: when a part file is closed and the next one started.

// The part file a rolling policy decides about.
struct PartFileInfo {
  std::string_view bucketId;
  int64_t creationTime = 0;    // processing time the file was opened
  int64_t lastUpdateTime = 0;  // processing time of the last element written
  int64_t size = 0;            // bytes written so far
};

// Part files always roll at checkpoints; a policy adds when else to roll.
// Called from several subtasks' threads at once.
class RollingPolicy {
 public:
  virtual ~RollingPolicy() = default;
  // Before an element is written to `part`.
  virtual bool shouldRollOnEvent(const PartFileInfo& part) const = 0;
  // Before an element is written to `part` and on every bucket check.
  virtual bool shouldRollOnProcessingTime(const PartFileInfo& part, int64_t currentTime) const = 0;
};

// Rolls by size, age and inactivity (Flink's DefaultRollingPolicy).
class DefaultRollingPolicy final : public RollingPolicy {
 public:
  static constexpr int64_t kDefaultMaxPartSize = int64_t{128} << 20;
  static constexpr std::chrono::milliseconds kDefaultRolloverInterval{60'000};
  static constexpr std::chrono::milliseconds kDefaultInactivityInterval{60'000};

  class PolicyBuilder;

  DefaultRollingPolicy() = default;
  static PolicyBuilder builder();

  bool shouldRollOnEvent(const PartFileInfo& part) const override {
    return part.size >= maxPartSize_;
  }
  bool shouldRollOnProcessingTime(const PartFileInfo& part, int64_t currentTime) const override {
    return currentTime - part.creationTime >= rolloverInterval_ ||
           currentTime - part.lastUpdateTime >= inactivityInterval_;
  }

  int64_t getMaxPartSize() const { return maxPartSize_; }
  std::chrono::milliseconds getRolloverInterval() const {
    return std::chrono::milliseconds(rolloverInterval_);
  }
  std::chrono::milliseconds getInactivityInterval() const {
    return std::chrono::milliseconds(inactivityInterval_);
  }

 private:
  int64_t maxPartSize_ = kDefaultMaxPartSize;
  int64_t rolloverInterval_ = kDefaultRolloverInterval.count();
  int64_t inactivityInterval_ = kDefaultInactivityInterval.count();
};

class DefaultRollingPolicy::PolicyBuilder {
 public:
  // Rolls once a part holds at least `bytes` bytes. Must be > 0.
  // Default: 128 MiB.
  PolicyBuilder& withMaxPartSize(int64_t bytes) {
    if (bytes <= 0) {
      throw SluiceException("DefaultRollingPolicy: maxPartSize must be > 0, got " +
                            std::to_string(bytes));
    }
    policy_.maxPartSize_ = bytes;
    return *this;
  }
  // Rolls a part once it was opened this long ago. Must be > 0.
  // Default: 60 s.
  PolicyBuilder& withRolloverInterval(std::chrono::milliseconds interval) {
    policy_.rolloverInterval_ = positive("rolloverInterval", interval);
    return *this;
  }
  // Rolls a part once nothing was written to it for this long. Must be > 0.
  // Default: 60 s.
  PolicyBuilder& withInactivityInterval(std::chrono::milliseconds interval) {
    policy_.inactivityInterval_ = positive("inactivityInterval", interval);
    return *this;
  }
  DefaultRollingPolicy build() const { return policy_; }

 private:
  static int64_t positive(const char* what, std::chrono::milliseconds interval) {
    if (interval.count() <= 0) {
      throw SluiceException(std::string("DefaultRollingPolicy: ") + what + " must be > 0 ms, got " +
                            std::to_string(interval.count()));
    }
    return interval.count();
  }
  DefaultRollingPolicy policy_;
};

inline DefaultRollingPolicy::PolicyBuilder DefaultRollingPolicy::builder() {
  return PolicyBuilder();
}

// Rolls only at checkpoints (Flink's OnCheckpointRollingPolicy).
class OnCheckpointRollingPolicy final : public RollingPolicy {
 public:
  static OnCheckpointRollingPolicy build() { return {}; }
  bool shouldRollOnEvent(const PartFileInfo&) const override { return false; }
  bool shouldRollOnProcessingTime(const PartFileInfo&, int64_t) const override { return false; }
};

// Names of the part files: "<partPrefix>-<uuid>-<subtask>-<counter><partSuffix>".
struct OutputFileConfig {
  // Must not be empty, start with '.' or contain '/'. Default: "part".
  std::string partPrefix = "part";
  // Must not contain '/'. Default: "" (none).
  std::string partSuffix;
};

// ---------------------------------------------------------------------------
// The transaction: checkpointed as part of the sink's operator state.

// One part file: where it is written, and its visible name once committed.
struct FileSinkPart {
  std::string inProgressPath;
  std::string finalPath;
};
SLUICE_STRUCT(FileSinkPart, inProgressPath, finalPath)

// The part files one writer created between two checkpoints.
struct FileSinkTransaction {
  std::string basePath;
  // Every in-progress file of the writer is "<bucket dir>/<inProgressPrefix>
  // <counter>.inprogress"; this transaction's have counter >= firstCounter.
  std::string inProgressPrefix;
  int64_t firstCounter = 0;
  std::vector<FileSinkPart> parts;
};
SLUICE_STRUCT(FileSinkTransaction, basePath, inProgressPrefix, firstCounter, parts)

namespace internal {

// The union list state naming the writer of every subtask (its in-progress
// prefix, ".<prefix>-<uuid>-<subtask>-") at each checkpoint.
inline constexpr const char* kFileSinkWritersStateName = "file-sink-writers";

// `basePath` made absolute against the working directory (a relative path
// is also normalized lexically). Throws SluiceException naming it and the
// reason when the working directory cannot be read.
std::string absoluteBasePath(const std::string& basePath);

struct FileSinkOptions {
  std::string basePath;  // absolute
  OutputFileConfig fileConfig;
  std::shared_ptr<const RollingPolicy> rollingPolicy;
  int64_t bucketCheckIntervalMs = 60'000;
};

// The untyped part of one subtask's FileSink: buckets, part files, I/O, the
// transaction hooks. Task thread only.
class FileSinkRuntime {
 public:
  explicit FileSinkRuntime(std::shared_ptr<const FileSinkOptions> options);
  ~FileSinkRuntime();
  FileSinkRuntime(const FileSinkRuntime&) = delete;
  FileSinkRuntime& operator=(const FileSinkRuntime&) = delete;

  // Before open(), when the sink runs in a sink operator: registers the
  // union list state of writer names and reads the restored checkpoint's.
  void initializeWriterState(OperatorStateBackend& state, bool restored);
  // After every snapshot of the two-phase-commit writer: names this writer.
  void snapshotWriterState();

  // Creates the base path (throws SluiceException naming it and strerror),
  // names this writer, and starts the bucket-check timer.
  void open(WriterInitContext& context);
  int64_t currentTime() const { return context_->clock().currentTimeMillis(); }

  // The first call (after every recoverAndCommit/recoverAndAbort of a
  // restore) also deletes abandoned in-progress files; see the top of
  // <sluice/file_sink.h>.
  FileSinkTransaction beginTransaction();
  // The buffer to append the next element of `bucketId` to; opens or rolls
  // the bucket's part file first as the rolling policy says. Call written()
  // after appending.
  std::string& partBuffer(FileSinkTransaction& txn, const std::string& bucketId, int64_t now);
  void written(int64_t now);

  void preCommit(FileSinkTransaction& txn);
  void commit(const FileSinkTransaction& txn);
  // `open`: the writer's current transaction (its files may be open).
  void abort(const FileSinkTransaction& txn, bool open);
  void recoverAndCommit(const FileSinkTransaction& txn);
  void recoverAndAbort(const FileSinkTransaction& txn);
  void close();

  // Rolls every part file the policy finds too old or inactive at `now`.
  void checkBuckets(int64_t now);

 private:
  struct Bucket;
  class PartFile;

  Bucket& bucket(const std::string& bucketId);
  void roll(Bucket& b);
  void onTimer(int64_t timestamp);
  void scheduleCheck(int64_t now);
  void deleteAbandonedFiles();

  // What a restored open transaction's writer may have left after it.
  struct AbortedWriter {
    std::string basePath;
    std::string inProgressPrefix;
    int64_t firstCounter = 0;
  };

  std::shared_ptr<const FileSinkOptions> options_;
  WriterInitContext* context_ = nullptr;
  std::string inProgressPrefix_;  // ".<prefix>-<uuid>-<subtask>-"
  std::string finalPrefix_;       // "<prefix>-<uuid>-<subtask>-"
  int64_t nextCounter_ = 0;
  std::map<std::string, std::unique_ptr<Bucket>> buckets_;  // with an open part file
  Bucket* active_ = nullptr;                                // partBuffer()'s last
  std::shared_ptr<bool> alive_;                             // timers check it
  ListState<std::string>* writersState_ = nullptr;          // null outside a sink operator
  bool restored_ = false;
  std::set<std::string> knownWriters_;  // in-progress prefixes the restored checkpoint names
  std::vector<AbortedWriter> aborted_;  // from recoverAndAbort()
  bool started_ = false;                // beginTransaction() ran
};

// FileSink's writer: the two-phase-commit writer, plus the union list state
// that names every subtask's writer (FileSinkRuntime::initializeWriterState).
template <class T>
class FileSinkWriter final : public SinkWriter<T>, public CheckpointedSinkWriter {
 public:
  using Inner = TwoPhaseCommitWriter<T, FileSinkTransaction>;
  FileSinkWriter(std::unique_ptr<Inner> writer, FileSinkRuntime& runtime)
      : writer_(std::move(writer)), runtime_(runtime) {}

  void write(const T& element, const SinkWriterContext& context) override {
    writer_->write(element, context);
  }
  void flush(bool endOfInput) override { writer_->flush(endOfInput); }
  void close() override { writer_->close(); }
  void initializeState(OperatorStateBackend& state, bool restored) override {
    runtime_.initializeWriterState(state, restored);
    writer_->initializeState(state, restored);
  }
  void snapshotState(int64_t checkpointId) override {
    writer_->snapshotState(checkpointId);
    runtime_.snapshotWriterState();
  }
  void notifyCheckpointComplete(int64_t checkpointId) override {
    writer_->notifyCheckpointComplete(checkpointId);
  }

 private:
  std::unique_ptr<Inner> writer_;  // owns the FileSink clone, which owns runtime_
  FileSinkRuntime& runtime_;
};

template <class T, class F>
class LambdaBucketAssigner final : public BucketAssigner<T> {
 public:
  explicit LambdaBucketAssigner(F f) : f_(std::move(f)) {}
  std::string getBucketId(const T& element, const BucketContext& context) const override {
    if constexpr (std::is_invocable_v<const F&, const T&, const BucketContext&>) {
      return std::string(f_(element, context));
    } else {
      return std::string(f_(element));
    }
  }

 private:
  F f_;
};

template <class T, class F>
class LambdaEncoder final : public Encoder<T> {
 public:
  explicit LambdaEncoder(F f) : f_(std::move(f)) {}
  void encode(const T& element, std::string& out) const override { f_(element, out); }

 private:
  F f_;
};

}  // namespace internal

// The sink. Build it with forRowFormat(); see the top of this file.
template <class T>
class FileSink final : public TwoPhaseCommitSink<T, FileSinkTransaction> {
  using Base = TwoPhaseCommitSink<T, FileSinkTransaction>;

 public:
  class RowFormatBuilder;

  // The union list state, besides the two of TwoPhaseCommitSink, that names
  // the writer of each subtask in every checkpoint.
  static constexpr const char* kWritersStateName = internal::kFileSinkWritersStateName;

  // Starts a builder for `basePath` (created when the job starts if missing;
  // a relative path is resolved against the working directory now) with
  // `encoder`: an Encoder<T> (SimpleStringEncoder, CsvEncoder,
  // JsonLinesEncoder or your own), a shared_ptr to one, or a callable
  // `void(const T&, std::string& out)` that appends the element's bytes.
  template <class E>
  static RowFormatBuilder forRowFormat(std::string basePath, E encoder) {
    return RowFormatBuilder(std::move(basePath), makeEncoder(std::move(encoder)));
  }

  // Copies the configuration only (each subtask runs its own copy).
  FileSink(const FileSink& other)
      : Base(other),
        options_(other.options_),
        encoder_(other.encoder_),
        assigner_(other.assigner_) {}
  FileSink& operator=(const FileSink&) = delete;

  // Absolute: forRowFormat() resolved a relative path.
  const std::string& basePath() const { return options_->basePath; }

  // A clone of this prototype for the subtask, run by a FileSinkWriter.
  std::unique_ptr<SinkWriter<T>> createWriter(WriterInitContext& context) const override {
    auto instance = std::make_unique<FileSink>(*this);
    instance->runtime_ = std::make_unique<internal::FileSinkRuntime>(options_);
    internal::FileSinkRuntime& runtime = *instance->runtime_;
    auto writer = std::make_unique<internal::TwoPhaseCommitWriter<T, FileSinkTransaction>>(
        std::move(instance), context);
    return internal::makeOwned<internal::FileSinkWriter<T>>(std::move(writer), runtime);
  }
  const OutputFileConfig& outputFileConfig() const { return options_->fileConfig; }

 protected:
  std::unique_ptr<Base> clone() const override { return std::make_unique<FileSink>(*this); }

  void open(WriterInitContext& context) override {
    if (!runtime_) runtime_ = std::make_unique<internal::FileSinkRuntime>(options_);
    runtime_->open(context);
  }
  FileSinkTransaction beginTransaction() override { return runtime_->beginTransaction(); }
  void invoke(FileSinkTransaction& txn, const T& value, const SinkWriterContext& context) override {
    const int64_t now = runtime_->currentTime();
    const Context bucketContext(now, context);
    const std::string bucketId = assigner_->getBucketId(value, bucketContext);
    std::string& out = runtime_->partBuffer(txn, bucketId, now);
    encoder_->encode(value, out);
    runtime_->written(now);
  }
  void preCommit(FileSinkTransaction& txn) override { runtime_->preCommit(txn); }
  void commit(const FileSinkTransaction& txn) override { runtime_->commit(txn); }
  void abort(const FileSinkTransaction& txn) override {
    runtime_->abort(txn, &txn == this->currentTransaction());
  }
  void recoverAndCommit(const FileSinkTransaction& txn) override {
    runtime_->recoverAndCommit(txn);
  }
  void recoverAndAbort(const FileSinkTransaction& txn) override { runtime_->recoverAndAbort(txn); }
  void close() override {
    if (runtime_) runtime_->close();
  }

 private:
  class Context final : public BucketContext {
   public:
    Context(int64_t now, const SinkWriterContext& writer) : now_(now), writer_(writer) {}
    int64_t currentProcessingTime() const override { return now_; }
    int64_t currentWatermark() const override { return writer_.currentWatermark(); }
    std::optional<int64_t> timestamp() const override { return writer_.timestamp(); }

   private:
    int64_t now_;
    const SinkWriterContext& writer_;
  };

  FileSink(std::shared_ptr<const internal::FileSinkOptions> options,
           std::shared_ptr<const Encoder<T>> encoder,
           std::shared_ptr<const BucketAssigner<T>> assigner)
      : options_(std::move(options)),
        encoder_(std::move(encoder)),
        assigner_(std::move(assigner)) {}

  template <class E>
  static std::shared_ptr<const Encoder<T>> makeEncoder(E encoder) {
    if constexpr (std::is_convertible_v<E, std::shared_ptr<const Encoder<T>>>) {
      std::shared_ptr<const Encoder<T>> e = std::move(encoder);
      if (!e) throw SluiceException("FileSink.forRowFormat: the encoder is null");
      return e;
    } else if constexpr (std::is_base_of_v<Encoder<T>, E>) {
      return std::make_shared<const E>(std::move(encoder));
    } else {
      static_assert(std::is_invocable_v<const E&, const T&, std::string&>,
                    "FileSink.forRowFormat: the encoder must be an Encoder<T>, a shared_ptr to "
                    "one, or a callable void(const T&, std::string& out)");
      return std::make_shared<const internal::LambdaEncoder<T, E>>(std::move(encoder));
    }
  }

  std::shared_ptr<const internal::FileSinkOptions> options_;
  std::shared_ptr<const Encoder<T>> encoder_;
  std::shared_ptr<const BucketAssigner<T>> assigner_;
  std::unique_ptr<internal::FileSinkRuntime> runtime_;  // per subtask clone
};

// Flink's FileSink.RowFormatBuilder. Every option is checked when it is set.
template <class T>
class FileSink<T>::RowFormatBuilder {
 public:
  RowFormatBuilder(std::string basePath, std::shared_ptr<const Encoder<T>> encoder)
      : encoder_(std::move(encoder)) {
    if (basePath.empty()) throw SluiceException("FileSink.forRowFormat: the base path is empty");
    options_.basePath = internal::absoluteBasePath(basePath);
    options_.rollingPolicy = std::make_shared<const DefaultRollingPolicy>();
  }

  // When to roll part files besides checkpoints: a DefaultRollingPolicy,
  // OnCheckpointRollingPolicy, your own RollingPolicy or a shared_ptr to one.
  // Default: DefaultRollingPolicy() (128 MiB, 60 s, 60 s).
  template <class P>
  RowFormatBuilder& withRollingPolicy(P policy) {
    if constexpr (std::is_convertible_v<P, std::shared_ptr<const RollingPolicy>>) {
      std::shared_ptr<const RollingPolicy> p = std::move(policy);
      if (!p) throw SluiceException("FileSink.withRollingPolicy: the policy is null");
      options_.rollingPolicy = std::move(p);
    } else {
      static_assert(std::is_base_of_v<RollingPolicy, P>,
                    "FileSink.withRollingPolicy: pass a RollingPolicy or a shared_ptr to one");
      options_.rollingPolicy = std::make_shared<const P>(std::move(policy));
    }
    return *this;
  }

  // Which bucket (directory) each element goes to: a BucketAssigner<T>
  // (DateTimeBucketAssigner, BasePathBucketAssigner, your own), a shared_ptr
  // to one, or a callable returning the bucket id from `(const T&)` or
  // `(const T&, const BucketContext&)`.
  // Default: DateTimeBucketAssigner<T>() ("yyyy-MM-dd--HH", UTC).
  template <class A>
  RowFormatBuilder& withBucketAssigner(A assigner) {
    if constexpr (std::is_convertible_v<A, std::shared_ptr<const BucketAssigner<T>>>) {
      std::shared_ptr<const BucketAssigner<T>> a = std::move(assigner);
      if (!a) throw SluiceException("FileSink.withBucketAssigner: the assigner is null");
      assigner_ = std::move(a);
    } else if constexpr (std::is_base_of_v<BucketAssigner<T>, A>) {
      assigner_ = std::make_shared<const A>(std::move(assigner));
    } else {
      static_assert(std::is_invocable_v<const A&, const T&, const BucketContext&> ||
                        std::is_invocable_v<const A&, const T&>,
                    "FileSink.withBucketAssigner: pass a BucketAssigner<T>, a shared_ptr to "
                    "one, or a callable returning the bucket id from (const T&) or "
                    "(const T&, const BucketContext&)");
      assigner_ = std::make_shared<const internal::LambdaBucketAssigner<T, A>>(std::move(assigner));
    }
    return *this;
  }

  // Part file names. Default: prefix "part", no suffix.
  RowFormatBuilder& withOutputFileConfig(OutputFileConfig config) {
    if (config.partPrefix.empty()) {
      throw SluiceException("FileSink.withOutputFileConfig: the part prefix is empty");
    }
    if (config.partPrefix.front() == '.') {
      throw SluiceException("FileSink.withOutputFileConfig: the part prefix '" + config.partPrefix +
                            "' starts with '.', which would hide finished files");
    }
    for (const std::string* s : {&config.partPrefix, &config.partSuffix}) {
      if (s->find('/') != std::string::npos || s->find('\0') != std::string::npos) {
        throw SluiceException("FileSink.withOutputFileConfig: '" + *s +
                              "' contains '/' or NUL; part prefix and suffix name files, "
                              "not directories");
      }
    }
    options_.fileConfig = std::move(config);
    return *this;
  }
  RowFormatBuilder& withOutputFileConfig(std::string partPrefix, std::string partSuffix) {
    return withOutputFileConfig(OutputFileConfig{std::move(partPrefix), std::move(partSuffix)});
  }

  // How often part files are checked against the rolling policy's time
  // limits between elements. Must be > 0. Default: 60 s.
  RowFormatBuilder& withBucketCheckInterval(std::chrono::milliseconds interval) {
    if (interval.count() <= 0) {
      throw SluiceException("FileSink.withBucketCheckInterval: the interval must be > 0 ms, got " +
                            std::to_string(interval.count()));
    }
    options_.bucketCheckIntervalMs = interval.count();
    return *this;
  }

  FileSink<T> build() const {
    std::shared_ptr<const BucketAssigner<T>> assigner =
        assigner_ ? assigner_ : std::make_shared<const DateTimeBucketAssigner<T>>();
    return FileSink<T>(std::make_shared<const internal::FileSinkOptions>(options_), encoder_,
                       std::move(assigner));
  }

 private:
  internal::FileSinkOptions options_;
  std::shared_ptr<const Encoder<T>> encoder_;
  std::shared_ptr<const BucketAssigner<T>> assigner_;
};

}  // namespace sluice
