#include "checkpoint/subtask_checkpointer.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "checkpoint/checkpoint_storage.h"

namespace sluice::checkpoint {

// What the synchronous part captured, on its way to the executor.
struct SubtaskCheckpointer::Upload {
  int64_t id = 0;
  std::string directory;  // empty: keep keyed state in memory
  TaskStateSnapshot snapshot;
  std::vector<std::pair<int, std::unique_ptr<StateSnapshotWriter>>> keyed;  // by node
  // Timers the operators write here rather than on the task thread, by node.
  std::vector<std::pair<int, std::function<std::string()>>> timers;
};

SubtaskCheckpointer::SubtaskCheckpointer(Setup setup) : setup_(std::move(setup)) {}

SubtaskCheckpointer::~SubtaskCheckpointer() { waitForPendingUploads(); }

void SubtaskCheckpointer::rememberRestoredFiles(
    const std::map<int, OperatorStateRestore>& restore) {
  const std::string& shared = setup_.incrementalSharedDirectory;
  if (shared.empty()) return;
  std::lock_guard lock(mu_);
  for (const auto& [node, r] : restore) {
    for (const KeyedStateHandleRef& h : r.keyedState) {
      // Files from a checkpoint written before checksums are copied again.
      if (!h.native || !h.native->hasChecksums) continue;
      for (const auto& f : h.native->sstFiles) {
        if (std::filesystem::path(f.location).parent_path() == shared) {
          confirmedFiles_[node][f.uniqueId] = f;
        }
      }
    }
  }
}

void SubtaskCheckpointer::checkpointState(const CheckpointBarrier& barrier,
                                          const CheckpointOptions& options,
                                          std::span<const ChainedOperatorRef> operators,
                                          const std::function<void()>& emitBarrier) {
  lastCheckpointId_ = barrier.id;
  taken_.push_back(barrier.id);
  if (taken_.size() > 64) taken_.pop_front();
  if (emitBarrier) {
    for (const ChainedOperatorRef& o : operators) {
      try {
        o.op->prepareSnapshotPreBarrier(barrier.id);
      } catch (const OperatorFailure&) {
        throw;
      } catch (const TaskCancelledException&) {
        throw;
      } catch (...) {
        throw OperatorFailure(*o.name, describeCurrentException());
      }
    }
    emitBarrier();
  }
  auto upload = std::make_shared<Upload>();
  upload->id = barrier.id;
  upload->directory = options.targetDirectory;
  if (!setup_.incrementalSharedDirectory.empty() && options.type == CheckpointType::kCheckpoint &&
      !upload->directory.empty()) {
    incrementalCheckpointId_ = barrier.id;
  }
  // As in Flink, an operator that cannot snapshot fails the checkpoint, not
  // the task.
  for (const ChainedOperatorRef& o : operators) {
    try {
      OperatorStateSnapshot s = o.op->snapshotState(barrier.id);
      OperatorSubtaskState& st = upload->snapshot.operators[o.node];
      st.operatorState = std::move(s.operatorState);
      st.timers = std::move(s.timers);
      if (s.writeTimers) upload->timers.emplace_back(o.node, std::move(s.writeTimers));
      if (s.keyedState) upload->keyed.emplace_back(o.node, std::move(s.keyedState));
    } catch (const TaskCancelledException&) {
      incrementalCheckpointId_ = -1;
      throw;
    } catch (...) {
      incrementalCheckpointId_ = -1;
      decline(barrier.id,
              fmt::format("operator '{}' (subtask {}/{}) could not snapshot its state: {}", *o.name,
                          setup_.task.subtask + 1, setup_.parallelism, describeCurrentException()),
              true);
      return;
    }
  }
  incrementalCheckpointId_ = -1;
  {
    std::lock_guard lock(mu_);
    ++uploadsInFlight_;
  }
  setup_.executor->submit([this, upload] { this->upload(upload); });
}

Status SubtaskCheckpointer::writeKeyed(Upload& up, std::vector<std::string>& uploaded,
                                       std::map<int, StoredFiles>& stored) {
  for (auto& [node, writer] : up.keyed) {
    KeyedStateHandleRef& ref = up.snapshot.operators[node].keyed;
    if (const NativeKeyedSnapshot* native = writer->nativeSnapshot()) {
      StoredFiles reusable;
      {
        std::lock_guard lock(mu_);
        reusable = confirmedFiles_[node];
      }
      Result<KeyedStateHandleRef> r = storeNativeSnapshot(
          *native, fmt::format("{}/{}-{}", up.directory, node, setup_.task.subtask),
          setup_.incrementalSharedDirectory, reusable, uploaded);
      if (!r.isOk()) return r.status();
      ref = std::move(r).value();
      for (const auto& f : ref.native->sstFiles) stored[node][f.uniqueId] = f;
      continue;
    }
    if (up.directory.empty()) {
      std::ostringstream out;
      writer->writeTo(out);
      ref.bytes = std::make_shared<const std::string>(out.str());
      continue;
    }
    const std::string path = fmt::format("{}/{}-{}.keyed", up.directory, node, setup_.task.subtask);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) {
      return Status::ioError(fmt::format("cannot create '{}': {}", path, std::strerror(errno)));
    }
    try {
      writer->writeTo(out);
    } catch (...) {
      return Status::ioError(
          fmt::format("cannot write '{}': {}", path, describeCurrentException()));
    }
    errno = 0;
    out.close();
    if (!out) {
      return Status::ioError(fmt::format("cannot write '{}': {}", path,
                                         errno != 0 ? std::strerror(errno) : "close failed"));
    }
    ref.path = path;
  }
  return Status::ok();
}

