// OperatorRunner: one operator driven step by step under each of the run
// configurations every stateful operator suite must pass (STYLE.md, Tests):
//
//   straight   one subtask, the hashmap backend;
//   restore    after every step a checkpoint: every subtask snapshots, hears
//              it completed (after every other step only: the rest restore
//              before the notice, as after a failure between completion and
//              notice), and is replaced by a fresh instance restored from its
//              snapshot;
//   rescale    the same, but restored at parallelism 1 <-> 2 alternately
//              (operator state repartitioned, keyed state and timers by key
//              group), with keyed elements routed to the subtask that owns
//              their key group;
//   rocksdb    one subtask, the rocksdb backend;
//   tiered     one subtask, the tiered backend with a 1-byte budget, so that
//              every entry not in use goes to its RocksDB and back, and a
//              snapshot and restore after every step as in `restore`.
//
// Restore and rescale also run restoring after every third step only
// (RunSetup, kAllRunSetups), so that state built over several steps between
// two snapshots is in a snapshot too.
//
// A suite describes its input as steps (elements, watermarks per input
// channel, idleness, processing time, end of input) and compares what the
// operator emitted after each step with a result computed independently; the
// same expectation must hold under every configuration. Watermarks of each
// input go through a WatermarkValve over the input's channels, as in a task.
// Everything runs on the test's thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sluice/core/config_options.h>
#include <sluice/core/key_hash.h>
#include <sluice/core/watermark_valve.h>
#include <sluice/testing.h>

namespace sluice::test {

enum class RunConfig { kStraight, kRestore, kRescale, kRocksDb, kTiered };

inline constexpr RunConfig kAllRunConfigs[] = {RunConfig::kStraight, RunConfig::kRestore,
                                               RunConfig::kRescale, RunConfig::kRocksDb,
                                               RunConfig::kTiered};

inline const char* runConfigName(RunConfig c) {
  switch (c) {
    case RunConfig::kStraight: return "straight";
    case RunConfig::kRestore: return "restore after every step";
    case RunConfig::kRescale: return "rescale 1<->2 after every step";
    case RunConfig::kRocksDb: return "rocksdb";
    case RunConfig::kTiered: return "tiered, 1-byte budget, restore after every step";
  }
  return "?";
}

inline std::string runConfigParamName(RunConfig c) {
  switch (c) {
    case RunConfig::kStraight: return "straight";
    case RunConfig::kRestore: return "restore";
    case RunConfig::kRescale: return "rescale";
    case RunConfig::kRocksDb: return "rocksdb";
    case RunConfig::kTiered: return "tiered";
  }
  return "unknown";
}

// For INSTANTIATE_TEST_SUITE_P(..., ValuesIn(kAllRunConfigs), runConfigParamName).
inline std::string runConfigParamName(const ::testing::TestParamInfo<RunConfig>& info) {
  return runConfigParamName(info.param);
}

// A run configuration and, for restore and rescale, how many steps pass
// between restores (OperatorRunner::Options::restoreEvery).
struct RunSetup {
  RunConfig config = RunConfig::kStraight;
  int restoreEvery = 1;
};

// Every configuration, restore and rescale also after every third step
// only: restoring after every step cannot catch state an operator builds
// over several steps and then loses in a snapshot.
inline constexpr RunSetup kAllRunSetups[] = {{RunConfig::kStraight, 1}, {RunConfig::kRestore, 1},
                                             {RunConfig::kRestore, 3},  {RunConfig::kRescale, 1},
                                             {RunConfig::kRescale, 3},  {RunConfig::kRocksDb, 1},
                                             {RunConfig::kTiered, 1}};

// How gtest prints a RunSetup parameter.
inline void PrintTo(const RunSetup& setup, std::ostream* os) {
  *os << runConfigName(setup.config);
  if (setup.restoreEvery != 1) *os << " (every " << setup.restoreEvery << " steps)";
}

// For INSTANTIATE_TEST_SUITE_P(..., ValuesIn(kAllRunSetups), runSetupParamName).
inline std::string runSetupParamName(const ::testing::TestParamInfo<RunSetup>& info) {
  std::string name = runConfigParamName(info.param.config);
  if (info.param.restoreEvery != 1) name += "_every" + std::to_string(info.param.restoreEvery);
  return name;
}

template <class OUT>
class OperatorRunner {
 public:
  using Factory = std::function<std::unique_ptr<StreamOperatorBase>()>;
  struct Options {
    int inputs = 1;
    int channelsPerInput = 1;
    int maxParallelism = 128;
    int64_t clock = 0;  // the manual clock before the first step
    // restore, rescale: the checkpoint and restore after every n-th step
    // only, so that state an operator builds over several steps (timers
    // that fired, then elements) is in a snapshot too. Odd n keep the
    // completion notice coming before every other restore.
    int restoreEvery = 1;
  };

