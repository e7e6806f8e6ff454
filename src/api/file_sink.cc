#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <random>
#include <set>
#include <system_error>

#include <sluice/file_sink.h>
#include <sluice/state/operator_state.h>
#include <sluice/two_phase_commit.h>

#include "core/logging.h"

namespace sluice::internal {

void logSinkError(const std::string& message) { log::error("{}", message); }

// ---------------------------------------------------------------------------
// Encoders

void quoteCsvField(std::string& out, size_t start, std::string_view fieldDelimiter,
                   std::string_view rowDelimiter) {
  const std::string_view field = std::string_view(out).substr(start);
  if (field.find_first_of("\"\r\n") == std::string_view::npos &&
      field.find(fieldDelimiter) == std::string_view::npos &&
      field.find(rowDelimiter) == std::string_view::npos) {
    return;
  }
  std::string quoted;
  quoted.reserve(field.size() + 8);
  quoted += '"';
  for (char c : field) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  quoted += '"';
  out.resize(start);
  out += quoted;
}

namespace {

// The length of the UTF-8 sequence at s[i], or 0 when it is not valid
// (overlong forms, surrogates and code points above U+10FFFF included).
size_t utf8SequenceLength(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const auto cont = [&](size_t k) { return i + k < s.size() && (b(k) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // UTF-16 surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

void appendJsonString(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8SequenceLength(s, i);
      if (n == 0) {
        char byte[8];
        std::snprintf(byte, sizeof(byte), "0x%02X", c);
        throw SluiceException("JsonLinesEncoder: a string is not valid UTF-8 (byte " +
                              std::string(byte) + " at offset " + std::to_string(i) + " of " +
                              std::to_string(s.size()) + "); JSON text must be UTF-8");
      }
      out.append(s.data() + i, n);
      i += n;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
}

// ---------------------------------------------------------------------------
// DateTimeFormat

namespace {

[[noreturn]] void badPattern(const std::string& pattern, const std::string& why) {
  throw SluiceException("DateTimeBucketAssigner: " + why + " in pattern '" + pattern +
                        "' (supported letters: yyyy, yy, MM, dd, HH, mm, ss; put literal text "
                        "in single quotes)");
}

bool isAsciiLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

}  // namespace

DateTimeFormat::DateTimeFormat(const std::string& javaPattern, std::chrono::minutes utcOffset)
    : java_(javaPattern), offsetSeconds_(utcOffset.count() * 60) {
  if (javaPattern.empty()) {
    throw SluiceException(
        "DateTimeBucketAssigner: the pattern is empty (use BasePathBucketAssigner to write "
        "into the base path)");
  }
  if (utcOffset < -std::chrono::hours(18) || utcOffset > std::chrono::hours(18)) {
    throw SluiceException("DateTimeBucketAssigner: the UTC offset " +
                          std::to_string(utcOffset.count()) + " min is outside -18 h .. +18 h");
  }
  const std::string& p = javaPattern;
  auto literal = [&](char c) {
    if (c == '%') {
      strftime_ += "%%";
    } else {
      strftime_ += c;
    }
  };
  size_t i = 0;
  while (i < p.size()) {
    const char c = p[i];
    if (c == '\'') {
      if (i + 1 < p.size() && p[i + 1] == '\'') {  // '' is a quote
        strftime_ += '\'';
        i += 2;
        continue;
      }
      size_t j = i + 1;
      for (;;) {
        if (j >= p.size()) {
          badPattern(p, "unterminated quote at position " + std::to_string(i));
        }
        if (p[j] == '\'') {
          if (j + 1 < p.size() && p[j + 1] == '\'') {
            strftime_ += '\'';
            j += 2;
            continue;
          }
          break;
        }
        literal(p[j]);
        ++j;
      }
      i = j + 1;
      continue;
    }
    if (isAsciiLetter(c)) {
      size_t j = i;
      while (j < p.size() && p[j] == c) ++j;
      const std::string token = p.substr(i, j - i);
      const char* spec = token == "yyyy" ? "%Y"
                         : token == "yy" ? "%y"
                         : token == "MM" ? "%m"
                         : token == "dd" ? "%d"
                         : token == "HH" ? "%H"
                         : token == "mm" ? "%M"
                         : token == "ss" ? "%S"
                                         : nullptr;
      if (spec == nullptr) {
        badPattern(p, "unsupported letters '" + token + "' at position " + std::to_string(i));
      }
      strftime_ += spec;
      i = j;
      continue;
    }
    literal(c);
    ++i;
  }
}

std::string DateTimeFormat::format(int64_t epochMillis) const {
  // Floor division: times before the epoch fall into the earlier second.
  int64_t seconds = epochMillis / 1000;
  if (epochMillis % 1000 < 0) --seconds;
  seconds += offsetSeconds_;
  // One task thread formats the same second many times in a row.
  struct Cache {
    std::string pattern;
    int64_t seconds = 0;
    std::string text;
  };
  thread_local Cache cache;
  if (cache.seconds == seconds && !cache.pattern.empty() && cache.pattern == strftime_) {
    return cache.text;
  }
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  if (::gmtime_r(&t, &tm) == nullptr) {
    throw SluiceException("DateTimeBucketAssigner: time " + std::to_string(epochMillis) +
                          " ms is out of range");
  }
  std::string text(strftime_.size() * 4 + 64, '\0');
  const size_t n = std::strftime(text.data(), text.size(), strftime_.c_str(), &tm);
  text.resize(n);
  cache.pattern = strftime_;
  cache.seconds = seconds;
  cache.text = text;
  return text;
}

// ---------------------------------------------------------------------------
// FileSinkRuntime

namespace {

namespace fs = std::filesystem;

constexpr size_t kBufferSize = size_t{64} << 10;
constexpr std::string_view kInProgressSuffix = ".inprogress";

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw SluiceException("FileSink: " + what + " '" + path + "': " + std::strerror(err));
}

// A random (version 4) UUID.
std::string newUuid() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
  uint64_t hi = gen();
  uint64_t lo = gen();
  hi = (hi & ~uint64_t{0xF000}) | 0x4000;                      // version 4
  lo = (lo & ~(uint64_t{0xC} << 60)) | (uint64_t{0x8} << 60);  // variant 10
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xFFFF), static_cast<unsigned>(hi & 0xFFFF),
                static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFull));
  return buf;
}

void createDirectories(const std::string& what, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create " + what, dir, ec.value());
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) fail("cannot access " + what, dir, errno);
  if (!S_ISDIR(st.st_mode)) fail("cannot use " + what, dir, ENOTDIR);
}

void syncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("cannot open directory", dir, errno);
  if (::fsync(fd) != 0 && errno != EINVAL) {  // EINVAL: the file system cannot sync directories
    const int err = errno;
    ::close(fd);
    fail("cannot sync directory", dir, err);
  }
  ::close(fd);
}

std::string parentOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void syncParents(const std::vector<FileSinkPart>& parts) {
  std::set<std::string> dirs;
  for (const FileSinkPart& p : parts) dirs.insert(parentOf(p.finalPath));
  for (const std::string& d : dirs) syncDirectory(d);
}

void removeIfExists(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail("cannot delete", path, errno);
}

// `path` as the file system resolves it now, for messages: absolute, with a
// note when the stored path is relative.
std::string resolvedForMessage(const std::string& path) {
  if (!path.empty() && path.front() == '/') return "'" + path + "'";
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (ec) {
    return "'" + path + "' (relative; the working directory is unreadable: " + ec.message() + ")";
  }
  return "'" + (cwd / path).lexically_normal().string() + "' (the relative path '" + path +
         "' of a checkpoint written by an older version, resolved against the working "
         "directory; restore from the directory the job was started in)";
}

bool isHexDigit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// Parses digits (at most `maxDigits`) into `out`.
bool parseDigits(std::string_view s, size_t maxDigits, int64_t& out) {
  if (s.empty() || s.size() > maxDigits) return false;
  out = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  return true;
}

