#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <sluice/core/config.h>
#include <sluice/core/config_options.h>
#include <sluice/sources.h>

#include "core/logging.h"

namespace sluice {
namespace internal {

std::vector<NumberSequenceSplit> splitNumberRange(int64_t from, int64_t to, int numSplits) {
  // 128-bit: [INT64_MIN, INT64_MAX] holds 2^64 numbers.
  using Wide = __int128;
  const Wide total = static_cast<Wide>(to) - static_cast<Wide>(from) + 1;
  const Wide k = std::min<Wide>(std::max(numSplits, 1), total);
  const Wide base = total / k;
  const Wide extra = total % k;  // the first `extra` splits take one more
  std::vector<NumberSequenceSplit> out;
  out.reserve(static_cast<size_t>(k));
  Wide cur = from;
  for (Wide i = 0; i < k; ++i) {
    const Wide size = base + (i < extra ? 1 : 0);
    const auto first = static_cast<int64_t>(cur);
    const auto last = static_cast<int64_t>(cur + size - 1);
    out.push_back(NumberSequenceSplit{first, last, first});
    cur += size;
  }
  return out;
}

}  // namespace internal

namespace {

std::string errnoText(int err) { return std::strerror(err); }

// ---------------------------------------------------------------------------
// NumberSequenceSource

class NumberSequenceReader final
    : public internal::QueuedSplitReader<int64_t, NumberSequenceSplit> {
 public:
  explicit NumberSequenceReader(SourceReaderContext& context) : QueuedSplitReader(context) {}

 private:
  Step readSplit(NumberSequenceSplit& split, ReaderOutput<int64_t>& output, int& budget) override {
    const bool done = internal::emitSequence(split, budget, [&](int64_t v) { output.collect(v); });
    return done ? Step::kFinished : Step::kContinues;
  }
};

}  // namespace

NumberSequenceSource::NumberSequenceSource(int64_t from, int64_t to) : from_(from), to_(to) {
  if (from > to) {
    throw SluiceException("fromSequence: 'from' (" + std::to_string(from) + ") must be <= 'to' (" +
                          std::to_string(to) + ")");
  }
}

std::unique_ptr<SplitEnumerator<NumberSequenceSplit>> NumberSequenceSource::createEnumerator(
    SplitEnumeratorContext<NumberSequenceSplit>& context) const {
  return std::make_unique<internal::QueueSplitEnumerator<NumberSequenceSplit>>(
      context, [from = from_, to = to_](int parallelism) {
        return internal::splitNumberRange(from, to, parallelism);
      });
}

std::unique_ptr<SourceReader<int64_t, NumberSequenceSplit>> NumberSequenceSource::createReader(
    SourceReaderContext& context) const {
  return std::make_unique<NumberSequenceReader>(context);
}

// ---------------------------------------------------------------------------
// TextLineFileSource

namespace {

[[noreturn]] void throwCannotOpen(const std::string& path, int err) {
  throw SluiceException("readTextFile: cannot open '" + path + "': " + errnoText(err));
}

// What a stat() mode is, for the message that refuses it.
const char* fileTypeName(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "of an unknown file type";
}

// Only regular files are read: a FIFO, socket or device would block the
// opening or reading thread (a FIFO's open waits for a writer) or never end.
[[noreturn]] void throwNotRegular(const std::string& path, mode_t mode) {
  throw SluiceException("readTextFile: '" + path + "' is not a regular file or directory (it is " +
                        fileTypeName(mode) + ")");
}

// The splits of `path`: the file itself, or the visible regular files of a
// directory sorted by name. Throws when the path cannot be opened or is, or
// holds, a file that is neither regular nor a directory. Decides on stat()
// alone, before anything is opened, so a FIFO is never opened.
std::vector<FileSplit> discoverFiles(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throwCannotOpen(path, errno);
  if (S_ISREG(st.st_mode)) {
    // Opening checks permissions the way the reader will.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throwCannotOpen(path, errno);
    ::close(fd);
    return {FileSplit{path, 0}};
  }
  if (!S_ISDIR(st.st_mode)) throwNotRegular(path, st.st_mode);
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) throwCannotOpen(path, errno);
  const std::string prefix = path.back() == '/' ? path : path + "/";
  std::vector<std::string> names;
  std::optional<std::pair<std::string, mode_t>> refused;  // the first by name
  for (;;) {
    errno = 0;  // readdir returns null both at the end and on an error
    const dirent* e = ::readdir(dir);
    if (e == nullptr) break;
    const std::string name = e->d_name;
    // Flink's default filter: hidden files and in-progress files ("_...").
    if (name.empty() || name[0] == '.' || name[0] == '_') continue;
    struct stat fst;
    // Gone since readdir (or a dangling link): nothing to read.
    if (::stat((prefix + name).c_str(), &fst) != 0) continue;
    if (S_ISREG(fst.st_mode)) {
      names.push_back(name);
    } else if (!S_ISDIR(fst.st_mode)) {  // subdirectories are skipped: not recursive
      if (!refused || name < refused->first) refused.emplace(name, fst.st_mode);
    }
  }
  const int readErr = errno;
  ::closedir(dir);
  if (readErr != 0) throwCannotOpen(path, readErr);
  if (refused) throwNotRegular(prefix + refused->first, refused->second);
  std::sort(names.begin(), names.end());
  std::vector<FileSplit> out;
  out.reserve(names.size());
  for (const auto& n : names) out.push_back(FileSplit{prefix + n, 0});
  return out;
}

class TextLineReader final : public internal::QueuedSplitReader<std::string, FileSplit> {
 public:
  TextLineReader(SourceReaderContext& context, size_t bufferSize)
      : QueuedSplitReader(context), bufferSize_(std::max<size_t>(bufferSize, 1)) {}
  ~TextLineReader() override { closeFile(); }

