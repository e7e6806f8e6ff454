#include "runtime/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include <sluice/core/config_options.h>
#include <sluice/core/serializer.h>
#include <sluice/core/status.h>

namespace sluice::runtime {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[] = "SLUICECP";
constexpr char kEndMagic[] = "SLUICEND";
// Version 2 added native (incremental) keyed snapshots; version 1 files
// still load.
constexpr uint32_t kVersion = 2;

enum class KeyedKind : uint8_t { kNone = 0, kFile = 1, kBytes = 2, kNative = 3 };

std::string errnoText(int err) { return std::strerror(err); }

// The file name of `path` when it lies directly in `directory`.
std::string relativeTo(const std::string& directory, const std::string& path) {
  fs::path p(path);
  if (p.parent_path() != fs::path(directory)) {
    throw SluiceException(fmt::format(
        "checkpoint file '{}' does not lie in the checkpoint directory '{}'", path, directory));
  }
  return p.filename().string();
}

// A count of entries that each take at least one byte.
uint32_t readCount(DataInputView& view) {
  const uint32_t n = view.readU32();
  if (n > view.remaining()) {
    throw SluiceException(fmt::format("a count of {} entries exceeds the bytes left", n));
  }
  return n;
}

void writeAll(int fd, const std::string& bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SluiceException(fmt::format("cannot write '{}': {}", path, errnoText(errno)));
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

const OperatorCheckpointState* CompletedCheckpoint::find(const std::string& uid) const {
  for (const auto& op : operators) {
    if (op.uid == uid) return &op;
  }
  return nullptr;
}

std::string CompletedCheckpoint::describe() const {
  const char* what = type == CheckpointType::kSavepoint ? "savepoint" : "checkpoint";
  if (directory.empty()) return fmt::format("{} {}", what, id);
  return fmt::format("{} {} ({})", what, id, directory);
}

void createDirectories(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) {
    throw SluiceException(fmt::format("cannot create directory '{}': {}", path, ec.message()));
  }
}

void writeCheckpointMetadata(const CompletedCheckpoint& cp) {
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
    for (const auto& st : op.subtasks) {
      out.writeString(st.operatorState);
      out.writeString(st.timers);
      if (st.keyed.native) {
        const NativeKeyedSnapshot& n = *st.keyed.native;
        out.writeU8(static_cast<uint8_t>(KeyedKind::kNative));
        out.writeString(relativeTo(cp.directory, n.directory));
        out.writeI32(n.startKeyGroup);
        out.writeI32(n.endKeyGroup);
        out.writeU32(static_cast<uint32_t>(n.sstFiles.size()));
        for (const auto& f : n.sstFiles) {
          out.writeString(f.fileName);
          out.writeString(f.uniqueId);
          out.writeU64(f.sizeBytes);
          // Shared files lie outside the checkpoint (<job>/shared/), so the
          // path is relative to it: "../shared/<file>".
          out.writeString(fs::path(f.location).lexically_relative(cp.directory).string());
        }
        out.writeU32(static_cast<uint32_t>(n.privateFiles.size()));
        for (const auto& f : n.privateFiles) out.writeString(f);
      } else if (!st.keyed.path.empty()) {
        out.writeU8(static_cast<uint8_t>(KeyedKind::kFile));
        out.writeString(relativeTo(cp.directory, st.keyed.path));
      } else if (st.keyed.bytes) {
        out.writeU8(static_cast<uint8_t>(KeyedKind::kBytes));
        out.writeString(*st.keyed.bytes);
      } else {
        out.writeU8(static_cast<uint8_t>(KeyedKind::kNone));
        out.writeString("");
      }
    }
  }
  out.writeBytes(kEndMagic, 8);

  const std::string target = (fs::path(cp.directory) / kMetadataFileName).string();
  const std::string temp = target + ".inprogress";
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw SluiceException(fmt::format("cannot create '{}': {}", temp, errnoText(errno)));
  try {
    writeAll(fd, std::string(buf.begin(), buf.end()), temp);
    if (::fsync(fd) != 0) {
      throw SluiceException(fmt::format("cannot sync '{}': {}", temp, errnoText(errno)));
    }
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    throw SluiceException(
        fmt::format("cannot rename '{}' to '{}': {}", temp, target, errnoText(err)));
  }
}