// An in-progress file name of this sink's part prefix,
// ".<prefix>-<uuid>-<subtask>-<counter>.inprogress", split up.
struct InProgressName {
  std::string_view writer;  // ".<prefix>-<uuid>-<subtask>-"
  int64_t subtask = 0;
  int64_t counter = 0;
};

std::optional<InProgressName> parseInProgressName(std::string_view name,
                                                  const std::string& partPrefix) {
  if (name.size() < 2 + partPrefix.size() || name[0] != '.' ||
      name.compare(1, partPrefix.size(), partPrefix) != 0 || name[1 + partPrefix.size()] != '-' ||
      !name.ends_with(kInProgressSuffix)) {
    return std::nullopt;
  }
  const size_t stem = partPrefix.size() + 2;
  const std::string_view rest = name.substr(stem, name.size() - stem - kInProgressSuffix.size());
  // <uuid>: 8-4-4-4-12 lower-case hex digits, as newUuid() writes it.
  if (rest.size() < 37 || rest[36] != '-') return std::nullopt;
  for (size_t i = 0; i < 36; ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? rest[i] != '-' : !isHexDigit(rest[i])) return std::nullopt;
  }
  const std::string_view tail = rest.substr(37);
  const size_t dash = tail.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  InProgressName out;
  if (!parseDigits(tail.substr(0, dash), 9, out.subtask) ||
      !parseDigits(tail.substr(dash + 1), 18, out.counter)) {
    return std::nullopt;
  }
  out.writer = name.substr(0, stem + 37 + dash + 1);
  return out;
}

// Calls `fn(path, name)` for every regular file below `root` whose name
// starts with '.' and ends in ".inprogress", without following symbolic
// links. Directories that vanish meanwhile (other subtasks) are skipped;
// other errors are logged and end the walk of that directory.
template <class F>
void forEachHiddenInProgressFile(const std::string& root, F&& fn) {
  std::vector<fs::path> dirs{fs::path(root)};
  while (!dirs.empty()) {
    const fs::path dir = std::move(dirs.back());
    dirs.pop_back();
    std::error_code ec;
    fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
    for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
      std::error_code typeError;
      const fs::file_status st = it->symlink_status(typeError);
      if (typeError) continue;  // gone meanwhile
      if (fs::is_directory(st)) {
        dirs.push_back(it->path());
        continue;
      }
      if (!fs::is_regular_file(st)) continue;
      const std::string name = it->path().filename().string();
      if (name.front() == '.' && std::string_view(name).ends_with(kInProgressSuffix)) {
        fn(it->path().string(), std::string_view(name));
      }
    }
    if (ec && ec != std::errc::no_such_file_or_directory) {
      log::warn("FileSink: could not look through '{}' for in-progress files to delete: {}",
                dir.string(), ec.message());
    }
  }
}

// The directory of bucket `bucketId` below `basePath`; throws when the id is
// not a relative path inside it.
std::string bucketDirectory(const std::string& basePath, const std::string& bucketId) {
  if (bucketId.empty()) return basePath;
  auto bad = [&](const char* why) {
    throw SluiceException(
        "FileSink: the bucket assigner returned bucket id '" + bucketId + "', which " + why +
        "; a bucket id is a relative directory below the base path '" + basePath + "'");
  };
  if (bucketId.find('\0') != std::string::npos) bad("contains NUL");
  if (bucketId.front() == '/') bad("is an absolute path");
  size_t start = 0;
  while (start <= bucketId.size()) {
    size_t end = bucketId.find('/', start);
    if (end == std::string::npos) end = bucketId.size();
    const std::string_view part = std::string_view(bucketId).substr(start, end - start);
    if (part == "." || part == "..") bad("has a '.' or '..' component");
    start = end + 1;
  }
  return (basePath.back() == '/' ? basePath : basePath + "/") + bucketId;
}

}  // namespace

