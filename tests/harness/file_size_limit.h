// FileSizeLimit: a full disk, as far as this process's file writes are
// concerned. While the object lives, no file of the process may grow past
// `bytes` (RLIMIT_FSIZE): a write beyond it fails with EFBIG ("File too
// large") instead of raising SIGXFSZ, which is ignored meanwhile. The
// destructor restores the limit and the signal's disposition.
//
// The limit is per process: every thread's writes meet it, so a test keeps
// the window short and asserts on the error it produced. A regular file the
// process writes meanwhile (stdout or stderr redirected to a file, say)
// loses what would pass the limit, silently.
#pragma once

#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace sluice::test {

class FileSizeLimit {
 public:
  explicit FileSizeLimit(uint64_t bytes) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    if (::sigaction(SIGXFSZ, &ignore, &previousAction_) != 0 ||
        ::getrlimit(RLIMIT_FSIZE, &previousLimit_) != 0) {
      throw std::runtime_error(std::string("FileSizeLimit: ") + std::strerror(errno));
    }
    rlimit limit = previousLimit_;
    limit.rlim_cur = bytes;
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) {
      const int error = errno;
      ::sigaction(SIGXFSZ, &previousAction_, nullptr);
      throw std::runtime_error(std::string("FileSizeLimit: setrlimit: ") + std::strerror(error));
    }
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &previousLimit_);
    ::sigaction(SIGXFSZ, &previousAction_, nullptr);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  struct sigaction previousAction_ {};
  rlimit previousLimit_{};
};

}  // namespace sluice::test
