// Testing Sluice functions and operators without running a job: Flink's
// operator test harnesses (OneInputStreamOperatorTestHarness,
// KeyedOneInputStreamOperatorTestHarness, TwoInputStreamOperatorTestHarness,
// ProcessFunctionTestHarnesses) in one kit. See docs/testing.md.
//
//   auto h = sluice::testing::harnessFor<Event>([](auto events) {
//     return events.keyBy(&Event::user).process(CountPerUser());
//   });
//   h->open();
//   h->processElement(Event{"alice", 3}, /*timestamp=*/10);
//   h->processWatermark(20);               // fires event-time timers
//   h->context().setProcessingTime(5000);  // fires processing-time timers
//   EXPECT_EQ(h->values(), ...);
//   auto snapshot = h->snapshot(/*checkpointId=*/1);  // restore it into a
//   // fresh harness with open(&restore), at any parallelism (redistribute).
//
// A harness drives one subtask of one operator, single-threaded, on the
// test's thread, with a manual processing-time clock, keyed state on the
// backend the context's configuration names (state.backend.type), and
// collecting outputs for the main output and side outputs.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <sluice/core/clock.h>
#include <sluice/core/config.h>
#include <sluice/core/runtime_context.h>
#include <sluice/datastream.h>
#include <sluice/environment.h>
#include <sluice/graph/operator.h>
#include <sluice/state/operator_state.h>

namespace sluice::testing {

class HarnessRuntimeContext final : public RuntimeContext {
 public:
  HarnessRuntimeContext(std::string operatorName, int subtask, int parallelism, int maxParallelism)
      : subtask_(subtask),
        parallelism_(parallelism),
        maxParallelism_(maxParallelism),
        name_(std::move(operatorName)),
        nameWithSubtasks_(name_ + " (" + std::to_string(subtask + 1) + "/" +
                          std::to_string(parallelism) + ")") {}
  int getIndexOfThisSubtask() const override { return subtask_; }
  int getNumberOfParallelSubtasks() const override { return parallelism_; }
  int getMaxNumberOfParallelSubtasks() const override { return maxParallelism_; }
  int getAttemptNumber() const override { return 0; }
  const std::string& getTaskName() const override { return name_; }
  const std::string& getOperatorName() const override { return name_; }
  const std::string& getTaskNameWithSubtasks() const override { return nameWithSubtasks_; }
  const std::string& getJobName() const override { return job_; }
  void addAccumulator(const std::string&, Accumulator*) override {}
  Accumulator* getAccumulator(const std::string&) const override { return nullptr; }

 private:
  int subtask_;
  int parallelism_;
  int maxParallelism_;
  std::string name_;
  std::string nameWithSubtasks_;
  std::string job_ = "harness job";
};

class HarnessOperatorContext final : public OperatorContext {
 public:
  HarnessOperatorContext(std::string operatorName, int subtask, int parallelism, int maxParallelism)
      : runtime_(std::move(operatorName), subtask, parallelism, maxParallelism) {}

  RuntimeContext& runtimeContext() override { return runtime_; }
  OutputBase* sideOutput(const std::string& tagId) override {
    auto it = sideOutputs_.find(tagId);
    return it == sideOutputs_.end() ? nullptr : it->second;
  }
  void countDroppedRecord() override { ++droppedRecords_; }
  void sendSplitRequest() override {}
  void signalInputAvailable() override {}
  void requestWakeupAt(std::chrono::steady_clock::time_point) override {}
  const Configuration& configuration() override { return config_; }
  const Clock& clock() override { return clock_; }
  std::shared_ptr<void> slotResource(const std::string& key,
                                     const std::function<std::shared_ptr<void>()>& make) override {
    auto& r = resources_[key];
    if (!r) r = make();
    return r;
  }
  int64_t managedMemoryPerSlot() override { return 32ll << 20; }
  void registerProcessingTimer(int64_t timestamp, std::function<void(int64_t)> callback) override {
    timers_.emplace(timestamp, std::move(callback));
  }
  void incrementCounter(const std::string& name, int64_t n) override { counters_[name] += n; }

  // Moves the manual clock to `millis` and fires every processing-time timer
  // due by then, in timestamp order (timers registered while firing included).
  void setProcessingTime(int64_t millis) {
    clock_.setCurrentTime(millis);
    while (!timers_.empty() && timers_.begin()->first <= millis) {
      auto node = timers_.extract(timers_.begin());
      node.mapped()(node.key());
    }
  }
  int64_t counter(const std::string& name) const {
    auto it = counters_.find(name);
    return it == counters_.end() ? 0 : it->second;
  }
  const std::map<std::string, int64_t>& counters() const { return counters_; }

  Configuration& config() { return config_; }
  ManualClock& manualClock() { return clock_; }
  void addSideOutput(const std::string& tagId, OutputBase* output) { sideOutputs_[tagId] = output; }
  int64_t droppedRecords() const { return droppedRecords_; }