std::string absoluteBasePath(const std::string& basePath) {
  if (basePath.front() == '/') return basePath;
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (ec) {
    throw SluiceException("FileSink.forRowFormat: cannot resolve the relative base path '" +
                          basePath + "': cannot read the working directory: " + ec.message());
  }
  std::string out = (cwd / basePath).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

// One part file being written: an fd and a buffer.
class FileSinkRuntime::PartFile {
 public:
  explicit PartFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0) fail("cannot create part file", path_, errno);
    buffer_.reserve(kBufferSize + 4096);
  }
  ~PartFile() { discard(); }
  PartFile(const PartFile&) = delete;
  PartFile& operator=(const PartFile&) = delete;

  std::string& buffer() { return buffer_; }
  int64_t size() const { return written_ + static_cast<int64_t>(buffer_.size()); }
  void maybeWriteOut() {
    if (buffer_.size() >= kBufferSize) writeOut();
  }
  // Writes everything out, syncs and closes the file.
  void finish() {
    writeOut();
    if (::fsync(fd_) != 0) fail("cannot sync part file", path_, errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("cannot close part file", path_, errno);
  }
  // Closes without writing out (the file is about to be deleted).
  void discard() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    buffer_.clear();
  }

 private:
  void writeOut() {
    size_t done = 0;
    while (done < buffer_.size()) {
      const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail("cannot write part file", path_, errno);
      }
      done += static_cast<size_t>(n);
    }
    written_ += static_cast<int64_t>(done);
    buffer_.clear();
  }

  std::string path_;
  int fd_ = -1;
  std::string buffer_;
  int64_t written_ = 0;
};

struct FileSinkRuntime::Bucket {
  std::string id;
  std::string dir;
  std::unique_ptr<PartFile> file;  // null when rolled
  int64_t creationTime = 0;
  int64_t lastUpdateTime = 0;
};

FileSinkRuntime::FileSinkRuntime(std::shared_ptr<const FileSinkOptions> options)
    : options_(std::move(options)), alive_(std::make_shared<bool>(true)) {}

FileSinkRuntime::~FileSinkRuntime() { *alive_ = false; }

void FileSinkRuntime::initializeWriterState(OperatorStateBackend& state, bool restored) {
  writersState_ =
      &state.getUnionListState(ListStateDescriptor<std::string>(kFileSinkWritersStateName));
  restored_ = restored;
  if (restored) {
    for (std::string& w : writersState_->get()) knownWriters_.insert(std::move(w));
  }
  writersState_->clear();
}

void FileSinkRuntime::snapshotWriterState() {
  // The restored transactions were all committed or aborted when the writer
  // started, so a checkpoint names only this writer's files.
  if (writersState_ != nullptr) writersState_->update({inProgressPrefix_});
}

void FileSinkRuntime::open(WriterInitContext& context) {
  context_ = &context;
  createDirectories("base directory", options_->basePath);
  if (::access(options_->basePath.c_str(), W_OK | X_OK) != 0) {
    fail("cannot write to base directory", options_->basePath, errno);
  }
  const std::string stem = options_->fileConfig.partPrefix + "-" + newUuid() + "-" +
                           std::to_string(context.getSubtaskId()) + "-";
  finalPrefix_ = stem;
  inProgressPrefix_ = "." + stem;
  scheduleCheck(currentTime());
}

FileSinkTransaction FileSinkRuntime::beginTransaction() {
  if (!started_) {
    started_ = true;
    deleteAbandonedFiles();
  }
  FileSinkTransaction txn;
  txn.basePath = options_->basePath;
  txn.inProgressPrefix = inProgressPrefix_;
  txn.firstCounter = nextCounter_;
  return txn;
}

FileSinkRuntime::Bucket& FileSinkRuntime::bucket(const std::string& bucketId) {
  auto it = buckets_.find(bucketId);
  if (it != buckets_.end()) return *it->second;
  auto b = std::make_unique<Bucket>();
  b->id = bucketId;
  b->dir = bucketDirectory(options_->basePath, bucketId);
  Bucket& ref = *b;
  buckets_.emplace(bucketId, std::move(b));
  return ref;
}