 private:
  void openSplit(FileSplit& split) override {
    closeFile();
    // O_NONBLOCK: should the path have become a FIFO since discovery (or a
    // restored split name one), open returns at once and fstat refuses it.
    // Reads of a regular file ignore the flag.
    fd_ = ::open(split.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) throwCannotOpen(split.path, errno);
    struct stat st;
    if (::fstat(fd_, &st) != 0) {
      const int err = errno;
      closeFile();
      throwCannotOpen(split.path, err);
    }
    if (!S_ISREG(st.st_mode)) {
      closeFile();
      if (S_ISDIR(st.st_mode)) throwCannotOpen(split.path, EISDIR);
      throwNotRegular(split.path, st.st_mode);
    }
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
    path_ = split.path;
    if (buf_.size() < bufferSize_) buf_.resize(bufferSize_);
    bufOffset_ = split.offset;
    begin_ = end_ = scanned_ = 0;
    eof_ = false;
  }

  Step readSplit(FileSplit& split, ReaderOutput<std::string>& output, int& budget) override {
    while (budget > 0) {
      const size_t from = std::max(begin_, scanned_);
      const void* nl = std::memchr(buf_.data() + from, '\n', end_ - from);
      if (nl != nullptr) {
        const size_t pos = static_cast<size_t>(static_cast<const char*>(nl) - buf_.data());
        emitLine(output, pos);
        begin_ = scanned_ = pos + 1;
        split.offset = bufOffset_ + static_cast<int64_t>(begin_);
        --budget;
        continue;
      }
      scanned_ = end_;
      if (eof_) {
        if (end_ > begin_) {
          emitLine(output, end_);
          begin_ = end_;
          split.offset = bufOffset_ + static_cast<int64_t>(begin_);
          --budget;
        }
        return Step::kFinished;
      }
      fill();
    }
    return Step::kContinues;
  }

  void closeSplit() override { closeFile(); }

  // Emits buf_[begin_, end) without a trailing '\r'.
  void emitLine(ReaderOutput<std::string>& output, size_t end) {
    size_t len = end - begin_;
    if (len > 0 && buf_[begin_ + len - 1] == '\r') --len;
    line_.assign(buf_.data() + begin_, len);
    output.collect(line_);
  }