CompletedCheckpoint loadCheckpoint(const std::string& path) {
  std::error_code ec;
  fs::path file(path);
  if (fs::is_directory(file, ec)) file /= kMetadataFileName;
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw SluiceException(
        fmt::format("cannot read checkpoint metadata '{}': {}", file.string(), errnoText(errno)));
  }
  std::ostringstream content;
  content << in.rdbuf();
  const std::string bytes = content.str();
  CompletedCheckpoint cp;
  cp.directory = file.parent_path().string();
  try {
    DataInputView view(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    char magic[8];
    view.readBytes(magic, 8);
    if (std::memcmp(magic, kMagic, 8) != 0) {
      throw SluiceException("not a Sluice checkpoint (bad magic)");
    }
    const uint32_t version = view.readU32();
    if (version != 1 && version != kVersion) {
      throw SluiceException(fmt::format("unsupported metadata version {}", version));
    }
    cp.id = view.readI64();
    cp.type = static_cast<CheckpointType>(view.readU8());
    cp.timestamp = view.readI64();
    view.readString(cp.jobId);
    cp.operators.resize(view.readU32());
    for (auto& op : cp.operators) {
      view.readString(op.uid);
      view.readString(op.name);
      op.parallelism = view.readI32();
      op.maxParallelism = view.readI32();
      op.hasCoordinatorState = view.readBool();
      view.readString(op.coordinatorState);
      op.subtasks.resize(view.readU32());
      for (auto& st : op.subtasks) {
        view.readString(st.operatorState);
        view.readString(st.timers);
        const auto kind = static_cast<KeyedKind>(view.readU8());
        if (kind == KeyedKind::kNative) {
          auto n = std::make_shared<NativeKeyedSnapshot>();
          std::string dir;
          view.readString(dir);
          n->directory = (fs::path(cp.directory) / dir).string();
          n->startKeyGroup = view.readI32();
          n->endKeyGroup = view.readI32();
          n->sstFiles.resize(readCount(view));
          for (auto& f : n->sstFiles) {
            view.readString(f.fileName);
            view.readString(f.uniqueId);
            f.sizeBytes = view.readU64();
            std::string location;
            view.readString(location);
            f.location = (fs::path(cp.directory) / location).lexically_normal().string();
          }
          n->privateFiles.resize(readCount(view));
          for (auto& f : n->privateFiles) view.readString(f);
          st.keyed.path = n->directory;
          st.keyed.native = std::move(n);
          continue;
        }
        std::string keyed;
        view.readString(keyed);
        if (kind == KeyedKind::kFile) {
          st.keyed.path = (fs::path(cp.directory) / keyed).string();
        } else if (kind == KeyedKind::kBytes) {
          st.keyed.bytes = std::make_shared<const std::string>(std::move(keyed));
        } else if (kind != KeyedKind::kNone) {
          throw SluiceException(fmt::format("unknown keyed state kind {}", static_cast<int>(kind)));
        }
      }
    }
    view.readBytes(magic, 8);
    if (std::memcmp(magic, kEndMagic, 8) != 0) {
      throw SluiceException("bad end marker (truncated or corrupt)");
    }
  } catch (const SluiceException& e) {
    throw SluiceException(
        fmt::format("corrupt checkpoint metadata '{}': {}", file.string(), e.what()));
  }
  return cp;
}

KeyedStateHandleRef storeNativeSnapshot(const NativeKeyedSnapshot& local,
                                        const std::string& privateDirectory,
                                        const std::string& sharedDirectory,
                                        const std::map<std::string, std::string>& stored,
                                        std::vector<std::string>& uploaded) {
  auto result = std::make_shared<NativeKeyedSnapshot>();
  result->directory = privateDirectory;
  result->startKeyGroup = local.startKeyGroup;
  result->endKeyGroup = local.endKeyGroup;
  result->privateFiles = local.privateFiles;
  auto copy = [](const fs::path& from, const fs::path& to) {
    std::error_code ec;
    fs::copy_file(from, to, ec);
    if (ec) {
      throw SluiceException(
          fmt::format("cannot copy '{}' to '{}': {}", from.string(), to.string(), ec.message()));
    }
  };
  const size_t uploadedBefore = uploaded.size();
  try {
    createDirectories(sharedDirectory);
    // Not its parents: when the checkpoint was aborted meanwhile, its
    // directory is gone and must stay so.
    std::error_code ec;
    fs::create_directory(privateDirectory, ec);
    if (ec) {
      throw SluiceException(
          fmt::format("cannot create directory '{}': {}", privateDirectory, ec.message()));
    }
    for (const auto& f : local.sstFiles) {
      NativeKeyedSnapshot::SstFile out = f;
      auto it = stored.find(f.uniqueId);
      if (it != stored.end()) {
        out.location = it->second;
      } else {
        // A fresh name per upload: a copy belongs to the checkpoint that
        // made it until that checkpoint completes, so an aborted one can
        // delete its copies without touching another's.
        std::string id;
        for (char c : f.uniqueId) {
          if (std::isalnum(static_cast<unsigned char>(c))) id += c;
        }
        out.location = (fs::path(sharedDirectory) /
                        fmt::format("{}-{}.sst", id, generateJobId().substr(0, 16)))
                           .string();
        copy(fs::path(local.directory) / f.fileName, out.location);
        uploaded.push_back(out.location);
      }
      result->sstFiles.push_back(std::move(out));
    }
    for (const auto& f : local.privateFiles) {
      copy(fs::path(local.directory) / f, fs::path(privateDirectory) / f);
    }
  } catch (...) {
    std::error_code ec;
    for (size_t i = uploadedBefore; i < uploaded.size(); ++i) fs::remove(uploaded[i], ec);
    uploaded.resize(uploadedBefore);
    fs::remove_all(privateDirectory, ec);
    throw;
  }
  KeyedStateHandleRef ref;
  ref.path = privateDirectory;
  ref.native = std::move(result);
  return ref;
}