 private:
  HarnessRuntimeContext runtime_;
  Configuration config_;
  ManualClock clock_{1'000'000};
  std::map<std::string, OutputBase*> sideOutputs_;
  std::map<std::string, std::shared_ptr<void>> resources_;
  std::multimap<int64_t, std::function<void(int64_t)>> timers_;
  std::map<std::string, int64_t> counters_;
  int64_t droppedRecords_ = 0;
};

// Collects every record and watermark an operator emits.
template <class T>
class CollectingOutput final : public Output<T> {
 public:
  void collect(const StreamRecord<T>& record) override { records.push_back(record); }
  void emitWatermark(Watermark watermark) override { watermarks.push_back(watermark); }
  void emitWatermarkStatus(WatermarkStatus) override {}
  std::vector<T> values() const {
    std::vector<T> out;
    for (const auto& r : records) out.push_back(r.value);
    return out;
  }
  std::vector<StreamRecord<T>> records;
  std::vector<Watermark> watermarks;
};

// What one subtask's snapshot leaves behind, with the keyed part written out.
struct CapturedSnapshot {
  std::string operatorState;
  std::shared_ptr<const std::string> keyedState;  // null without keyed state
  std::string timers;                             // empty without timers
};

// The restore of each of `newParallelism` subtasks from the snapshots of all
// old subtasks: operator state repartitioned, every keyed snapshot offered
// to every new subtask (each backend reads only its own key groups).
inline std::vector<OperatorStateRestore> redistribute(const std::vector<CapturedSnapshot>& old,
                                                      int newParallelism) {
  std::vector<std::string> operatorStates;
  for (const auto& s : old) operatorStates.push_back(s.operatorState);
  std::vector<std::string> parts =
      OperatorStateBackend::repartition(operatorStates, newParallelism);
  std::vector<OperatorStateRestore> restores(static_cast<size_t>(newParallelism));
  for (int i = 0; i < newParallelism; ++i) {
    restores[i].operatorState = std::move(parts[i]);
    for (size_t j = 0; j < old.size(); ++j) {
      if (!old[j].timers.empty()) restores[i].timers.push_back(old[j].timers);
      if (old[j].keyedState) {
        restores[i].keyedState.push_back(
            KeyedStateHandleRef{"old subtask " + std::to_string(j), old[j].keyedState, nullptr});
      }
    }
  }
  return restores;
}

// Drives one operator instance. OUT is its output type.
template <class OUT>
class OperatorHarness {
 public:
  OperatorHarness(std::unique_ptr<StreamOperatorBase> op, int subtask = 0, int parallelism = 1,
                  int maxParallelism = 128, std::string operatorName = "harness operator")
      : context_(std::move(operatorName), subtask, parallelism, maxParallelism),
        op_(std::move(op)) {}
  ~OperatorHarness() {
    if (opened_ && !closed_) op_->close();
  }
  OperatorHarness(const OperatorHarness&) = delete;
  OperatorHarness& operator=(const OperatorHarness&) = delete;
  OperatorHarness(OperatorHarness&&) = delete;

  HarnessOperatorContext& context() { return context_; }
  StreamOperatorBase& op() { return *op_; }
  CollectingOutput<OUT>& output() { return output_; }
  std::vector<OUT> values() const { return output_.values(); }

  // setup -> initializeState(restore) -> open.
  void open(const OperatorStateRestore* restore = nullptr) {
    op_->setup(context_, output_);
    op_->initializeState(restore);
    op_->open();
    opened_ = true;
  }

  template <class IN>
  void processElement(int input, const IN& value, std::optional<int64_t> timestamp = {}) {
    StreamRecord<IN> record(value);
    record.hasTimestamp = timestamp.has_value();
    record.timestamp = timestamp.value_or(kMinTimestamp);
    static_cast<Input<IN>*>(op_->inputPointer(input))->processElement(record);
  }
  void processWatermark(int input, int64_t timestamp) {
    op_->processWatermark(input, Watermark{timestamp});
  }

  // The operator's snapshot, its timers written (see resolveTimers()).
  OperatorStateSnapshot snapshotState(int64_t checkpointId) {
    OperatorStateSnapshot s = op_->snapshotState(checkpointId);
    s.resolveTimers();
    return s;
  }
  // snapshotState with the keyed part written out, ready for redistribute().
  CapturedSnapshot snapshot(int64_t checkpointId) {
    OperatorStateSnapshot s = snapshotState(checkpointId);
    CapturedSnapshot captured;
    captured.operatorState = std::move(s.operatorState);
    captured.timers = std::move(s.timers);
    if (s.keyedState) {
      std::ostringstream out;
      s.keyedState->writeTo(out);
      captured.keyedState = std::make_shared<const std::string>(out.str());
    }
    return captured;
  }

  // The checkpoint coordinator's "checkpoint `checkpointId` completed".
  void notifyCheckpointComplete(int64_t checkpointId) {
    op_->notifyCheckpointComplete(checkpointId);
  }