std::string& FileSinkRuntime::partBuffer(FileSinkTransaction& txn, const std::string& bucketId,
                                         int64_t now) {
  Bucket& b = active_ != nullptr && active_->id == bucketId ? *active_ : bucket(bucketId);
  if (b.file) {
    const PartFileInfo info{b.id, b.creationTime, b.lastUpdateTime, b.file->size()};
    const RollingPolicy& policy = *options_->rollingPolicy;
    if (policy.shouldRollOnEvent(info) || policy.shouldRollOnProcessingTime(info, now)) roll(b);
  }
  if (!b.file) {
    const std::string counter = std::to_string(nextCounter_++);
    const std::string dir = b.dir.back() == '/' ? b.dir : b.dir + "/";
    // Recorded before the file exists, so an abort finds it whatever happens.
    txn.parts.push_back(
        FileSinkPart{dir + inProgressPrefix_ + counter + std::string(kInProgressSuffix),
                     dir + finalPrefix_ + counter + options_->fileConfig.partSuffix});
    createDirectories("bucket directory", b.dir);
    b.file = std::make_unique<PartFile>(txn.parts.back().inProgressPath);
    b.creationTime = now;
    b.lastUpdateTime = now;
  }
  active_ = &b;
  return b.file->buffer();
}

void FileSinkRuntime::written(int64_t now) {
  active_->lastUpdateTime = now;
  active_->file->maybeWriteOut();
}

void FileSinkRuntime::roll(Bucket& b) {
  std::unique_ptr<PartFile> file = std::move(b.file);
  file->finish();
}

void FileSinkRuntime::checkBuckets(int64_t now) {
  const RollingPolicy& policy = *options_->rollingPolicy;
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    Bucket& b = *it->second;
    if (b.file) {
      const PartFileInfo info{b.id, b.creationTime, b.lastUpdateTime, b.file->size()};
      if (policy.shouldRollOnProcessingTime(info, now)) roll(b);
    }
    if (!b.file) {
      if (active_ == &b) active_ = nullptr;
      it = buckets_.erase(it);
    } else {
      ++it;
    }
  }
}

void FileSinkRuntime::scheduleCheck(int64_t now) {
  context_->registerProcessingTimer(now + options_->bucketCheckIntervalMs,
                                    [this, alive = alive_](int64_t timestamp) {
                                      if (*alive) onTimer(timestamp);
                                    });
}

void FileSinkRuntime::onTimer(int64_t) {
  const int64_t now = currentTime();
  checkBuckets(now);
  scheduleCheck(now);
}

void FileSinkRuntime::preCommit(FileSinkTransaction& txn) {
  for (auto& [id, b] : buckets_) {
    if (b->file) roll(*b);
  }
  buckets_.clear();
  active_ = nullptr;
  // The pending files' directory entries must survive a crash too.
  syncParents(txn.parts);
}

void FileSinkRuntime::commit(const FileSinkTransaction& txn) {
  for (const FileSinkPart& p : txn.parts) {
    if (::rename(p.inProgressPath.c_str(), p.finalPath.c_str()) == 0) continue;
    const int err = errno;
    struct stat st;
    if (err == ENOENT) {
      if (::stat(p.finalPath.c_str(), &st) == 0) continue;  // committed before
      throw SluiceException("FileSink: cannot commit part file " +
                            resolvedForMessage(p.inProgressPath) + " as " +
                            resolvedForMessage(p.finalPath) +
                            ": neither exists (the pending file was deleted outside the sink; "
                            "its data is lost)");
    }
    throw SluiceException("FileSink: cannot commit part file '" + p.inProgressPath + "' as '" +
                          p.finalPath + "': " + std::strerror(err));
  }
  syncParents(txn.parts);
}

void FileSinkRuntime::abort(const FileSinkTransaction& txn, bool open) {
  if (open) {
    for (auto& [id, b] : buckets_) {
      if (b->file) b->file->discard();
    }
    buckets_.clear();
    active_ = nullptr;
  }
  for (const FileSinkPart& p : txn.parts) removeIfExists(p.inProgressPath);
}

void FileSinkRuntime::recoverAndCommit(const FileSinkTransaction& txn) {
  if (!txn.inProgressPrefix.empty()) knownWriters_.insert(txn.inProgressPrefix);
  commit(txn);
}