  // One read into the buffer after moving the unread tail to its front; the
  // buffer doubles when a single line fills it.
  void fill() {
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      bufOffset_ += static_cast<int64_t>(begin_);
      end_ -= begin_;
      scanned_ -= begin_;
      begin_ = 0;
    }
    if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);
    for (;;) {
      const ssize_t n = ::pread(fd_, buf_.data() + end_, buf_.size() - end_,
                                bufOffset_ + static_cast<int64_t>(end_));
      if (n > 0) {
        end_ += static_cast<size_t>(n);
        return;
      }
      if (n == 0) {
        eof_ = true;
        return;
      }
      if (errno == EINTR) continue;
      throw SluiceException("readTextFile: cannot read '" + path_ + "': " + errnoText(errno));
    }
  }

  void closeFile() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  const size_t bufferSize_;
  int fd_ = -1;
  std::string path_;
  std::vector<char> buf_;
  int64_t bufOffset_ = 0;  // file offset of buf_[0]
  size_t begin_ = 0;       // first unread byte
  size_t end_ = 0;         // end of valid data
  size_t scanned_ = 0;     // [begin_, scanned_) holds no '\n'
  bool eof_ = false;
  std::string line_;  // reused for every record
};

}  // namespace

TextLineFileSource::TextLineFileSource(std::string path, size_t readBufferSize)
    : path_(std::move(path)), readBufferSize_(readBufferSize) {
  if (path_.empty()) throw SluiceException("readTextFile: the path is empty");
}

std::unique_ptr<SplitEnumerator<FileSplit>> TextLineFileSource::createEnumerator(
    SplitEnumeratorContext<FileSplit>& context) const {
  return std::make_unique<internal::QueueSplitEnumerator<FileSplit>>(
      context, [path = path_](int) { return discoverFiles(path); });
}

std::unique_ptr<SourceReader<std::string, FileSplit>> TextLineFileSource::createReader(
    SourceReaderContext& context) const {
  return std::make_unique<TextLineReader>(context, readBufferSize_);
}

// ---------------------------------------------------------------------------
// SocketTextSource

namespace {

// Nothing to hand out: the reader connects on its own.
class SocketEnumerator final : public SplitEnumerator<SocketSplit> {
 public:
  explicit SocketEnumerator(SplitEnumeratorContext<SocketSplit>& context) : context_(context) {}
  void handleSplitRequest(int subtask) override { context_.signalNoMoreSplits(subtask); }
  void addSplitsBack(std::vector<SocketSplit>, int) override {}
  void addReader(int) override {}
  std::vector<SocketSplit> snapshotState(int64_t) override { return {}; }

