#include "runtime/task.h"

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
    // Runs on the task thread; the runner installed the source head.
    pendingSplits_.fetch_sub(1);
    if (onSplits_) onSplits_({std::move(s)});
  });
}

void Task::postNoMoreSplits() {
  mailbox_.post([this] {
    if (onNoMoreSplits_) onNoMoreSplits_();
  });
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
      outputs.push_back(std::move(main));
    }
    // Open tail first, so an operator that emits in open() finds its
    // successors ready.
    for (size_t i = n; i-- > 0;) {
      current = graph_.node(vertex_.chain[i]).name;
      ops[i]->initializeState(nullptr);
      ops[i]->open();
      ++opened;
    }
    current = graph_.node(vertex_.head()).name;
    StreamOperatorBase& head = *ops[0];

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
      if (coordinator_) coordinator_->addReader(subtask_);
      for (;;) {
        if (mailbox_.hasMail()) mailbox_.runAll();
        if (cancelled_.load(std::memory_order_relaxed)) break;
        auto timerDue = fireDueTimers();
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
          case ElementTag::kBarrier: break;  // checkpoints are not implemented yet
          case ElementTag::kEndOfPartition:
            ++ended;
            apply(input, valves[input].onEndOfPartition(localIndex[c]));
            if (++endedPerInput[input] == channelsPerInput[input]) head.endInput(input);
            break;
          default:
            throw SerializationError(fmt::format(
                "corrupt stream: unknown element tag {} on channel {}", static_cast<int>(tag), c));
        }
      };
      while (ended < channels) {
        if (mailbox_.hasMail()) mailbox_.runAll();
        if (cancelled_.load(std::memory_order_relaxed)) break;
        auto timerDue = fireDueTimers();
        int c;
        Buffer b;
        if (gate_->poll(c, b)) {
          decoders[c].setBuffer(b);
          const uint8_t* data;
          size_t size;
          while (decoders[c].next(data, size)) handle(c, data, size);
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
  if (manual != nullptr) manual->removeListener(clockListener);
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
