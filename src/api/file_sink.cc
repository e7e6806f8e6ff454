#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>
#include <set>
#include <system_error>

#include <sluice/file_sink.h>
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
      throw SluiceException("FileSink: cannot commit part file '" + p.inProgressPath + "' as '" +
                            p.finalPath +
                            "': neither exists (the pending file was deleted outside the sink; "
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

void FileSinkRuntime::recoverAndAbort(const FileSinkTransaction& txn) {
  for (const FileSinkPart& p : txn.parts) removeIfExists(p.inProgressPath);
  // The failed writer may have opened more part files after the checkpoint
  // (the restored state does not know them): every in-progress file of that
  // writer numbered from this transaction's first counter on.
  if (txn.inProgressPrefix.empty()) return;
  std::error_code ec;
  if (!fs::exists(txn.basePath, ec)) return;
  std::vector<std::string> doomed;
  fs::recursive_directory_iterator it(txn.basePath, fs::directory_options::skip_permission_denied,
                                      ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= txn.inProgressPrefix.size() + kInProgressSuffix.size()) continue;
    if (name.compare(0, txn.inProgressPrefix.size(), txn.inProgressPrefix) != 0) continue;
    if (!std::string_view(name).ends_with(kInProgressSuffix)) continue;
    const std::string_view digits = std::string_view(name).substr(
        txn.inProgressPrefix.size(),
        name.size() - txn.inProgressPrefix.size() - kInProgressSuffix.size());
    int64_t counter = 0;
    bool numeric = !digits.empty() && digits.size() < 19;
    for (char c : digits) {
      if (c < '0' || c > '9') {
        numeric = false;
        break;
      }
      counter = counter * 10 + (c - '0');
    }
    if (numeric && counter >= txn.firstCounter) doomed.push_back(it->path().string());
  }
  if (ec) {
    log::warn("FileSink: could not look through '{}' for in-progress files to delete: {}",
              txn.basePath, ec.message());
  }
  for (const std::string& path : doomed) removeIfExists(path);
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