 private:
  SplitEnumeratorContext<SocketSplit>& context_;
};

std::string hostPort(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// The line being cut, carried across reconnects like Flink's partial line.
struct PartialLine {
  std::string text;       // at most maxLineLength (+1 for a '\r') bytes
  bool dropping = false;  // kTruncate: the line was emitted; drop to the delimiter
  uint64_t dropped = 0;   // bytes dropped of the current line
};

class SocketTextReader final : public SourceReader<std::string, SocketSplit> {
 public:
  SocketTextReader(SourceReaderContext& context, std::string host, int port, char delimiter,
                   int64_t maxRetry, const SocketTextSourceOptions& options)
      : context_(context),
        host_(std::move(host)),
        port_(port),
        delimiter_(delimiter),
        maxRetry_(maxRetry),
        maxLine_(options.maxLineLength),
        // Room for a '\r' that turns out to precede the '\n' and is dropped.
        holdLimit_(options.maxLineLength + (delimiter == '\n' ? 1 : 0)),
        truncate_(options.oversizedLines == OversizedLinePolicy::kTruncate),
        connectTimeout_(options.connectTimeout),
        where_(hostPort(host_, port_)) {}

  ~SocketTextReader() override { close(); }

  void start() override {
    if (::pipe2(wakePipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
      throw SluiceException("socketTextStream: cannot create a pipe: " + errnoText(errno));
    }
    fetcher_ = std::thread([this] { fetch(); });
  }

  InputStatus pollNext(ReaderOutput<std::string>& output) override {
    bool ended;
    {
      std::lock_guard lock(mu_);
      const size_t n = std::min<size_t>(queue_.size(), kMaxRecordsPerPoll);
      for (size_t i = 0; i < n; ++i) {
        queuedBytes_ -= queue_.front().size();
        batch_.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      ended = finished_ && queue_.empty();
    }
    if (!batch_.empty()) {
      notFull_.notify_one();
      for (auto& line : batch_) output.collect(std::move(line));
      batch_.clear();
      return InputStatus::kMoreAvailable;
    }
    if (!ended) return InputStatus::kNothingAvailable;
    if (!error_.empty()) throw SluiceException(error_);
    return InputStatus::kEndOfInput;
  }

  void addSplits(std::vector<SocketSplit>) override {}
  void notifyNoMoreSplits() override {}
  // At-most-once: nothing to record.
  std::vector<SocketSplit> snapshotState(int64_t) override { return {}; }

  void close() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    notFull_.notify_all();
    if (wakePipe_[1] >= 0) {
      const char b = 1;
      [[maybe_unused]] ssize_t r = ::write(wakePipe_[1], &b, 1);
    }
    if (fetcher_.joinable()) fetcher_.join();
    for (int& fd : wakePipe_) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }

 private:
  enum class Outcome {
    kEnded,    // the connection (or the connect) succeeded and ended
    kFailed,   // connect or read failed: retried if retries are left
    kTooLong,  // kFail and a line over the limit: never retried
    kStopped,  // close() was called
  };

  // The fetcher thread.
  void fetch() {
    log::setThreadName("socketTextStream " + where_);
    PartialLine line;
    std::string error;
    int64_t retries = 0;
    for (;;) {
      const Outcome o = connectAndRead(line, error);
      if (o == Outcome::kStopped) return;
      if (o == Outcome::kTooLong) break;
      if (maxRetry_ >= 0 && retries >= maxRetry_) break;
      ++retries;
      log::warn("{}; reconnecting in {} ms (retry {}{})",
                o == Outcome::kFailed ? error : "connection to " + where_ + " closed",
                SocketTextSource::kRetryDelay.count(), retries,
                maxRetry_ < 0 ? std::string() : " of " + std::to_string(maxRetry_));
      error.clear();
      if (waitForStop(static_cast<int>(SocketTextSource::kRetryDelay.count()))) return;
    }
    // Done: the tail is a last line when the stream ended cleanly, as in
    // Flink; after a failure it is dropped with the job.
    std::vector<std::string> last;
    if (error.empty()) {
      if (line.dropping) {
        noteTruncated(line);
      } else if (!line.text.empty()) {
        // No delimiter follows, so a held '\r' is part of the line.
        if (line.text.size() > maxLine_) {
          if (tooLong(line, 0, last, error)) noteTruncated(line);
        } else {
          last.push_back(std::move(line.text));
        }
      }
    }
    if (!push(last)) return;
    {
      std::lock_guard lock(mu_);
      error_ = std::move(error);
      finished_ = true;
    }
    context_.signalAvailable();
  }

  // One connection: connects, reads until EOF, an error or stop.
  Outcome connectAndRead(PartialLine& line, std::string& error) {
    int fd = -1;
    Outcome o = connect(fd, error);
    if (o != Outcome::kEnded) return o;
    o = readLoop(fd, line, error);
    ::close(fd);
    return o;
  }

  Outcome connect(int& out, std::string& error) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* addrs = nullptr;
    const std::string service = std::to_string(port_);
    const int gai = ::getaddrinfo(host_.c_str(), service.c_str(), &hints, &addrs);
    if (gai != 0) {
      error = "socketTextStream: cannot connect to " + where_ + ": " + ::gai_strerror(gai);
      return Outcome::kFailed;
    }
    int lastErr = ECONNREFUSED;
    bool lastTimedOut = false;
    Outcome result = Outcome::kFailed;
    for (addrinfo* a = addrs; a != nullptr; a = a->ai_next) {
      const int fd =
          ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) {
        lastErr = errno;
        lastTimedOut = false;
        continue;
      }
      int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
      bool timedOut = false;
      if (rc != 0 && errno == EINPROGRESS) {
        const int ready = waitFor(fd, POLLOUT, connectTimeout_);
        if (ready < 0) {
          ::close(fd);
          result = Outcome::kStopped;
          break;
        }
        if (ready > 0) {
          timedOut = true;
          errno = ETIMEDOUT;
        } else {
          int soErr = 0;
          socklen_t len = sizeof(soErr);
          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soErr, &len);
          rc = soErr == 0 ? 0 : -1;
          errno = soErr;
        }
      }
      if (rc == 0) {
        out = fd;
        result = Outcome::kEnded;
        break;
      }
      lastErr = errno;
      lastTimedOut = timedOut;
      ::close(fd);
    }
    ::freeaddrinfo(addrs);
    if (result == Outcome::kFailed) {
      error = "socketTextStream: cannot connect to " + where_ + ": " +
              (lastTimedOut ? "timed out after " + formatDuration(connectTimeout_)
                            : errnoText(lastErr));
    }
    return result;
  }

