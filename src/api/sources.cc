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
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

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

class SocketTextReader final : public SourceReader<std::string, SocketSplit> {
 public:
  SocketTextReader(SourceReaderContext& context, std::string host, int port, char delimiter,
                   int64_t maxRetry)
      : context_(context),
        host_(std::move(host)),
        port_(port),
        delimiter_(delimiter),
        maxRetry_(maxRetry),
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
        batch_.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      ended = finished_ && queue_.empty();
    }
    if (!batch_.empty()) {
      notFull_.notify_one();
      for (const auto& line : batch_) output.collect(line);
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
  enum class Outcome { kEnded, kFailed, kStopped };

  // The fetcher thread.
  void fetch() {
    log::setThreadName("socketTextStream " + where_);
    std::string partial;  // text after the last delimiter; kept across reconnects
    std::string error;
    int64_t retries = 0;
    for (;;) {
      const Outcome o = connectAndRead(partial, error);
      if (o == Outcome::kStopped) return;
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
    if (error.empty() && !partial.empty()) last.push_back(std::move(partial));
    if (!push(last)) return;
    {
      std::lock_guard lock(mu_);
      error_ = std::move(error);
      finished_ = true;
    }
    context_.signalAvailable();
  }

  // One connection: connects, reads until EOF, an error or stop.
  Outcome connectAndRead(std::string& partial, std::string& error) {
    int fd = -1;
    Outcome o = connect(fd, error);
    if (o != Outcome::kEnded) return o;
    o = readLoop(fd, partial, error);
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
    Outcome result = Outcome::kFailed;
    for (addrinfo* a = addrs; a != nullptr; a = a->ai_next) {
      const int fd =
          ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) {
        lastErr = errno;
        continue;
      }
      int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        const int ready = waitFor(fd, POLLOUT);
        if (ready < 0) {
          ::close(fd);
          result = Outcome::kStopped;
          break;
        }
        int soErr = 0;
        socklen_t len = sizeof(soErr);
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soErr, &len);
        rc = soErr == 0 ? 0 : -1;
        errno = soErr;
      }
      if (rc == 0) {
        out = fd;
        result = Outcome::kEnded;
        break;
      }
      lastErr = errno;
      ::close(fd);
    }
    ::freeaddrinfo(addrs);
    if (result == Outcome::kFailed) {
      error = "socketTextStream: cannot connect to " + where_ + ": " + errnoText(lastErr);
    }
    return result;
  }

  Outcome readLoop(int fd, std::string& partial, std::string& error) {
    std::vector<char> buf(64 << 10);
    std::vector<std::string> lines;
    for (;;) {
      const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
      if (n == 0) return Outcome::kEnded;
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          if (waitFor(fd, POLLIN) < 0) return Outcome::kStopped;
          continue;
        }
        error = "socketTextStream: error reading from " + where_ + ": " + errnoText(errno);
        return Outcome::kFailed;
      }
      const char* p = buf.data();
      const char* end = p + n;
      while (p < end) {
        const void* d = std::memchr(p, delimiter_, static_cast<size_t>(end - p));
        if (d == nullptr) {
          partial.append(p, end);
          break;
        }
        const char* q = static_cast<const char*>(d);
        partial.append(p, q);
        if (delimiter_ == '\n' && !partial.empty() && partial.back() == '\r') partial.pop_back();
        lines.push_back(std::move(partial));
        partial.clear();
        p = q + 1;
      }
      if (!push(lines)) return Outcome::kStopped;
    }
  }

  // Moves `lines` into the queue, waiting for space; false when stopped.
  bool push(std::vector<std::string>& lines) {
    size_t i = 0;
    while (i < lines.size()) {
      {
        std::unique_lock lock(mu_);
        notFull_.wait(lock,
                      [&] { return stop_ || queue_.size() < SocketTextSource::kQueueCapacity; });
        if (stop_) return false;
        while (i < lines.size() && queue_.size() < SocketTextSource::kQueueCapacity) {
          queue_.push_back(std::move(lines[i++]));
        }
      }
      context_.signalAvailable();
    }
    lines.clear();
    return true;
  }

  // Waits until `fd` has `events` or close() is called: 0 ready, -1 stopped.
  int waitFor(int fd, short events) {
    pollfd fds[2] = {{fd, events, 0}, {wakePipe_[0], POLLIN, 0}};
    for (;;) {
      const int rc = ::poll(fds, 2, -1);
      if (rc < 0 && errno == EINTR) continue;
      if (fds[1].revents != 0) return -1;
      return 0;  // ready, or an error the next call reports
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
  const std::string where_;     // "host:port" for messages
  int wakePipe_[2] = {-1, -1};  // close() writes a byte to stop the fetcher
  std::thread fetcher_;

  std::mutex mu_;
  std::condition_variable notFull_;
  std::deque<std::string> queue_;  // guarded by mu_
  bool finished_ = false;          // guarded by mu_; the fetcher is done
  std::string error_;              // guarded by mu_; set before finished_
  bool stop_ = false;              // guarded by mu_

  std::vector<std::string> batch_;  // task thread: lines taken from queue_
};

}  // namespace

SocketTextSource::SocketTextSource(std::string host, int port, char delimiter, int64_t maxRetry)
    : host_(std::move(host)), port_(port), delimiter_(delimiter), maxRetry_(maxRetry) {
  if (host_.empty()) throw SluiceException("socketTextStream: the host name is empty");
  if (port < 0 || port > 65535) {
    throw SluiceException("socketTextStream: port " + std::to_string(port) +
                          " is out of range [0, 65535]");
  }
}

std::unique_ptr<SplitEnumerator<SocketSplit>> SocketTextSource::createEnumerator(
    SplitEnumeratorContext<SocketSplit>& context) const {
  return std::make_unique<SocketEnumerator>(context);
}

std::unique_ptr<SourceReader<std::string, SocketSplit>> SocketTextSource::createReader(
    SourceReaderContext& context) const {
  return std::make_unique<SocketTextReader>(context, host_, port_, delimiter_, maxRetry_);
}

std::unique_ptr<SplitEnumerator<SocketSplit>> SocketTextSource::restoreEnumerator(
    SplitEnumeratorContext<SocketSplit>& context, std::vector<SocketSplit>) const {
  return createEnumerator(context);
}

}  // namespace sluice
