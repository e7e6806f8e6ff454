// SIGTERM and SIGINT while execute() blocks: the first cancels the running
// job gracefully (tasks stop, checkpoint retention applies as configured:
// execution.checkpointing.externalized-checkpoint-retention), then the
// process ends by that signal as it would have without Sluice; a second
// signal ends it at once.
//
// Installed only over the default disposition: a program with its own
// handlers keeps them. Several jobs executing at once are all cancelled.
#pragma once

#include <memory>

namespace sluice::runtime {
class JobRun;
}

namespace sluice::internal {

class SignalCancelScope {
 public:
  // Cancels `run` on SIGTERM / SIGINT until destroyed.
  explicit SignalCancelScope(runtime::JobRun* run);
  ~SignalCancelScope();
  SignalCancelScope(const SignalCancelScope&) = delete;
  SignalCancelScope& operator=(const SignalCancelScope&) = delete;

  // Called once the job stopped: when a signal cancelled it, ends the
  // process by that signal (does not return).
  void finishIfSignalled();

 private:
  runtime::JobRun* run_;
};

}  // namespace sluice::internal