  Outcome readLoop(int fd, PartialLine& line, std::string& error) {
    std::vector<char> buf(64 << 10);
    std::vector<std::string> lines;
    for (;;) {
      const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
      if (n == 0) return Outcome::kEnded;
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          if (waitFor(fd, POLLIN, std::chrono::milliseconds(-1)) < 0) return Outcome::kStopped;
          continue;
        }
        error = "socketTextStream: error reading from " + where_ + ": " + errnoText(errno);
        return Outcome::kFailed;
      }
      const char* p = buf.data();
      const char* end = p + n;
      bool ok = true;
      while (ok && p < end) {
        const void* d = std::memchr(p, delimiter_, static_cast<size_t>(end - p));
        const char* q = d == nullptr ? end : static_cast<const char*>(d);
        ok = append(line, p, q, lines, error);
        if (!ok || d == nullptr) break;
        endLine(line, lines);
        p = q + 1;
      }
      // Lines cut before a too-long one are delivered before the failure.
      if (!push(lines)) return Outcome::kStopped;
      if (!ok) return Outcome::kTooLong;
    }
  }

  // Adds [p, q), bytes of the current line, holding at most holdLimit_ of
  // them. False when the line is too long under kFail (`error` says so).
  bool append(PartialLine& line, const char* p, const char* q, std::vector<std::string>& lines,
              std::string& error) {
    const auto n = static_cast<size_t>(q - p);
    if (line.dropping) {
      line.dropped += n;
      return true;
    }
    const size_t take = std::min(n, holdLimit_ - line.text.size());
    line.text.append(p, take);
    const size_t rest = n - take;
    // Over the limit for sure: more bytes than the hold, or a full hold
    // whose last byte is no '\r' that a '\n' could still drop.
    const bool over = rest > 0 || (line.text.size() > maxLine_ && line.text.back() != '\r');
    if (!over) return true;
    return tooLong(line, rest, lines, error);
  }

  // The delimiter: emits the line, or ends the dropping of a truncated one.
  void endLine(PartialLine& line, std::vector<std::string>& lines) {
    if (line.dropping) {
      noteTruncated(line);
      return;
    }
    if (delimiter_ == '\n' && !line.text.empty() && line.text.back() == '\r') line.text.pop_back();
    // append() held at most maxLine_ bytes plus that '\r'.
    lines.push_back(std::move(line.text));
    line.text.clear();
  }

  // A line over the limit whose first line.text bytes are held and `rest`
  // more were seen. kFail: sets `error`, false. kTruncate: emits the first
  // maxLine_ bytes and drops the rest up to the delimiter.
  bool tooLong(PartialLine& line, size_t rest, std::vector<std::string>& lines,
               std::string& error) {
    if (!truncate_) {
      error = "socketTextStream: a line from " + where_ +
              " exceeds source.socket.max-line-length (" + MemorySize{maxLine_}.toString() + ")";
      return false;
    }
    line.dropped = line.text.size() - maxLine_ + rest;
    line.text.resize(maxLine_);
    lines.push_back(std::move(line.text));
    line.text.clear();
    line.dropping = true;
    return true;
  }

  void noteTruncated(PartialLine& line) {
    ++truncatedLines_;
    if (truncatedLines_ % SocketTextSource::kTruncationWarningEvery == 1 ||
        SocketTextSource::kTruncationWarningEvery == 1) {
      log::warn(
          "socketTextStream: a line from {} exceeded source.socket.max-line-length ({}): emitted "
          "its first {} bytes, dropped {} bytes more ({} lines truncated so far; this warning "
          "repeats every {})",
          where_, MemorySize{maxLine_}.toString(), maxLine_, line.dropped, truncatedLines_,
          SocketTextSource::kTruncationWarningEvery);
    }
    line.dropping = false;
    line.dropped = 0;
  }

  // Moves `lines` into the queue, waiting for space; false when stopped.
  bool push(std::vector<std::string>& lines) {
    size_t i = 0;
    while (i < lines.size()) {
      {
        std::unique_lock lock(mu_);
        notFull_.wait(lock, [&] { return stop_ || hasRoomFor(lines[i]); });
        if (stop_) return false;
        while (i < lines.size() && hasRoomFor(lines[i])) {
          queuedBytes_ += lines[i].size();
          queue_.push_back(std::move(lines[i++]));
        }
      }
      context_.signalAvailable();
    }
    lines.clear();
    return true;
  }

  // Caller holds mu_. An empty queue takes any line, so one longer than the
  // byte capacity cannot wedge the fetcher.
  bool hasRoomFor(const std::string& line) const {
    if (queue_.empty()) return true;
    return queue_.size() < SocketTextSource::kQueueCapacity &&
           queuedBytes_ + line.size() <= SocketTextSource::kQueueCapacityBytes;
  }

  // Waits until `fd` has `events`, close() is called, or `timeout` passes
  // (negative: no timeout): 0 ready (or an error the next call reports),
  // -1 stopped, 1 timed out.
  int waitFor(int fd, short events, std::chrono::milliseconds timeout) {
    pollfd fds[2] = {{fd, events, 0}, {wakePipe_[0], POLLIN, 0}};
    // A year at most, so that the deadline cannot overflow the clock.
    timeout = std::min<std::chrono::milliseconds>(timeout, std::chrono::hours(24 * 365));
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int waitMs = -1;
      if (timeout.count() >= 0) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(
                              deadline - std::chrono::steady_clock::now())
                              .count();
        if (left <= 0) return 1;
        waitMs = static_cast<int>(std::min<int64_t>(left, std::numeric_limits<int>::max()));
      }
      const int rc = ::poll(fds, 2, waitMs);
      if (rc < 0 && errno == EINTR) continue;
      if (fds[1].revents != 0) return -1;
      if (rc == 0) continue;  // the deadline check above decides
      return 0;
    }
  }

  // Waits `ms` milliseconds unless close() is called first (then true).
  bool waitForStop(int ms) {
    pollfd fds[1] = {{wakePipe_[0], POLLIN, 0}};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return false;
      const int rc = ::poll(fds, 1, static_cast<int>(left));
      if (rc > 0) return true;
      if (rc < 0 && errno != EINTR) return false;
    }
  }

  SourceReaderContext& context_;
  const std::string host_;
  const int port_;
  const char delimiter_;
  const int64_t maxRetry_;
  const size_t maxLine_;    // longest line emitted
  const size_t holdLimit_;  // most bytes of one line ever held
  const bool truncate_;     // OversizedLinePolicy::kTruncate
  const std::chrono::milliseconds connectTimeout_;
  const std::string where_;     // "host:port" for messages
  int wakePipe_[2] = {-1, -1};  // close() writes a byte to stop the fetcher
  std::thread fetcher_;
  int64_t truncatedLines_ = 0;  // fetcher thread

  std::mutex mu_;
  std::condition_variable notFull_;
  std::deque<std::string> queue_;  // guarded by mu_
  size_t queuedBytes_ = 0;         // guarded by mu_; the sizes of queue_'s lines
  bool finished_ = false;          // guarded by mu_; the fetcher is done
  std::string error_;              // guarded by mu_; set before finished_
  bool stop_ = false;              // guarded by mu_

  std::vector<std::string> batch_;  // task thread: lines taken from queue_
};