  OperatorRunner(Factory make, RunConfig config, Options options)
      : make_(std::move(make)), config_(config), options_(options) {
    for (int i = 0; i < options.inputs; ++i) valves_.emplace_back(options.channelsPerInput);
    lastWatermark_.resize(static_cast<size_t>(options.inputs));
  }
  OperatorRunner(std::shared_ptr<const OperatorFactory> factory, RunConfig config,
                 Options options = {})
      : OperatorRunner([factory] { return factory->createOperator(); }, config, options) {}
  // `setup`'s restoreEvery replaces the one in `options`.
  OperatorRunner(Factory make, RunSetup setup, Options options)
      : OperatorRunner(std::move(make), setup.config, withRestoreEvery(options, setup)) {}
  OperatorRunner(std::shared_ptr<const OperatorFactory> factory, RunSetup setup,
                 Options options = {})
      : OperatorRunner(std::move(factory), setup.config, withRestoreEvery(options, setup)) {}
  ~OperatorRunner() {
    for (auto& s : subtasks_) s->crash();
  }

  // Collects what the operator emits to `tag`, from every subtask. Before open().
  template <class T>
  testing::CollectingOutput<T>& sideOutput(const OutputTag<T>& tag) {
    auto& slot = sideOutputs_[tag.getId()];
    if (!slot) slot = std::make_shared<testing::CollectingOutput<T>>();
    return *static_cast<testing::CollectingOutput<T>*>(slot.get());  // made as one above
  }

  void open() { start(1, nullptr); }

  // The key group of `key`, for element().
  template <class K>
  int32_t keyGroupOf(const K& key) const {
    return assignToKeyGroup(key, options_.maxParallelism);
  }

  // An element on `input` for the subtask owning `keyGroup` (any subtask
  // but the first owns none on a non-keyed input: pass -1 for subtask 0).
  template <class IN>
  void element(int input, const IN& value, std::optional<int64_t> timestamp, int32_t keyGroup) {
    subtasks_[subtaskFor(keyGroup)]->template processElement<IN>(input, value, timestamp);
  }
  // An element every subtask receives (a broadcast input).
  template <class IN>
  void broadcastElement(int input, const IN& value, std::optional<int64_t> timestamp) {
    for (auto& s : subtasks_) s->template processElement<IN>(input, value, timestamp);
  }
  void watermark(int input, int64_t timestamp, int channel = 0) {
    apply(input, valves_[static_cast<size_t>(input)].onWatermark(channel, timestamp));
  }
  void idle(int input, int channel = 0) {
    apply(input, valves_[static_cast<size_t>(input)].onStatus(channel, WatermarkStatus::kIdle));
  }
  void active(int input, int channel = 0) {
    apply(input, valves_[static_cast<size_t>(input)].onStatus(channel, WatermarkStatus::kActive));
  }
  // Every channel of every input ends with the maximum watermark.
  void endOfInput() {
    for (int i = 0; i < options_.inputs; ++i) {
      for (int c = 0; c < options_.channelsPerInput; ++c) {
        active(i, c);
        watermark(i, kMaxTimestamp, c);
      }
    }
  }
  // Moves the manual clock of every subtask, firing due processing timers.
  void processingTime(int64_t millis) {
    clock_ = millis;
    for (auto& s : subtasks_) s->context().setProcessingTime(millis);
  }
  // The end of input (finish() of every subtask).
  void finish() {
    for (auto& s : subtasks_) s->finish();
  }
  // A checkpoint that every subtask snapshots and hears completed, without a
  // restore: the job's final checkpoint after finish().
  void completeCheckpoint() {
    for (auto& s : subtasks_) (void)s->snapshot(step_);
    for (auto& s : subtasks_) s->notifyCheckpointComplete(step_);
    ++step_;
  }

  // What was emitted since the last call, in emission order per subtask;
  // then the configuration's checkpoint and restore.
  std::vector<StreamRecord<OUT>> endStep() {
    std::vector<StreamRecord<OUT>> out = takeOutput();
    ++step_;
    if (step_ % options_.restoreEvery != 0) return out;
    if (config_ == RunConfig::kRestore || config_ == RunConfig::kTiered) {
      restart(static_cast<int>(subtasks_.size()));
    }
    if (config_ == RunConfig::kRescale) restart(subtasks_.size() == 1 ? 2 : 1);
    return out;
  }
  std::vector<StreamRecord<OUT>> takeOutput() {
    std::vector<StreamRecord<OUT>> out = std::move(carried_);
    carried_.clear();
    for (auto& s : subtasks_) {
      for (auto& r : s->output().records) out.push_back(std::move(r));
      s->output().records.clear();
    }
    return out;
  }
  // Counter `name` over every subtask instance so far.
  int64_t counter(const std::string& name) const {
    int64_t n = counters_.count(name) ? counters_.at(name) : 0;
    for (const auto& s : subtasks_) n += s->context().counter(name);
    return n;
  }
  void close() {
    for (auto& s : subtasks_) s->close();
    subtasks_.clear();
  }
  int parallelism() const { return static_cast<int>(subtasks_.size()); }
  RunConfig config() const { return config_; }