  // End of input, then the job-wide final commit the runtime sends once
  // every task has finished (notifyCheckpointComplete(kFinalCheckpointId)).
  void finish() {
    op_->finish();
    op_->notifyCheckpointComplete(kFinalCheckpointId);
  }
  void close() {
    op_->close();
    closed_ = true;
  }
  // A process that dies: the operator is destroyed without close() (nothing
  // it would clean up in close() is cleaned up). op() is gone afterwards.
  void crash() {
    closed_ = true;
    op_.reset();
  }

 private:
  HarnessOperatorContext context_;
  std::unique_ptr<StreamOperatorBase> op_;
  CollectingOutput<OUT> output_;
  bool opened_ = false;
  bool closed_ = false;
};

// --- harnesses built from the DataStream API ------------------------------------

struct HarnessOptions {
  int subtask = 0;
  int parallelism = 1;
  int maxParallelism = 128;
  std::string stateBackend = "hashmap";  // state.backend.type: hashmap or rocksdb
};

// A harness of the operator a pipeline appends, with typed inputs: `IN` (and
// `IN2` for two-input operators) is what the pipeline reads.
template <class OUT, class IN, class IN2 = void>
class StreamHarness : public OperatorHarness<OUT> {
 public:
  StreamHarness(std::unique_ptr<StreamOperatorBase> op, const HarnessOptions& options,
                std::string name)
      : OperatorHarness<OUT>(std::move(op), options.subtask, options.parallelism,
                             options.maxParallelism, std::move(name)) {
    this->context().config().set(options::kStateBackendType, options.stateBackend);
  }

  // An element on the (first) input, with an event-time timestamp or none.
  void processElement(const IN& value, std::optional<int64_t> timestamp = {}) {
    OperatorHarness<OUT>::template processElement<IN>(0, value, timestamp);
  }
  // An element on the second input of a two-input operator.
  template <class T = IN2>
  requires(!std::is_void_v<T>) void processElement2(const T& value,
                                                    std::optional<int64_t> timestamp = {}) {
    OperatorHarness<OUT>::template processElement<T>(1, value, timestamp);
  }
  // A watermark on every input (one-input operators have one).
  void processWatermark(int64_t timestamp) {
    OperatorHarness<OUT>::processWatermark(0, timestamp);
    if constexpr (!std::is_void_v<IN2>) OperatorHarness<OUT>::processWatermark(1, timestamp);
  }
  using OperatorHarness<OUT>::processWatermark;

  // Collects what the operator emits to `tag`. Call before open().
  template <class T>
  CollectingOutput<T>& sideOutput(const OutputTag<T>& tag) {
    auto& slot = sideOutputs_[tag.getId()];
    if (!slot) {
      auto out = std::make_shared<CollectingOutput<T>>();
      this->context().addSideOutput(tag.getId(), out.get());
      slot = out;
    }
    return *static_cast<CollectingOutput<T>*>(slot.get());
  }

 private:
  std::map<std::string, std::shared_ptr<void>> sideOutputs_;
};

namespace detail {

template <class OUT, class IN, class IN2, class Stream>
std::unique_ptr<StreamHarness<OUT, IN, IN2>> harnessOf(const Stream& out,
                                                       const HarnessOptions& options) {
  const StreamNode& node = out.environmentState()->graph.node(out.getId());
  if (node.factory->isSource()) {
    throw SluiceException(
        "harnessFor: the pipeline must append an operator to its input stream; it returned the "
        "input itself");
  }
  const StreamGraph& graph = out.environmentState()->graph;
  for (int e : node.inEdges) {
    if (!graph.node(graph.edge(e).source).factory->isSource()) {
      throw SluiceException(
          "harnessFor: the pipeline must append exactly one operator to its "
          "input (a harness drives one operator); '" +
          node.name + "' reads the output of '" + graph.node(graph.edge(e).source).name + "'");
    }
  }
  return std::make_unique<StreamHarness<OUT, IN, IN2>>(node.factory->createOperator(), options,
                                                       node.name);
}

}  // namespace detail

// The operator that `pipeline(stream)` appends to a stream of IN (a map, a
// keyed process function, a window with its function, ...), as one subtask
// in a harness. The pipeline may key the stream first; the returned stream
// must be the operator's output.
template <class IN, class Pipeline>
auto harnessFor(Pipeline pipeline, HarnessOptions options = {}) {
  StreamExecutionEnvironment env;
  auto out = pipeline(env.fromCollection(std::vector<IN>{}));
  using OUT = typename decltype(out)::ValueType;
  return detail::harnessOf<OUT, IN, void>(out, options);
}

// The two-input operator that `pipeline(first, second)` appends (connect +
// process, a keyed co-process function, an interval join, ...).
template <class IN1, class IN2, class Pipeline>
auto twoInputHarnessFor(Pipeline pipeline, HarnessOptions options = {}) {
  StreamExecutionEnvironment env;
  auto out =
      pipeline(env.fromCollection(std::vector<IN1>{}), env.fromCollection(std::vector<IN2>{}));
  using OUT = typename decltype(out)::ValueType;
  return detail::harnessOf<OUT, IN1, IN2>(out, options);
}

}  // namespace sluice::testing
