#include "runtime/task.h"

#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include <sluice/core/config_options.h>

#include "core/logging.h"
#include "runtime/watermark_valve.h"

namespace sluice {

namespace runtime {
namespace {

class NullOutput final : public OutputBase {
 public:
  void emitWatermark(Watermark) override {}
  void emitWatermarkStatus(WatermarkStatus) override {}
};

constexpr uint8_t kBarrierTerminate = 1;
constexpr uint8_t kBarrierDrain = 2;

// [tag][i64 id][i64 timestamp][u8 type][u8 flags]
void broadcastBarrier(RecordWriter& writer, const CheckpointBarrier& b,
                      const CheckpointOptions& o) {
  uint8_t buf[19];
  buf[0] = static_cast<uint8_t>(ElementTag::kBarrier);
  std::memcpy(buf + 1, &b.id, 8);
  std::memcpy(buf + 9, &b.timestamp, 8);
  buf[17] = static_cast<uint8_t>(b.type);
  buf[18] =
      static_cast<uint8_t>((o.terminate ? kBarrierTerminate : 0) | (o.drain ? kBarrierDrain : 0));
  writer.broadcastEmit(buf, sizeof buf);
  writer.flushAll();
}

void readBarrier(DataInputView& in, CheckpointBarrier& b, CheckpointOptions& o) {
  b.id = in.readI64();
  b.timestamp = in.readI64();
  b.type = static_cast<CheckpointType>(in.readU8());
  const uint8_t flags = in.readU8();
  o.type = b.type;
  o.terminate = (flags & kBarrierTerminate) != 0;
  o.drain = (flags & kBarrierDrain) != 0;
}

}  // namespace

// The per-operator OperatorContext and RuntimeContext.
class Task::Context final : public OperatorContext, public RuntimeContext {
 public:
  Context(Task& task, const StreamNode& node)
      : task_(task),
        node_(node),
        nameWithSubtasks_(fmt::format("{} ({}/{})#{}", task.taskName_, task.subtask_ + 1,
                                      task.vertex_.parallelism, task.attemptNumber_)) {}

  RuntimeContext& runtimeContext() override { return *this; }
  OutputBase* sideOutput(const std::string& tagId) override {
    auto it = sideOutputs_.find(tagId);
    return it == sideOutputs_.end() ? nullptr : it->second;
  }
  void countDroppedRecord() override { ++dropped_; }
  void sendSplitRequest() override {
    if (task_.coordinator_) task_.coordinator_->requestSplit(task_.subtask_);
  }
  void signalInputAvailable() override { task_.signalInputAvailable(); }
  void requestWakeupAt(std::chrono::steady_clock::time_point when) override {
    task_.requestWakeupAt(when);
  }

  const Configuration& configuration() override { return task_.services_->configuration(); }
  const Clock& clock() override { return task_.services_->clock(); }
  std::shared_ptr<void> slotResource(const std::string& key,
                                     const std::function<std::shared_ptr<void>()>& make) override {
    return task_.services_->slotResource(task_.subtask_, key, make);
  }
  void registerProcessingTimer(int64_t timestamp, std::function<void(int64_t)> callback) override {
    task_.registerProcessingTimer(timestamp, std::move(callback));
  }
  void incrementCounter(const std::string& name, int64_t n) override { counters_[name] += n; }
  int64_t managedMemoryPerSlot() override {
    const auto total =
        static_cast<int64_t>(configuration().get(options::kTaskManagerMemoryManagedSize).bytes);
    return total / task_.services_->numberOfSlots();
  }
  bool incrementalSnapshot(int64_t checkpointId) override {
    return task_.incrementalCheckpointId_ == checkpointId;
  }