 private:
  using Harness = testing::OperatorHarness<OUT>;

  const char* backendName() const {
    switch (config_) {
      case RunConfig::kRocksDb: return "rocksdb";
      case RunConfig::kTiered: return "tiered";
      default: return "hashmap";
    }
  }

  static Options withRestoreEvery(Options options, RunSetup setup) {
    options.restoreEvery = setup.restoreEvery;
    return options;
  }

  void start(int parallelism, const std::vector<OperatorStateRestore>* restores) {
    subtasks_.clear();
    for (int i = 0; i < parallelism; ++i) {
      auto h = std::make_unique<Harness>(make_(), i, parallelism, options_.maxParallelism);
      h->context().manualClock().setCurrentTime(clock_);
      h->context().config().set(options::kStateBackendType, std::string(backendName()));
      if (config_ == RunConfig::kTiered) {
        h->context().config().set(options::kStateBackendTieredMemory, MemorySize::ofBytes(1));
      }
      for (auto& [tag, out] : sideOutputs_) {
        h->context().addSideOutput(tag, out.get());
      }
      h->open(restores ? &(*restores)[static_cast<size_t>(i)] : nullptr);
      // The watermark is not part of a snapshot: upstream sends it again.
      for (int in = 0; in < options_.inputs; ++in) {
        if (lastWatermark_[static_cast<size_t>(in)]) {
          h->processWatermark(in, *lastWatermark_[static_cast<size_t>(in)]);
        }
      }
      subtasks_.push_back(std::move(h));
    }
  }

  // Every other restart happens before the subtasks hear that the
  // checkpoint completed (a failure between completion and the notice), so
  // the restored instances must finish what the checkpoint left pending
  // (a sink's commit) from their restored state alone.
  void restart(int parallelism) {
    std::vector<testing::CapturedSnapshot> snapshots;
    for (auto& s : subtasks_) snapshots.push_back(s->snapshot(step_));
    if (step_ % 2 == 1) {
      for (auto& s : subtasks_) s->notifyCheckpointComplete(step_);
    }
    carried_ = takeOutput();  // what the completion emitted belongs to the next step
    for (auto& s : subtasks_) {
      for (const auto& [name, v] : s->context().counters()) counters_[name] += v;
      s->close();
    }
    std::vector<OperatorStateRestore> restores = testing::redistribute(snapshots, parallelism);
    start(parallelism, &restores);
  }

  size_t subtaskFor(int32_t keyGroup) const {
    if (subtasks_.size() == 1 || keyGroup < 0) return 0;
    for (size_t i = 0; i < subtasks_.size(); ++i) {
      KeyGroupRange r = computeKeyGroupRangeForOperatorIndex(
          options_.maxParallelism, static_cast<int32_t>(subtasks_.size()), static_cast<int32_t>(i));
      if (r.contains(keyGroup)) return i;
    }
    throw std::logic_error("no subtask owns key group " + std::to_string(keyGroup));
  }

  void apply(int input, const WatermarkValve::Emit& e) {
    if (e.watermark) {
      lastWatermark_[static_cast<size_t>(input)] = e.watermarkValue;
      for (auto& s : subtasks_) s->processWatermark(input, e.watermarkValue);
    }
    if (e.status) {
      for (auto& s : subtasks_) s->op().processWatermarkStatus(input, e.statusValue);
    }
  }

  Factory make_;
  const RunConfig config_;
  const Options options_;
  std::vector<WatermarkValve> valves_;
  std::vector<std::optional<int64_t>> lastWatermark_;
  std::vector<std::unique_ptr<Harness>> subtasks_;
  std::map<std::string, std::shared_ptr<OutputBase>> sideOutputs_;
  std::map<std::string, int64_t> counters_;
  std::vector<StreamRecord<OUT>> carried_;
  int64_t clock_ = options_.clock;
  int64_t step_ = 1;
};

// A snapshot taken earlier, written now on another thread, as the
// runtime's I/O thread writes it while the task goes on.
inline testing::CapturedSnapshot writeOnAnotherThread(OperatorStateSnapshot s) {
  testing::CapturedSnapshot captured;
  captured.operatorState = std::move(s.operatorState);
  captured.timers = std::move(s.timers);
  if (s.keyedState) {
    std::string bytes;
    std::thread writer([&] {
      std::ostringstream out;
      s.keyedState->writeTo(out);
      bytes = out.str();
    });
    writer.join();
    captured.keyedState = std::make_shared<const std::string>(std::move(bytes));
  }
  return captured;
}

}  // namespace sluice::test