void forEachSharedFile(const TaskStateSnapshot& snapshot,
                       const std::function<void(const NativeKeyedSnapshot::SstFile&)>& fn) {
  for (const auto& [node, st] : snapshot.operators) {
    if (st.keyed.native) {
      for (const auto& f : st.keyed.native->sstFiles) fn(f);
    }
  }
}

void forEachSharedFile(const CompletedCheckpoint& checkpoint,
                       const std::function<void(const NativeKeyedSnapshot::SstFile&)>& fn) {
  for (const auto& op : checkpoint.operators) {
    for (const auto& st : op.subtasks) {
      if (st.keyed.native) {
        for (const auto& f : st.keyed.native->sstFiles) fn(f);
      }
    }
  }
}

void discardCheckpointDirectory(const std::string& directory) {
  std::error_code ec;
  fs::remove_all(directory, ec);
}

std::string generateJobId() {
  std::random_device rd;
  std::mt19937_64 gen(
      (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  return fmt::format("{:016x}{:016x}", gen(), gen());
}

// ---------------------------------------------------------------------------
// Restart strategies

namespace {

using Millis = std::chrono::milliseconds;
using TimePoint = std::chrono::steady_clock::time_point;

class NoRestart final : public RestartStrategy {
 public:
  std::optional<Millis> onFailure(TimePoint) override { return std::nullopt; }
  std::string describe() const override { return "NoRestartStrategy"; }
};

class FixedDelayRestart final : public RestartStrategy {
 public:
  FixedDelayRestart(int64_t attempts, Millis delay) : attempts_(attempts), delay_(delay) {}
  std::optional<Millis> onFailure(TimePoint) override {
    if (done_ >= attempts_) return std::nullopt;
    ++done_;
    return delay_;
  }
  std::string describe() const override {
    return fmt::format("FixedDelayRestartStrategy(maxNumberRestartAttempts={}, delay={} ms)",
                       attempts_, delay_.count());
  }

 private:
  int64_t attempts_;
  Millis delay_;
  int64_t done_ = 0;
};

class FailureRateRestart final : public RestartStrategy {
 public:
  FailureRateRestart(int maxFailures, Millis interval, Millis delay)
      : maxFailures_(maxFailures), interval_(interval), delay_(delay) {}
  std::optional<Millis> onFailure(TimePoint now) override {
    failures_.push_back(now);
    while (!failures_.empty() && now - failures_.front() > interval_) {
      failures_.erase(failures_.begin());
    }
    if (static_cast<int>(failures_.size()) > maxFailures_) return std::nullopt;
    return delay_;
  }
  std::string describe() const override {
    return fmt::format(
        "FailureRateRestartStrategy(maxFailuresPerInterval={}, failureRateInterval={} ms, "
        "delay={} ms)",
        maxFailures_, interval_.count(), delay_.count());
  }

 private:
  int maxFailures_;
  Millis interval_;
  Millis delay_;
  std::vector<TimePoint> failures_;
};

class ExponentialDelayRestart final : public RestartStrategy {
 public:
  ExponentialDelayRestart(Millis initial, Millis max, double multiplier, Millis resetThreshold,
                          double jitter, int64_t attempts)
      : initial_(initial),
        max_(max),
        multiplier_(multiplier),
        resetThreshold_(resetThreshold),
        jitter_(jitter),
        attempts_(attempts),
        gen_(std::random_device{}()) {}
  std::optional<Millis> onFailure(TimePoint now) override {
    if (last_ && now - *last_ >= resetThreshold_) {
      current_ = Millis{0};
      done_ = 0;
    }
    last_ = now;
    if (done_ >= attempts_) return std::nullopt;
    ++done_;
    current_ = current_.count() == 0 ? initial_
                                     : Millis{static_cast<int64_t>(std::min<double>(
                                           static_cast<double>(current_.count()) * multiplier_,
                                           static_cast<double>(max_.count())))};
    double wait = static_cast<double>(current_.count());
    if (jitter_ > 0) {
      std::uniform_real_distribution<double> d(-jitter_, jitter_);
      wait *= 1 + d(gen_);
    }
    return Millis{static_cast<int64_t>(std::max(0.0, std::round(wait)))};
  }
  std::string describe() const override {
    return fmt::format(
        "ExponentialDelayRestartBackoffTimeStrategy(initialBackoff={} ms, maxBackoff={} ms, "
        "backoffMultiplier={}, resetBackoffThreshold={} ms, jitterFactor={}, attempts={})",
        initial_.count(), max_.count(), multiplier_, resetThreshold_.count(), jitter_, attempts_);
  }

 private:
  Millis initial_, max_;
  double multiplier_;
  Millis resetThreshold_;
  double jitter_;
  int64_t attempts_;
  Millis current_{0};
  int64_t done_ = 0;
  std::optional<TimePoint> last_;
  std::mt19937 gen_;
};

Millis nonNegative(const Configuration& config,
                   const ConfigOption<std::chrono::milliseconds>& option) {
  Millis v = config.get(option);
  if (v.count() < 0) {
    throw SluiceException(fmt::format("{} must not be negative, got {} ms", option.key, v.count()));
  }
  return v;
}

}  // namespace

std::unique_ptr<RestartStrategy> createRestartStrategy(const Configuration& config,
                                                       bool checkpointingEnabled) {
  namespace o = options;
  std::string type = config.get(o::kRestartStrategyType);
  for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const bool unset = type.empty();
  if (unset) type = checkpointingEnabled ? "fixed-delay" : "none";
  if (type == "none" || type == "off" || type == "disable") return std::make_unique<NoRestart>();
  if (type == "fixed-delay" || type == "fixeddelay") {
    // Flink: with checkpointing and no strategy configured, restart forever.
    int64_t attempts =
        unset ? int64_t{2147483647} : config.get(o::kRestartStrategyFixedDelayAttempts);
    if (attempts < 0) {
      throw SluiceException(fmt::format("{} must not be negative, got {}",
                                        o::kRestartStrategyFixedDelayAttempts.key, attempts));
    }
    return std::make_unique<FixedDelayRestart>(
        attempts, nonNegative(config, o::kRestartStrategyFixedDelayDelay));
  }
  if (type == "failure-rate" || type == "failurerate") {
    int maxFailures = config.get(o::kRestartStrategyFailureRateMaxFailuresPerInterval);
    if (maxFailures < 1) {
      throw SluiceException(fmt::format("{} must be at least 1, got {}",
                                        o::kRestartStrategyFailureRateMaxFailuresPerInterval.key,
                                        maxFailures));
    }
    return std::make_unique<FailureRateRestart>(
        maxFailures, nonNegative(config, o::kRestartStrategyFailureRateFailureRateInterval),
        nonNegative(config, o::kRestartStrategyFailureRateDelay));
  }
  if (type == "exponential-delay" || type == "exponentialdelay") {
    double multiplier = config.get(o::kRestartStrategyExponentialDelayBackoffMultiplier);
    if (!(multiplier >= 1)) {
      throw SluiceException(fmt::format("{} must be at least 1, got {}",
                                        o::kRestartStrategyExponentialDelayBackoffMultiplier.key,
                                        multiplier));
    }
    double jitter = config.get(o::kRestartStrategyExponentialDelayJitterFactor);
    if (!(jitter >= 0 && jitter <= 1)) {
      throw SluiceException(fmt::format("{} must be in [0, 1], got {}",
                                        o::kRestartStrategyExponentialDelayJitterFactor.key,
                                        jitter));
    }
    int64_t attempts = config.get(o::kRestartStrategyExponentialDelayAttemptsBeforeResetBackoff);
    if (attempts < 0) {
      throw SluiceException(
          fmt::format("{} must not be negative, got {}",
                      o::kRestartStrategyExponentialDelayAttemptsBeforeResetBackoff.key, attempts));
    }
    return std::make_unique<ExponentialDelayRestart>(
        nonNegative(config, o::kRestartStrategyExponentialDelayInitialBackoff),
        nonNegative(config, o::kRestartStrategyExponentialDelayMaxBackoff), multiplier,
        nonNegative(config, o::kRestartStrategyExponentialDelayResetBackoffThreshold), jitter,
        attempts);
  }
  throw SluiceException(
      fmt::format("restart-strategy.type: unknown strategy '{}'; use fixed-delay, failure-rate, "
                  "exponential-delay or none",
                  config.get(o::kRestartStrategyType)));
}

}  // namespace sluice::runtime
