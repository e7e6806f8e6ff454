// Savepoints and stop-with-savepoint triggered over REST (Flink's
// asynchronous operations: POST returns a trigger id at once, GET
// .../savepoints/:triggerid reports IN_PROGRESS, then the location or the
// failure). Internal to rest/web_monitor.
//
// Each operation runs the blocking Dispatcher::savepoint on its own thread.
// At most kRunning run at once; the results of the last kKept stay for the
// status call, older finished ones are forgotten. Thread-safe; stop() waits
// for the operations still running, and no new one starts afterwards.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sluice/core/status.h>

#include "rest/dispatcher.h"

namespace sluice::rest {

class SavepointOperations {
 public:
  static constexpr size_t kKept = 100;
  static constexpr size_t kRunning = 16;

  explicit SavepointOperations(Dispatcher& dispatcher) : dispatcher_(dispatcher) {}
  ~SavepointOperations() { stop(); }
  SavepointOperations(const SavepointOperations&) = delete;
  SavepointOperations& operator=(const SavepointOperations&) = delete;

  struct Outcome {
    bool done = false;
    std::string location;  // when done without error
    Status error;
  };

  // Starts one and returns its trigger id: `triggerId` when given (the same
  // id again for the same job is a retry and starts nothing), else a new one.
  // InvalidArgument: `triggerId` names another job's operation;
  // Cancelled: kRunning operations run already, or stop() was called.
  Result<std::string> trigger(const std::string& jobId, const std::string& directory,
                              bool terminate, bool drain, std::string triggerId);

  // The operation `triggerId` of `jobId`, or nothing.
  std::optional<Outcome> status(const std::string& jobId, const std::string& triggerId);

  void stop();

 private:
  struct Operation {
    std::string jobId;
    Outcome outcome;
  };
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };

  void run(const std::string& triggerId, const std::string& jobId, const std::string& directory,
           bool terminate, bool drain);
  void reapLocked();

  Dispatcher& dispatcher_;
  std::mutex mu_;
  std::map<std::string, Operation> ops_;
  std::deque<std::string> order_;  // trigger ids, oldest first
  std::vector<Worker> workers_;
  bool stopped_ = false;
};

}  // namespace sluice::rest