// " (from -D)" / " (from conf/config.yaml:3)" for a set key, else "".
std::string setAt(const Configuration& config, std::string_view key) {
  const std::string source = config.source(key);
  return source.empty() ? std::string() : " (from " + source + ")";
}

}  // namespace

SocketTextSourceOptions SocketTextSourceOptions::fromConfiguration(const Configuration& config) {
  SocketTextSourceOptions out;
  const MemorySize maxLine = config.get(options::kSourceSocketMaxLineLength);
  if (maxLine.bytes == 0) {
    throw SluiceException(std::string(options::kSourceSocketMaxLineLength.key) +
                          " must be at least 1 byte, got " + maxLine.toString() +
                          setAt(config, options::kSourceSocketMaxLineLength.key));
  }
  out.maxLineLength = static_cast<size_t>(
      std::min<uint64_t>(maxLine.bytes, std::numeric_limits<size_t>::max() / 2));
  const std::string policy = config.get(options::kSourceSocketOversizedLines);
  std::string lower = policy;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "fail") {
    out.oversizedLines = OversizedLinePolicy::kFail;
  } else if (lower == "truncate") {
    out.oversizedLines = OversizedLinePolicy::kTruncate;
  } else {
    throw SluiceException(std::string(options::kSourceSocketOversizedLines.key) +
                          ": unknown policy '" + policy + "'; use fail or truncate" +
                          setAt(config, options::kSourceSocketOversizedLines.key));
  }
  out.connectTimeout = config.get(options::kSourceSocketConnectTimeout);
  if (out.connectTimeout.count() <= 0) {
    throw SluiceException(std::string(options::kSourceSocketConnectTimeout.key) +
                          " must be above 0 ms, got " + formatDuration(out.connectTimeout) +
                          setAt(config, options::kSourceSocketConnectTimeout.key));
  }
  return out;
}

