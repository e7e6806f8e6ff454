#include "rest/savepoint_operations.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/logging.h"
#include "core/random_id.h"

namespace sluice::rest {

Result<std::string> SavepointOperations::trigger(const std::string& jobId,
                                                 const std::string& directory, bool terminate,
                                                 bool drain, std::string triggerId) {
  std::lock_guard lock(mu_);
  if (stopped_) return Status::cancelled("the REST endpoint is shutting down");
  reapLocked();
  if (!triggerId.empty()) {
    auto it = ops_.find(triggerId);
    if (it != ops_.end()) {
      if (it->second.jobId == jobId) return triggerId;  // a retry
      return Status::invalidArgument(
          fmt::format("trigger id {} is already used by another job's operation", triggerId));
    }
  } else {
    triggerId = randomHexId();
  }
  const size_t running = static_cast<size_t>(std::count_if(
      ops_.begin(), ops_.end(), [](const auto& op) { return !op.second.outcome.done; }));
  if (running >= kRunning) {
    return Status::cancelled(
        fmt::format("too many savepoints are in progress (at most {}); try again later", kRunning));
  }
  ops_[triggerId] = Operation{jobId, {}};
  order_.push_back(triggerId);
  while (ops_.size() > kKept) {
    auto done = std::find_if(order_.begin(), order_.end(),
                             [&](const std::string& id) { return ops_.at(id).outcome.done; });
    if (done == order_.end()) break;
    ops_.erase(*done);
    order_.erase(done);
  }
  auto finished = std::make_shared<std::atomic<bool>>(false);
  std::thread t([this, triggerId, jobId, directory, terminate, drain, finished] {
    run(triggerId, jobId, directory, terminate, drain);
    finished->store(true);
  });
  workers_.push_back(Worker{std::move(t), std::move(finished)});
  return triggerId;
}

void SavepointOperations::run(const std::string& triggerId, const std::string& jobId,
                              const std::string& directory, bool terminate, bool drain) {
  log::setThreadName("savepoint " + triggerId.substr(0, 8));
  Result<std::string> r = Status::internal("the savepoint did not run");
  try {
    r = dispatcher_.savepoint(jobId, directory, terminate, drain);
  } catch (const std::exception& e) {
    r = Status::internal(std::string("the savepoint failed: ") + e.what());
  } catch (...) {
    r = Status::internal("the savepoint failed with an unknown exception");
  }
  if (!r.isOk()) log::warn("savepoint of job {} failed: {}", jobId, r.status().toString());
  std::lock_guard lock(mu_);
  auto it = ops_.find(triggerId);
  if (it == ops_.end()) return;
  it->second.outcome.done = true;
  if (r.isOk()) {
    it->second.outcome.location = r.value();
  } else {
    it->second.outcome.error = r.status();
  }
}

std::optional<SavepointOperations::Outcome> SavepointOperations::status(
    const std::string& jobId, const std::string& triggerId) {
  std::lock_guard lock(mu_);
  auto it = ops_.find(triggerId);
  if (it == ops_.end() || it->second.jobId != jobId) return std::nullopt;
  return it->second.outcome;
}

void SavepointOperations::stop() {
  std::vector<Worker> workers;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    workers.swap(workers_);
  }
  for (Worker& w : workers) {
    if (w.thread.joinable()) w.thread.join();
  }
}

void SavepointOperations::reapLocked() {
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->finished->load()) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace sluice::rest