  int getIndexOfThisSubtask() const override { return task_.subtask_; }
  int getNumberOfParallelSubtasks() const override { return task_.vertex_.parallelism; }
  int getMaxNumberOfParallelSubtasks() const override { return task_.vertex_.maxParallelism; }
  int getAttemptNumber() const override { return task_.attemptNumber_; }
  const std::string& getTaskName() const override { return task_.taskName_; }
  const std::string& getOperatorName() const override { return node_.name; }
  const std::string& getTaskNameWithSubtasks() const override { return nameWithSubtasks_; }
  const std::string& getJobName() const override { return task_.jobGraph_.jobName; }
  void addAccumulator(const std::string& name, Accumulator* acc) override {
    if (!accumulators_.emplace(name, acc).second) {
      throw SluiceException(
          fmt::format("accumulator '{}' is already registered in operator '{}'", name, node_.name));
    }
  }
  Accumulator* getAccumulator(const std::string& name) const override {
    auto it = accumulators_.find(name);
    return it == accumulators_.end() ? nullptr : it->second;
  }

  std::map<std::string, OutputBase*> sideOutputs_;
  std::map<std::string, Accumulator*> accumulators_;
  std::map<std::string, int64_t> counters_;
  int64_t dropped_ = 0;

 private:
  Task& task_;
  const StreamNode& node_;
  std::string nameWithSubtasks_;
};

std::shared_ptr<void> TaskServices::slotResource(
    int slot, const std::string& key, const std::function<std::shared_ptr<void>()>& make) {
  std::lock_guard lock(mu_);
  auto& r = resources_[{slot, key}];
  if (!r) r = make();
  return r;
}

Task::Task(const StreamGraph& graph, const JobGraph& jobGraph, int vertex, int subtask,
           int attemptNumber)
    : graph_(graph),
      jobGraph_(jobGraph),
      vertex_(jobGraph.vertices.at(vertex)),
      subtask_(subtask),
      attemptNumber_(attemptNumber),
      taskName_(vertex_.name),
      mailbox_(waker_) {}

Task::~Task() = default;

void Task::createGate(std::vector<InputChannelInfo> channels) {
  channels_ = std::move(channels);
  gate_ = std::make_unique<InputGate>(static_cast<int>(channels_.size()), waker_);
}

void Task::addWriter(int jobEdge, std::vector<RecordWriter::Target> targets, size_t segmentSize,
                     int buffersPerChannel, int floatingBuffers) {
  int segments = static_cast<int>(targets.size()) * buffersPerChannel + floatingBuffers;
  pools_.push_back(std::make_unique<BufferPool>(segmentSize, segments));
  writers_[jobGraph_.edges.at(jobEdge).streamEdge] = std::make_unique<RecordWriter>(
      std::move(targets), *pools_.back(), jobGraph_.bufferTimeoutMs == 0);
}

void Task::cancel() {
  cancelled_.store(true);
  for (auto& p : pools_) p->cancel();
  waker_.wake();
}

void Task::postSplit(std::vector<uint8_t> split) {
  pendingSplits_.fetch_add(1);
  mailbox_.post([this, s = std::move(split)]() mutable {
    // Runs on the task thread. A split that comes after the reader ended
    // stays counted, and the task fails for it (see run()).
    if (!onSplits_) return;
    pendingSplits_.fetch_sub(1);
    onSplits_({std::move(s)});
  });
}

void Task::postNoMoreSplits() {
  mailbox_.post([this] {
    if (onNoMoreSplits_) onNoMoreSplits_();
  });
}

void Task::triggerCheckpoint(CheckpointBarrier barrier, CheckpointOptions options) {
  mailbox_.post([this, barrier, options] {
    if (onTrigger_) {
      onTrigger_(barrier, options);
    } else if (responder_) {
      responder_->decline(barrier.id, vertex_.id, subtask_, "the task is not running", false);
    }
  });
}

void Task::notifyCheckpointComplete(int64_t id) {
  mailbox_.post([this, id] {
    if (onNotify_) onNotify_(id);
  });
}

void Task::resumeAfterFailedStop() {
  mailbox_.post([this] { sourceStopped_ = false; });
}

void Task::requestWakeupAt(TaskWaker::Clock::time_point when) {
  if (when < wakeupAt_) wakeupAt_ = when;
}

void Task::registerProcessingTimer(int64_t timestamp, std::function<void(int64_t)> callback) {
  timers_.push(ProcessingTimer{timestamp, timerSequence_++, std::move(callback)});
}

TaskWaker::Clock::time_point Task::fireDueTimers() {
  if (timers_.empty()) return TaskWaker::Clock::time_point::max();
  const Clock& clock = services_->clock();
  int64_t now = clock.currentTimeMillis();
  while (!timers_.empty() && timers_.top().timestamp <= now) {
    ProcessingTimer t = timers_.top();
    timers_.pop();
    t.callback(t.timestamp);
    if (cancelled_.load(std::memory_order_relaxed)) break;
    now = clock.currentTimeMillis();
  }
  if (timers_.empty() || manualClock_) return TaskWaker::Clock::time_point::max();
  return TaskWaker::Clock::now() + std::chrono::milliseconds(timers_.top().timestamp - now);
}

TaskResult Task::run() {
  log::setThreadName(fmt::format("{} ({}/{})", taskName_, subtask_ + 1, vertex_.parallelism));
  TaskResult result;
  const size_t n = vertex_.chain.size();
  std::vector<std::unique_ptr<StreamOperatorBase>> ops(n);
  std::vector<std::unique_ptr<Context>> contexts(n);
  std::vector<std::unique_ptr<OutputBase>> outputs;  // owned outputs, built tail first
  std::map<int, size_t> position;                    // stream node id -> index in chain
  size_t opened = 0;                                 // ops [n - opened, n) are open
  std::string current;                               // operator being called, for errors

  auto fail = [&](std::string who, std::string cause) {
    result.failed = true;
    result.error = fmt::format("operator '{}' (subtask {}/{} of task '{}') failed: {}", who,
                               subtask_ + 1, vertex_.parallelism, taskName_, cause);
  };

  std::vector<ElementDecoder> decoders;
  OutputBase* headOutputPtr = nullptr;
  // A manual clock wakes the task when a test moves it, so that due
  // processing-time timers fire without waiting on wall time.
  int64_t clockListener = 0;
  const auto* manual = services_ ? dynamic_cast<const ManualClock*>(&services_->clock()) : nullptr;
  if (manual != nullptr) {
    manualClock_ = true;
    clockListener = manual->addListener([this] { waker_.wake(); });
  }
  try {
    for (size_t i = 0; i < n; ++i) {
      const StreamNode& node = graph_.node(vertex_.chain[i]);
      position[node.id] = i;
      current = node.name;
      ops[i] = node.factory->createOperator();
      contexts[i] = std::make_unique<Context>(*this, node);
    }
    // Outputs: chained edges call the successor directly, the others go to a
    // record writer. Built tail first so successors exist.
    for (size_t i = n; i-- > 0;) {
      const StreamNode& node = graph_.node(vertex_.chain[i]);
      std::map<std::string, std::vector<std::unique_ptr<OutputBase>>> byTag;
      std::map<std::string, const TypeOps*> tagType;
      for (int eid : node.outEdges) {
        const StreamEdge& e = graph_.edge(eid);
        std::unique_ptr<OutputBase> o;
        if (jobGraph_.edgeChained[eid]) {
          o = e.type->createChainedOutput(*ops[position.at(e.target)], e.inputIndex);
        } else {
          o = e.network->createNetworkOutput(*writers_.at(eid), e.partition, subtask_,
                                             graph_.node(e.target).maxParallelism);
        }
        byTag[e.sideOutputTag].push_back(std::move(o));
        tagType[e.sideOutputTag] = e.type.get();
      }
      std::unique_ptr<OutputBase> main;
      auto mainOuts = byTag.find("");
      if (node.factory->outputType()) {
        main = node.factory->outputType()->createFanOut(
            mainOuts == byTag.end() ? std::vector<std::unique_ptr<OutputBase>>{}
                                    : std::move(mainOuts->second));
      } else {
        main = std::make_unique<NullOutput>();
      }
      for (auto& [tag, outs] : byTag) {
        if (tag.empty()) continue;
        auto fan = tagType[tag]->createFanOut(std::move(outs));
        contexts[i]->sideOutputs_[tag] = fan.get();
        outputs.push_back(std::move(fan));
      }
      current = node.name;
      ops[i]->setup(*contexts[i], *main);
      if (i == 0) headOutputPtr = main.get();
      outputs.push_back(std::move(main));
    }
    // Incremental checkpoints refer to the SST files of the checkpoint this
    // attempt restores, when that checkpoint is this job's (a retained
    // checkpoint of another job is not ours to share: the first checkpoint
    // copies everything, like Flink's NO_CLAIM mode).
    if (responder_ != nullptr) {
      const std::string shared = responder_->sharedStateDirectory();
      incremental_ =
          !shared.empty() && services_->configuration().get(options::kStateBackendIncremental);
      std::lock_guard lock(sharedMu_);
      for (const auto& [node, r] : restore_) {
        for (const KeyedStateHandleRef& h : r.keyedState) {
          if (!incremental_ || !h.native) continue;
          for (const auto& f : h.native->sstFiles) {
            if (std::filesystem::path(f.location).parent_path() == shared) {
              confirmedShared_[node][f.uniqueId] = f.location;
            }
          }
        }
      }
    }
    // Open tail first, so an operator that emits in open() finds its
    // successors ready.
    for (size_t i = n; i-- > 0;) {
      current = graph_.node(vertex_.chain[i]).name;
      auto restored = restore_.find(vertex_.chain[i]);
      ops[i]->initializeState(restored == restore_.end() ? nullptr : &restored->second);
      ops[i]->open();
      ++opened;
    }
    restore_.clear();  // restored state may be large; the operators hold it now
    current = graph_.node(vertex_.head()).name;
    StreamOperatorBase& head = *ops[0];
    OutputBase* headOutput = headOutputPtr;

    // A checkpoint, on the task thread: operators emit what must precede
    // the barrier, the barrier goes downstream, the operators' state is
    // captured; writing it out and acknowledging happen on the I/O thread.
    // A task that finished its input snapshots without barriers (its
    // outputs have ended): its operators' state as they finished.
    int64_t lastSnapshot = -1;
    auto performCheckpoint = [&](const CheckpointBarrier& barrier, const CheckpointOptions& options,
                                 bool finished) {
      lastSnapshot = barrier.id;
      if (!finished) {
        for (size_t i = 0; i < n; ++i) {
          current = graph_.node(vertex_.chain[i]).name;
          ops[i]->prepareSnapshotPreBarrier(barrier.id);
        }
        current = taskName_;
        for (auto& [id, w] : writers_) broadcastBarrier(*w, barrier, options);
      }
      auto snapshot = std::make_shared<TaskStateSnapshot>();
      auto keyed =
          std::make_shared<std::vector<std::pair<int, std::unique_ptr<StateSnapshotWriter>>>>();
      const std::string dir =
          responder_ == nullptr ? std::string() : responder_->checkpointDirectory(barrier.id);
      if (incremental_ && options.type == CheckpointType::kCheckpoint && !dir.empty()) {
        incrementalCheckpointId_ = barrier.id;
      }
      struct ResetIncremental {
        int64_t& id;
        ~ResetIncremental() { id = -1; }
      } resetIncremental{incrementalCheckpointId_};
      // As in Flink, an operator that cannot snapshot fails the checkpoint,
      // not the task; the failure counts against the tolerable limit.
      size_t snapshotting = 0;
      try {
        for (size_t i = 0; i < n; ++i) {
          snapshotting = i;
          const int node = vertex_.chain[i];
          current = graph_.node(node).name;
          OperatorStateSnapshot s = ops[i]->snapshotState(barrier.id);
          OperatorSubtaskState& st = snapshot->operators[node];
          st.operatorState = std::move(s.operatorState);
          st.timers = std::move(s.timers);
          if (s.keyedState) keyed->emplace_back(node, std::move(s.keyedState));
        }
      } catch (const TaskCancelledException&) {
        throw;
      } catch (...) {
        const std::string cause = describeCurrentException();
        current = graph_.node(vertex_.head()).name;
        if (responder_ == nullptr) throw;
        responder_->decline(barrier.id, vertex_.id, subtask_,
                            fmt::format("operator '{}' (subtask {}/{}) could not snapshot its "
                                        "state: {}",
                                        graph_.node(vertex_.chain[snapshotting]).name, subtask_ + 1,
                                        vertex_.parallelism, cause),
                            true);
        return;
      }
      current = graph_.node(vertex_.head()).name;
      if (responder_ == nullptr) return;
      {
        std::lock_guard lock(asyncMu_);
        ++asyncInFlight_;
      }
      responder_->submitAsync([this, id = barrier.id, dir, snapshot, keyed] {
        // Shared files this task copied for the checkpoint; removed again
        // when it cannot acknowledge.
        std::vector<std::string> uploaded;
        std::map<int, StoredFiles> stored;
        try {
          for (auto& [node, writer] : *keyed) {
            KeyedStateHandleRef& ref = snapshot->operators[node].keyed;
            if (const NativeKeyedSnapshot* native = writer->nativeSnapshot()) {
              StoredFiles reusable;
              {
                std::lock_guard lock(sharedMu_);
                reusable = confirmedShared_[node];
              }
              ref = storeNativeSnapshot(*native, fmt::format("{}/{}-{}", dir, node, subtask_),
                                        responder_->sharedStateDirectory(), reusable, uploaded);
              for (const auto& f : ref.native->sstFiles) stored[node][f.uniqueId] = f.location;
              continue;
            }
            if (dir.empty()) {
              std::ostringstream out;
              writer->writeTo(out);
              ref.bytes = std::make_shared<const std::string>(out.str());
              continue;
            }
            const std::string path = fmt::format("{}/{}-{}.keyed", dir, node, subtask_);
            std::ofstream out(path, std::ios::binary | std::ios::trunc);
            if (!out) {
              throw SluiceException(
                  fmt::format("cannot create '{}': {}", path, std::strerror(errno)));
            }
            writer->writeTo(out);
            out.flush();
            if (!out) {
              throw SluiceException(
                  fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
            }
            ref.path = path;
          }
          keyed->clear();
          if (!stored.empty()) {
            std::lock_guard lock(sharedMu_);
            for (auto& [node, files] : stored) pendingShared_[node][id] = std::move(files);
          }
          responder_->acknowledge(id, vertex_.id, subtask_, std::move(*snapshot));
        } catch (...) {
          keyed->clear();
          std::error_code ec;
          for (const auto& f : uploaded) std::filesystem::remove(f, ec);
          responder_->decline(
              id, vertex_.id, subtask_,
              fmt::format("task '{}' ({}/{}) could not write its state: {}", taskName_,
                          subtask_ + 1, vertex_.parallelism, describeCurrentException()),
              true);
        }
        std::lock_guard lock(asyncMu_);
        --asyncInFlight_;
        asyncDone_.notify_all();
      });
    };
    onNotify_ = [&](int64_t id) {
      if (id != kFinalCheckpointId) {
        // The files of a completed checkpoint are what later ones refer to.
        std::lock_guard lock(sharedMu_);
        for (auto& [node, byId] : pendingShared_) {
          auto it = byId.find(id);
          if (it != byId.end()) confirmedShared_[node] = std::move(it->second);
          byId.erase(byId.begin(), byId.upper_bound(id));
        }
      }
      for (size_t i = 0; i < n; ++i) {
        current = graph_.node(vertex_.chain[i]).name;
        ops[i]->notifyCheckpointComplete(id);
      }
      current = graph_.node(vertex_.head()).name;
      if (id == kFinalCheckpointId) finalCommitted_ = true;
    };

    auto flushDue = [&, timeout = std::chrono::milliseconds(jobGraph_.bufferTimeoutMs),
                     next = TaskWaker::Clock::now()](
                        TaskWaker::Clock::time_point now,
                        TaskWaker::Clock::time_point& deadline) mutable {
      bool pending = false;
      for (auto& [id, w] : writers_) pending |= w->hasPendingData();
      if (!pending || jobGraph_.bufferTimeoutMs < 0) return;
      if (now >= next) {
        for (auto& [id, w] : writers_) w->flushAll();
        next = now + timeout;
        return;
      }
      if (next < deadline) deadline = next;
    };

    if (auto* source = dynamic_cast<SourceOperatorBase*>(&head)) {
      onSplits_ = [source](std::vector<std::vector<uint8_t>> s) { source->addSplits(s); };
      onNoMoreSplits_ = [source] { source->noMoreSplits(); };
      // After the barrier of a stop-with-savepoint the source emits nothing
      // more; the job ends once the savepoint is complete.
      bool& stopped = sourceStopped_;
      onTrigger_ = [&](CheckpointBarrier barrier, CheckpointOptions options) {
        if (stopped) {
          if (responder_)
            responder_->decline(barrier.id, vertex_.id, subtask_, "the source has stopped", false);
          return;
        }
        if (options.drain) headOutput->emitWatermark(Watermark::max());
        performCheckpoint(barrier, options, false);
        if (options.terminate) stopped = true;
      };
      if (coordinator_) coordinator_->addReader(subtask_);
      for (;;) {
        if (mailbox_.hasMail()) mailbox_.runAll();
        if (cancelled_.load(std::memory_order_relaxed)) break;
        auto timerDue = fireDueTimers();
        if (stopped) {
          waker_.waitUntil(timerDue);
          continue;
        }
        InputStatus st = source->emitNext();
        if (st == InputStatus::kEndOfInput) break;
        auto now = TaskWaker::Clock::now();
        auto deadline = timerDue;
        flushDue(now, deadline);
        if (st == InputStatus::kNothingAvailable) {
          if (mailbox_.hasMail()) continue;
          auto until = std::min(deadline, wakeupAt_);
          if (until > now) waker_.waitUntil(until);
          // A wake-up the reader asked for is spent once its time has come.
          if (wakeupAt_ <= TaskWaker::Clock::now()) wakeupAt_ = TaskWaker::Clock::time_point::max();
        }
      }
    } else {
      const int channels = gate_ ? gate_->numberOfChannels() : 0;
      decoders.resize(channels);
      std::vector<std::unique_ptr<RecordProcessorBase>> processors(channels);
      const int inputs = head.numberOfInputs();
      std::vector<int> localIndex(channels);
      std::vector<int> channelsPerInput(inputs, 0), endedPerInput(inputs, 0);
      for (int c = 0; c < channels; ++c) {
        const InputChannelInfo& info = channels_[c];
        const StreamEdge& e = graph_.edge(info.streamEdge);
        processors[c] = e.type->createRecordProcessor(head, info.inputIndex);
        localIndex[c] = channelsPerInput.at(info.inputIndex)++;
      }
      std::vector<WatermarkValve> valves;
      for (int i = 0; i < inputs; ++i) valves.emplace_back(channelsPerInput[i]);
      int ended = 0;
      auto apply = [&](int input, const WatermarkValve::Emit& e) {
        if (e.watermark) head.processWatermark(input, Watermark{e.watermarkValue});
        if (e.status) head.processWatermarkStatus(input, e.statusValue);
      };
      // Barrier alignment. Exactly-once: a channel that delivered the
      // barrier of the checkpoint being aligned is blocked (its further
      // buffers wait in `queued`) until every channel delivered it or ended;
      // then the task snapshots and forwards the barrier. At-least-once: the
      // same count, without blocking.
      const bool exactlyOnce = mode_ == CheckpointingMode::kExactlyOnce;
      std::vector<std::deque<Buffer>> queued(channels);
      std::vector<char> blocked(channels, 0), barrierFrom(channels, 0), channelEnded(channels, 0);
      std::vector<int> resumable;
      int64_t aligning = -1;        // checkpoint being aligned, -1 for none
      int64_t lastCheckpoint = -1;  // newest checkpoint snapshotted or given up
      CheckpointBarrier alignBarrier;
      CheckpointOptions alignOptions;
      auto endAlignment = [&] {
        for (int c = 0; c < channels; ++c) {
          barrierFrom[c] = 0;
          if (blocked[c]) {
            blocked[c] = 0;
            resumable.push_back(c);
          }
        }
        aligning = -1;
      };
      auto maybeCompleteAlignment = [&] {
        if (aligning < 0) return;
        for (int c = 0; c < channels; ++c) {
          if (!barrierFrom[c] && !channelEnded[c]) return;
        }
        lastCheckpoint = aligning;
        endAlignment();
        performCheckpoint(alignBarrier, alignOptions, false);
      };
      // True when channel c must stop delivering for now.
      auto onBarrier = [&](int c, const CheckpointBarrier& b, const CheckpointOptions& o) {
        if (b.id <= lastCheckpoint) return false;  // a checkpoint already given up
        if (b.id > aligning) {
          if (aligning >= 0 && responder_) {
            responder_->decline(
                aligning, vertex_.id, subtask_,
                fmt::format("barrier {} arrived before checkpoint {} was aligned", b.id, aligning),
                false);
          }
          if (aligning >= 0) endAlignment();
          aligning = b.id;
          alignBarrier = b;
          alignOptions = o;
        } else if (b.id < aligning) {
          return false;  // older than the one being aligned: superseded
        }
        barrierFrom[c] = 1;
        if (exactlyOnce) blocked[c] = 1;
        maybeCompleteAlignment();
        return blocked[c] != 0;
      };
      auto handle = [&](int c, const uint8_t* data, size_t size) {
        DataInputView in(data, size);
        const int input = channels_[c].inputIndex;
        auto tag = static_cast<ElementTag>(in.readU8());
        switch (tag) {
          case ElementTag::kRecord: processors[c]->processRecord(in, false, kMinTimestamp); break;
          case ElementTag::kRecordWithTimestamp: {
            int64_t ts = in.readI64();
            processors[c]->processRecord(in, true, ts);
            break;
          }
          case ElementTag::kWatermark:
            apply(input, valves[input].onWatermark(localIndex[c], in.readI64()));
            break;
          case ElementTag::kWatermarkStatus:
            apply(input,
                  valves[input].onStatus(localIndex[c], static_cast<WatermarkStatus>(in.readU8())));
            break;
          case ElementTag::kBarrier: {
            CheckpointBarrier b;
            CheckpointOptions o;
            readBarrier(in, b, o);
            onBarrier(c, b, o);
            break;
          }
          case ElementTag::kEndOfPartition:
            ++ended;
            channelEnded[c] = 1;
            apply(input, valves[input].onEndOfPartition(localIndex[c]));
            if (++endedPerInput[input] == channelsPerInput[input]) head.endInput(input);
            maybeCompleteAlignment();
            break;
          default:
            throw SerializationError(fmt::format(
                "corrupt stream: unknown element tag {} on channel {}", static_cast<int>(tag), c));
        }
      };
      // Decodes channel c's buffers until they are used up or c is blocked.
      auto drainChannel = [&](int c) {
        const uint8_t* data;
        size_t size;
        while (!blocked[c]) {
          if (!decoders[c].hasBuffer()) {
            if (queued[c].empty()) return;
            decoders[c].setBuffer(queued[c].front());
            queued[c].pop_front();
          }
          while (!blocked[c] && decoders[c].next(data, size)) handle(c, data, size);
        }
      };
      onTrigger_ = [&](CheckpointBarrier barrier, CheckpointOptions) {
        if (responder_) {
          responder_->decline(barrier.id, vertex_.id, subtask_, "only sources are triggered",
                              false);
        }
      };
      while (ended < channels) {
        if (mailbox_.hasMail()) mailbox_.runAll();
        if (cancelled_.load(std::memory_order_relaxed)) break;
        auto timerDue = fireDueTimers();
        if (!resumable.empty()) {
          const int c = resumable.back();
          resumable.pop_back();
          drainChannel(c);
          continue;
        }
        int c;
        Buffer b;
        if (gate_->poll(c, b)) {
          if (blocked[c] || decoders[c].hasBuffer() || !queued[c].empty()) {
            queued[c].push_back(b);
            continue;
          }
          decoders[c].setBuffer(b);
          drainChannel(c);
          auto now = TaskWaker::Clock::now();
          auto deadline = TaskWaker::Clock::time_point::max();
          flushDue(now, deadline);
          continue;
        }
        auto now = TaskWaker::Clock::now();
        auto deadline = std::min(wakeupAt_, timerDue);
        flushDue(now, deadline);
        if (deadline > now) waker_.waitUntil(deadline);
        if (wakeupAt_ <= TaskWaker::Clock::now()) wakeupAt_ = TaskWaker::Clock::time_point::max();
      }
      for (auto& q : queued) {
        for (Buffer& buffer : q) buffer.pool->recycle(buffer.data);
        q.clear();
      }
    }

    if (!cancelled_.load()) {
      // Head first: what an operator emits in finish() reaches its successors
      // before they finish.
      for (size_t i = 0; i < n; ++i) {
        current = graph_.node(vertex_.chain[i]).name;
        ops[i]->finish();
      }
      current = taskName_;
      for (auto& [id, w] : writers_) w->broadcastEndOfPartition();
      // Two-phase-commit sinks pre-committed their last transaction in
      // finish(); it is committed once every task of the job got this far.
      // Checkpoints taken while other tasks still run include this task's
      // final state (Flink's checkpoints after tasks finished, FLIP-147).
      onTrigger_ = [&](CheckpointBarrier barrier, CheckpointOptions options) {
        if (barrier.id <= lastSnapshot) return;  // took part through its barrier
        performCheckpoint(barrier, options, true);
      };
      onSplits_ = nullptr;
      onNoMoreSplits_ = nullptr;
      auto checkLateSplits = [&] {
        if (pendingSplits_.load() == 0) return;
        current = graph_.node(vertex_.head()).name;
        throw SluiceException(
            fmt::format("{} split(s) were assigned after the source reader had finished",
                        pendingSplits_.load()));
      };
      if (responder_ != nullptr) {
        responder_->taskFinished(vertex_.id, subtask_);
        while (!finalCommitted_ && !cancelled_.load()) {
          if (mailbox_.hasMail()) {
            mailbox_.runAll();
            checkLateSplits();
            continue;
          }
          waker_.waitUntil(fireDueTimers());
        }
      }
    }
  } catch (const TaskCancelledException&) {
    result.cancelled = true;
  } catch (const OperatorFailure& f) {
    // After a cancel, user code may turn the cancellation into its own
    // exception; that is still a cancel, not a failure.
    if (!cancelled_.load()) fail(f.operatorName(), f.what());
  } catch (...) {
    if (!cancelled_.load()) fail(current, describeCurrentException());
  }
  if (cancelled_.load()) result.cancelled = true;
  onTrigger_ = nullptr;
  onNotify_ = nullptr;
  if (manual != nullptr) manual->removeListener(clockListener);
  {
    // Snapshots being written read the operators' state backends.
    std::unique_lock lock(asyncMu_);
    asyncDone_.wait(lock, [&] { return asyncInFlight_ == 0; });
  }
  // Timers still pending at the end do not fire (Flink's behaviour).
  while (!timers_.empty()) timers_.pop();

  for (size_t i = n - opened; i < n; ++i) {
    try {
      ops[i]->close();
    } catch (...) {
      if (!result.failed && !cancelled_.load()) {
        fail(graph_.node(vertex_.chain[i]).name, describeCurrentException());
      }
    }
  }
  // Accumulators are user types: their clone/merge may throw too.
  size_t harvesting = 0;
  try {
    for (size_t i = 0; i < n; ++i) {
      harvesting = i;
      if (!contexts[i]) continue;
      result.numRecordsDropped += contexts[i]->dropped_;
      for (auto& [name, v] : contexts[i]->counters_) result.counters[name] += v;
      for (auto& [name, acc] : contexts[i]->accumulators_) {
        auto it = result.accumulators.find(name);
        if (it == result.accumulators.end()) {
          result.accumulators.emplace(name, acc->clone());
        } else if (it->second->getLocalValue().index() != acc->getLocalValue().index()) {
          if (!result.failed) {
            fail(graph_.node(vertex_.chain[i]).name,
                 fmt::format("accumulator '{}' is registered with different types", name));
          }
        } else {
          it->second->merge(*acc);
        }
      }
    }
  } catch (...) {
    if (!result.failed) {
      fail(graph_.node(vertex_.chain[harvesting]).name,
           "accumulator: " + describeCurrentException());
    }
  }
  if (!result.failed && !result.cancelled && pendingSplits_.load() > 0) {
    // A split assigned after the reader had ended would be lost silently.
    fail(graph_.node(vertex_.head()).name,
         fmt::format("{} split(s) were assigned after the source reader had finished",
                     pendingSplits_.load()));
  }
  onSplits_ = nullptr;
  onNoMoreSplits_ = nullptr;
  mailbox_.clear();
  for (auto& d : decoders) d.release();
  if (gate_) gate_->releaseAll();
  for (auto& [id, w] : writers_) w->releaseAll();
  outputs.clear();
  ops.clear();
  return result;
}

}  // namespace runtime
}  // namespace sluice