SocketTextSource::SocketTextSource(std::string host, int port, char delimiter, int64_t maxRetry,
                                   SocketTextSourceOptions options)
    : host_(std::move(host)),
      port_(port),
      delimiter_(delimiter),
      maxRetry_(maxRetry),
      options_(options) {
  if (host_.empty()) throw SluiceException("socketTextStream: the host name is empty");
  if (port < 0 || port > 65535) {
    throw SluiceException("socketTextStream: port " + std::to_string(port) +
                          " is out of range [0, 65535]");
  }
  if (options_.maxLineLength == 0) {
    throw SluiceException("socketTextStream: the maximum line length must be at least 1 byte");
  }
  if (options_.connectTimeout.count() <= 0) {
    throw SluiceException("socketTextStream: the connect timeout must be above 0 ms, got " +
                          std::to_string(options_.connectTimeout.count()) + " ms");
  }
}

std::unique_ptr<SplitEnumerator<SocketSplit>> SocketTextSource::createEnumerator(
    SplitEnumeratorContext<SocketSplit>& context) const {
  return std::make_unique<SocketEnumerator>(context);
}

std::unique_ptr<SourceReader<std::string, SocketSplit>> SocketTextSource::createReader(
    SourceReaderContext& context) const {
  return std::make_unique<SocketTextReader>(context, host_, port_, delimiter_, maxRetry_, options_);
}

std::unique_ptr<SplitEnumerator<SocketSplit>> SocketTextSource::restoreEnumerator(
    SplitEnumeratorContext<SocketSplit>& context, std::vector<SocketSplit>) const {
  return createEnumerator(context);
}

}  // namespace sluice