void SubtaskCheckpointer::upload(const std::shared_ptr<Upload>& up) {
  // Shared files this task copied for the checkpoint; removed again when it
  // cannot acknowledge.
  std::vector<std::string> uploaded;
  std::map<int, StoredFiles> stored;
  Status st;
  try {
    for (auto& [node, write] : up->timers) up->snapshot.operators[node].timers = write();
    up->timers.clear();
    st = writeKeyed(*up, uploaded, stored);
  } catch (...) {
    st = Status::ioError(describeCurrentException());
  }
  up->timers.clear();
  up->keyed.clear();  // the snapshots' resources go before the task may close
  if (st.isOk()) {
    if (!stored.empty()) {
      std::lock_guard lock(mu_);
      for (auto& [node, files] : stored) pendingFiles_[node][up->id] = std::move(files);
    }
    setup_.coordinator->acknowledgeCheckpoint(up->id, setup_.task, std::move(up->snapshot));
  } else {
    std::error_code ec;
    for (const auto& f : uploaded) std::filesystem::remove(f, ec);
    decline(up->id,
            fmt::format("task '{}' ({}/{}) could not write its state: {}", setup_.taskName,
                        setup_.task.subtask + 1, setup_.parallelism, st.message()),
            true);
  }
  std::lock_guard lock(mu_);
  --uploadsInFlight_;
  uploadsDone_.notify_all();
}

void SubtaskCheckpointer::decline(int64_t id, const std::string& reason, bool countsAsFailure) {
  setup_.coordinator->declineCheckpoint(id, setup_.task, reason, countsAsFailure);
}

void SubtaskCheckpointer::notifyCheckpointComplete(int64_t id) {
  if (id == kFinalCheckpointId) return;
  std::lock_guard lock(mu_);
  for (auto& [node, byId] : pendingFiles_) {
    auto it = byId.find(id);
    if (it != byId.end()) confirmedFiles_[node] = std::move(it->second);
    byId.erase(byId.begin(), byId.upper_bound(id));
  }
}

void SubtaskCheckpointer::waitForPendingUploads() {
  std::unique_lock lock(mu_);
  uploadsDone_.wait(lock, [&] { return uploadsInFlight_ == 0; });
}

}  // namespace sluice::checkpoint
