#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <sluice/sinks.h>

#include "core/logging.h"

namespace sluice::internal {

std::string printPrefix(const std::string& sinkIdentifier, int subtask, int parallelism) {
  std::string prefix = sinkIdentifier;
  if (parallelism > 1) {
    if (!prefix.empty()) prefix += ':';
    prefix += std::to_string(subtask + 1);
  }
  if (!prefix.empty()) prefix += "> ";
  return prefix;
}

void writeLine(std::FILE* stream, const std::string& data) {
  // Output errors (a closed pipe) are ignored, as Java's PrintStream does.
  std::fwrite(data.data(), 1, data.size(), stream);
  std::fflush(stream);
}

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& api, const std::string& what, const std::string& path,
                       int err) {
  throw SluiceException(api + ": " + what + " '" + path + "': " + std::strerror(err));
}

[[noreturn]] void failExists(const std::string& api, const std::string& path) {
  throw SluiceException(api + ": '" + path +
                        "' already exists and WriteMode::kNoOverwrite does not replace it "
                        "(use WriteMode::kOverwrite)");
}

// Makes `dir` an existing directory for the subtask files. Several subtasks
// run this at once, so every step tolerates another one having done it.
void prepareDirectory(const std::string& api, const std::string& dir, WriteMode mode) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return;
    if (mode == WriteMode::kNoOverwrite) failExists(api, dir);
    if (::unlink(dir.c_str()) != 0 && errno != ENOENT) fail(api, "cannot delete", dir, errno);
  }
  if (::mkdir(dir.c_str(), 0777) != 0) {
    const int err = errno;
    if (err == EEXIST && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return;
    fail(api, "cannot create directory", dir, err);
  }
}

}  // namespace

TextOutputFile::TextOutputFile(std::string api, const std::string& path, WriteMode mode,
                               int subtask, int parallelism, bool resume)
    : api_(std::move(api)) {
  if (resume) {
    file_ = parallelism > 1 ? (path.back() == '/' ? path : path + "/") + std::to_string(subtask + 1)
                            : path;
    if (parallelism > 1 && ::mkdir(path.c_str(), 0777) != 0 && errno != EEXIST) {
      fail(api_, "cannot create directory", path, errno);
    }
    fd_ = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (fd_ < 0) fail(api_, "cannot open", file_, errno);
    buffer_.reserve(kBufferSize + 4096);
    return;
  }
  if (parallelism > 1) {
    prepareDirectory(api_, path, mode);
    file_ = (path.back() == '/' ? path : path + "/") + std::to_string(subtask + 1);
  } else {
    file_ = path;
    struct stat st;
    if (mode == WriteMode::kOverwrite && ::stat(file_.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      std::error_code ec;
      fs::remove_all(file_, ec);
      if (ec) fail(api_, "cannot delete", file_, ec.value());
    }
  }
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC;
  flags |= mode == WriteMode::kNoOverwrite ? O_EXCL : O_TRUNC;
  fd_ = ::open(file_.c_str(), flags, 0666);
  if (fd_ < 0) {
    const int err = errno;
    if (err == EEXIST) failExists(api_, file_);
    fail(api_, "cannot create", file_, err);
  }
  buffer_.reserve(kBufferSize + 4096);
}

TextOutputFile::~TextOutputFile() { close(); }

void TextOutputFile::writeOut() {
  if (fd_ < 0) {  // written after close(): nothing can take it
    buffer_.clear();
    return;
  }
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      // What could not be written is dropped: the job fails with this error.
      buffer_.clear();
      fail(api_, "cannot write", file_, err);
    }
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
}

void TextOutputFile::close() {
  if (fd_ < 0) return;
  try {
    writeOut();
  } catch (const SluiceException& e) {
    log::error("{}", e.what());
  }
  if (::close(fd_) != 0) {
    log::error("{}: cannot close '{}': {}", api_, file_, std::strerror(errno));
  }
  fd_ = -1;
}

}  // namespace sluice::internal
