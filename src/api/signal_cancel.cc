#include "api/signal_cancel.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "core/logging.h"
#include "runtime/mini_cluster.h"

namespace sluice::internal {
namespace {

// The handler only writes the signal number to a pipe; a watcher thread
// does the cancelling, outside signal context.
std::atomic<int> gPipeWrite{-1};
std::atomic<int> gSignalled{0};

void onSignal(int sig) {
  int expected = 0;
  if (!gSignalled.compare_exchange_strong(expected, sig)) {
    // The second signal: the default action, now.
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  const int fd = gPipeWrite.load();
  if (fd >= 0) {
    const unsigned char b = static_cast<unsigned char>(sig);
    const int saved = errno;
    [[maybe_unused]] ssize_t n = ::write(fd, &b, 1);
    errno = saved;
  }
}

const char* signalName(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

struct Registry {
  std::mutex mu;
  std::set<runtime::JobRun*> runs;
  int pipeRead = -1;
  int pipeWrite = -1;
  std::thread watcher;
  bool installed[2] = {false, false};
  struct sigaction previous[2]{};
};

Registry& registry() {
  static Registry r;
  return r;
}

constexpr int kSignals[2] = {SIGTERM, SIGINT};

void watch(int fd) {
  log::setThreadName("signal-cancel");
  for (;;) {
    unsigned char b = 0;
    const ssize_t n = ::read(fd, &b, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || b == 0) return;  // closed, or told to stop
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    for (runtime::JobRun* run : r.runs) {
      log::warn("Received {}: cancelling job {} (a second signal ends the process at once)",
                signalName(b), run->jobId());
      run->cancel();
    }
  }
}

}  // namespace

SignalCancelScope::SignalCancelScope(runtime::JobRun* run) : run_(run) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (r.runs.empty()) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) == 0) {
      r.pipeRead = fds[0];
      r.pipeWrite = fds[1];
      gPipeWrite.store(fds[1]);
      r.watcher = std::thread(watch, fds[0]);
      for (int i = 0; i < 2; ++i) {
        struct sigaction current {};
        ::sigaction(kSignals[i], nullptr, &current);
        if (current.sa_handler != SIG_DFL || (current.sa_flags & SA_SIGINFO)) continue;
        struct sigaction sa {};
        sa.sa_handler = onSignal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        r.installed[i] = ::sigaction(kSignals[i], &sa, &r.previous[i]) == 0;
      }
    }
  }
  r.runs.insert(run);
}

SignalCancelScope::~SignalCancelScope() {
  Registry& r = registry();
  std::thread watcher;
  int pipeRead = -1;
  int pipeWrite = -1;
  int pending = 0;
  {
    std::lock_guard lock(r.mu);
    r.runs.erase(run_);
    if (!r.runs.empty() || r.pipeWrite < 0) return;
    for (int i = 0; i < 2; ++i) {
      if (r.installed[i]) ::sigaction(kSignals[i], &r.previous[i], nullptr);
      r.installed[i] = false;
    }
    gPipeWrite.store(-1);
    // A signal that came after the job stopped, before the handlers went.
    pending = gSignalled.exchange(0);
    const unsigned char stop = 0;
    [[maybe_unused]] ssize_t n = ::write(r.pipeWrite, &stop, 1);
    watcher = std::move(r.watcher);
    // The registry is free for the next scope now; these fds are ours.
    pipeRead = std::exchange(r.pipeRead, -1);
    pipeWrite = std::exchange(r.pipeWrite, -1);
  }
  if (watcher.joinable()) watcher.join();
  ::close(pipeRead);
  ::close(pipeWrite);
  if (pending != 0) ::raise(pending);  // its own disposition again
}

void SignalCancelScope::finishIfSignalled() {
  const int sig = gSignalled.load();
  if (sig == 0) return;
  log::info("Job {} was cancelled by {}; ending the process by it", run_->jobId(), signalName(sig));
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace sluice::internal