void FileSinkRuntime::recoverAndAbort(const FileSinkTransaction& txn) {
  for (const FileSinkPart& p : txn.parts) removeIfExists(p.inProgressPath);
  // The failed writer may have opened more part files after the checkpoint
  // (the restored state does not know them): every in-progress file of that
  // writer numbered from this transaction's first counter on. The first
  // beginTransaction() deletes them, in one walk with the abandoned files.
  if (txn.inProgressPrefix.empty()) return;
  knownWriters_.insert(txn.inProgressPrefix);
  aborted_.push_back(AbortedWriter{txn.basePath, txn.inProgressPrefix, txn.firstCounter});
  if (started_) deleteAbandonedFiles();
}

void FileSinkRuntime::deleteAbandonedFiles() {
  const int subtask = context_->getSubtaskId();
  const int parallelism = std::max(1, context_->getNumberOfParallelSubtasks());
  // A restored checkpoint that names no writer was written by a version
  // without the writers state: which writers it refers to is unknown.
  const bool abandoned = !restored_ || !knownWriters_.empty();
  if (!abandoned) {
    log::info(
        "FileSink (subtask {}): the restored checkpoint does not name its writers (it was "
        "written by an older version); abandoned in-progress files below '{}' are deleted from "
        "the next restore on",
        subtask, options_->basePath);
  }
  std::set<std::string> roots;
  if (abandoned) roots.insert(options_->basePath);
  for (const AbortedWriter& a : aborted_) roots.insert(a.basePath);

  std::set<std::string> afterCheckpoint;  // of restored open transactions
  std::set<std::string> orphans;          // of writers no checkpoint names
  for (const std::string& root : roots) {
    std::error_code ec;
    if (!fs::exists(root, ec)) continue;
    const bool ownRoot = abandoned && root == options_->basePath;
    forEachHiddenInProgressFile(root, [&](const std::string& path, std::string_view name) {
      for (const AbortedWriter& a : aborted_) {
        if (name.size() <= a.inProgressPrefix.size() + kInProgressSuffix.size() ||
            !name.starts_with(a.inProgressPrefix)) {
          continue;
        }
        int64_t counter = 0;
        const std::string_view digits =
            name.substr(a.inProgressPrefix.size(),
                        name.size() - a.inProgressPrefix.size() - kInProgressSuffix.size());
        if (parseDigits(digits, 18, counter) && counter >= a.firstCounter) {
          afterCheckpoint.insert(path);
        }
        return;
      }
      if (!ownRoot) return;
      const std::optional<InProgressName> parsed =
          parseInProgressName(name, options_->fileConfig.partPrefix);
      if (!parsed || parsed->subtask % parallelism != subtask) return;
      const std::string writer(parsed->writer);
      if (writer == inProgressPrefix_ || knownWriters_.contains(writer)) return;
      orphans.insert(path);
    });
  }
  for (const std::string& path : afterCheckpoint) removeIfExists(path);

  size_t removed = 0;
  std::string examples;
  for (const std::string& path : orphans) {
    if (::unlink(path.c_str()) != 0) {
      if (errno != ENOENT) {
        log::warn("FileSink: cannot delete abandoned in-progress file '{}': {}", path,
                  std::strerror(errno));
      }
      continue;
    }
    log::debug("FileSink: deleted abandoned in-progress file '{}'", path);
    if (removed < 3) examples += (removed == 0 ? "'" : ", '") + path + "'";
    ++removed;
  }
  if (removed > 0) {
    log::info(
        "FileSink (subtask {}): deleted {} abandoned in-progress file(s) below '{}', left by "
        "writers that no restored checkpoint names: {}{}",
        subtask, removed, options_->basePath, examples, removed > 3 ? ", ..." : "");
  }
}

void FileSinkRuntime::close() {
  *alive_ = false;
  for (auto& [id, b] : buckets_) {
    if (b->file) b->file->discard();
  }
  buckets_.clear();
  active_ = nullptr;
}

}  // namespace sluice::internal
