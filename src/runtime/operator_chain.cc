#include "runtime/operator_chain.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include <sluice/core/config_options.h>

namespace sluice::runtime {
namespace {

class NullOutput final : public OutputBase {
 public:
  void emitWatermark(Watermark) override {}
  void emitWatermarkStatus(WatermarkStatus) override {}
};

}  // namespace

// The OperatorContext and RuntimeContext of one operator of the chain.
class OperatorChain::Context final : public OperatorContext, public RuntimeContext {
 public:
  Context(const TaskInfo& info, TaskServices& services, ChainHost& host, const StreamNode& node,
          std::shared_ptr<metrics::MetricGroupImpl> group)
      : group(std::move(group)),
        info_(info),
        services_(services),
        host_(host),
        node_(node),
        nameWithSubtasks_(fmt::format("{} ({}/{})#{}", info.taskName, info.subtask + 1,
                                      info.parallelism, info.attemptNumber)) {}

  RuntimeContext& runtimeContext() override { return *this; }
  OutputBase* sideOutput(const std::string& tagId) override {
    auto it = sideOutputs.find(tagId);
    return it == sideOutputs.end() ? nullptr : it->second;
  }
  void countDroppedRecord() override { ++dropped; }
  void sendSplitRequest() override { host_.requestSplit(); }
  void signalInputAvailable() override { host_.signalInputAvailable(); }
  void requestWakeupAt(std::chrono::steady_clock::time_point when) override {
    host_.requestWakeupAt(when);
  }

  const Configuration& configuration() override { return services_.configuration(); }
  const Clock& clock() override { return services_.clock(); }
  std::shared_ptr<void> slotResource(const std::string& key,
                                     const std::function<std::shared_ptr<void>()>& make) override {
    return services_.slotResource(info_.subtask, key, make);
  }
  void registerProcessingTimer(int64_t timestamp, std::function<void(int64_t)> callback) override {
    host_.registerProcessingTimer(timestamp, std::move(callback));
  }
  void incrementCounter(const std::string& name, int64_t n) override {
    auto it = counters.find(name);
    if (it == counters.end()) it = counters.emplace(name, &group->counter(name)).first;
    it->second->inc(n);
  }
  int64_t managedMemoryPerSlot() override {
    const auto total =
        static_cast<int64_t>(configuration().get(options::kTaskManagerMemoryManagedSize).bytes);
    return total / services_.numberOfSlots();
  }
  bool incrementalSnapshot(int64_t checkpointId) override {
    return host_.isIncrementalSnapshot(checkpointId);
  }

  int getIndexOfThisSubtask() const override { return info_.subtask; }
  int getNumberOfParallelSubtasks() const override { return info_.parallelism; }
  int getMaxNumberOfParallelSubtasks() const override { return info_.maxParallelism; }
  int getAttemptNumber() const override { return info_.attemptNumber; }
  const std::string& getTaskName() const override { return info_.taskName; }
  const std::string& getOperatorName() const override { return node_.name; }
  const std::string& getTaskNameWithSubtasks() const override { return nameWithSubtasks_; }
  const std::string& getJobName() const override { return info_.jobName; }
  void addAccumulator(const std::string& name, Accumulator* acc) override {
    if (!accumulators.emplace(name, acc).second) {
      throw SluiceException(
          fmt::format("accumulator '{}' is already registered in operator '{}'", name, node_.name));
    }
  }
  Accumulator* getAccumulator(const std::string& name) const override {
    auto it = accumulators.find(name);
    return it == accumulators.end() ? nullptr : it->second;
  }
  MetricGroup& getMetricGroup() override { return *group; }

  // The operator's metric group (Flink's OperatorMetricGroup); the counters
  // of incrementCounter() live in it.
  std::shared_ptr<metrics::MetricGroupImpl> group;
  std::map<std::string, OutputBase*> sideOutputs;
  std::map<std::string, Accumulator*> accumulators;
  std::map<std::string, Counter*> counters;
  int64_t dropped = 0;

 private:
  const TaskInfo& info_;
  TaskServices& services_;
  ChainHost& host_;
  const StreamNode& node_;
  std::string nameWithSubtasks_;
};

OperatorChain::OperatorChain(const StreamGraph& graph, const JobGraph& jobGraph,
                             const JobVertex& vertex, const TaskInfo& info, TaskServices& services,
                             ChainHost& host, TaskMetrics& metrics)
    : graph_(graph),
      jobGraph_(jobGraph),
      vertex_(vertex),
      info_(info),
      services_(services),
      host_(host),
      metrics_(metrics),
      current_(&info.taskName) {}

OperatorChain::~OperatorChain() { release(); }

void OperatorChain::resetCurrentOperator() { current_ = &graph_.node(vertex_.head()).name; }

void OperatorChain::fail(TaskResult& result, const std::string& operatorName,
                         const std::string& cause) const {
  result.failed = true;
  result.error = fmt::format("operator '{}' (subtask {}/{} of task '{}') failed: {}", operatorName,
                             info_.subtask + 1, info_.parallelism, info_.taskName, cause);
}

void OperatorChain::build(const std::map<int, std::unique_ptr<RecordWriter>>& writers) {
  const size_t n = vertex_.chain.size();
  ops_.resize(n);
  contexts_.resize(n);
  mainOutput_.assign(n, nullptr);
  sideOutputs_.assign(n, {});
  chainedInputs_.assign(n, {});
  for (size_t i = 0; i < n; ++i) {
    const StreamNode& node = graph_.node(vertex_.chain[i]);
    position_[node.id] = i;
    current_ = &node.name;
    ops_[i] = node.factory->createOperator();
    contexts_[i] = std::make_unique<Context>(
        info_, services_, host_, node,
        metrics_.operatorGroup(operatorHexId(graph_, node.id), node.name));
  }
  for (size_t i = n; i-- > 0;) wire(i, writers);
  for (size_t i = 0; i < n; ++i) {
    refs_.push_back({vertex_.chain[i], &graph_.node(vertex_.chain[i]).name, ops_[i].get()});
  }
  resetCurrentOperator();
}

void OperatorChain::wire(size_t i, const std::map<int, std::unique_ptr<RecordWriter>>& writers) {
  const StreamNode& node = graph_.node(vertex_.chain[i]);
  std::map<std::string, std::vector<std::unique_ptr<OutputBase>>> byTag;
  std::map<std::string, const TypeOps*> tagType;
  for (int eid : node.outEdges) {
    const StreamEdge& e = graph_.edge(eid);
    std::unique_ptr<OutputBase> o;
    if (jobGraph_.edgeChained[eid]) {
      o = e.type->createChainedOutput(*ops_[position_.at(e.target)], e.inputIndex);
      chainedInputs_[position_.at(e.target)].push_back(o.get());
    } else {
      o = e.network->createNetworkOutput(*writers.at(eid), e.partition, info_.subtask,
                                         graph_.node(e.target).maxParallelism);
      networkOutputs_.push_back(o.get());
    }
    byTag[e.sideOutputTag].push_back(std::move(o));
    tagType[e.sideOutputTag] = e.type.get();
  }
  std::unique_ptr<OutputBase> main;
  auto mainOuts = byTag.find("");
  if (node.factory->outputType()) {
    main = node.factory->outputType()->createFanOut(mainOuts == byTag.end()
                                                        ? std::vector<std::unique_ptr<OutputBase>>{}
                                                        : std::move(mainOuts->second));
  } else {
    main = std::make_unique<NullOutput>();
  }
  for (auto& [tag, outs] : byTag) {
    if (tag.empty()) continue;
    auto fan = tagType[tag]->createFanOut(std::move(outs));
    contexts_[i]->sideOutputs[tag] = fan.get();
    sideOutputs_[i].push_back(fan.get());
    outputs_.push_back(std::move(fan));
  }
  current_ = &node.name;
  ops_[i]->setup(*contexts_[i], *main);
  if (i == 0) headOutput_ = main.get();
  mainOutput_[i] = main.get();
  outputs_.push_back(std::move(main));
}

void OperatorChain::initializeAndOpen(const std::map<int, OperatorStateRestore>& restore) {
  for (size_t i = ops_.size(); i-- > 0;) {
    current_ = refs_[i].name;
    auto restored = restore.find(vertex_.chain[i]);
    ops_[i]->initializeState(restored == restore.end() ? nullptr : &restored->second);
    ops_[i]->open();
    ++opened_;
  }
  resetCurrentOperator();
}

void OperatorChain::finish() {
  for (size_t i = 0; i < ops_.size(); ++i) {
    current_ = refs_[i].name;
    ops_[i]->finish();
  }
  current_ = &info_.taskName;
}

void OperatorChain::notifyCheckpointComplete(int64_t id) {
  for (size_t i = 0; i < ops_.size(); ++i) {
    current_ = refs_[i].name;
    ops_[i]->notifyCheckpointComplete(id);
  }
  resetCurrentOperator();
}

void OperatorChain::close(TaskResult& result, bool quiet) {
  const size_t n = ops_.size();
  for (size_t i = n - opened_; i < n; ++i) {
    try {
      ops_[i]->close();
    } catch (...) {
      if (!result.failed && !quiet) fail(result, *refs_[i].name, describeCurrentException());
    }
  }
  opened_ = 0;
}

void OperatorChain::collectMetrics(TaskResult& result) {
  // Accumulators are user types: their clone/merge may throw too.
  size_t harvesting = 0;
  try {
    for (size_t i = 0; i < contexts_.size(); ++i) {
      harvesting = i;
      if (!contexts_[i]) continue;
      Context& c = *contexts_[i];
      result.numRecordsDropped += c.dropped;
      for (auto& [name, v] : c.counters) result.counters[name] += v->getCount();
      for (auto& [name, acc] : c.accumulators) {
        auto it = result.accumulators.find(name);
        if (it == result.accumulators.end()) {
          result.accumulators.emplace(name, acc->clone());
        } else if (it->second->getLocalValue().index() != acc->getLocalValue().index()) {
          if (!result.failed) {
            fail(result, graph_.node(vertex_.chain[i]).name,
                 fmt::format("accumulator '{}' is registered with different types", name));
          }
        } else {
          it->second->merge(*acc);
        }
      }
    }
  } catch (...) {
    if (!result.failed) {
      fail(result, graph_.node(vertex_.chain[harvesting]).name,
           "accumulator: " + describeCurrentException());
    }
  }
}

std::function<int64_t()> OperatorChain::registerMetrics(const InputProcessor& input) {
  const auto* source = dynamic_cast<const SourceOperatorBase*>(ops_.front().get());
  // Outputs whose count is known without counting stop counting (the cost
  // of one store per record and chained operator shows on cheap pipelines):
  // a source's, which it publishes per batch, and a one-out-per-in
  // operator's, which is its input's count. The operators are in chain order,
  // so what an output derives from is settled before it.
  if (source != nullptr) mainOutput_[0]->deriveCount([source] { return source->recordsEmitted(); });
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (ops_[i]->emitsOnePerInput() && sideOutputs_[i].empty()) {
      mainOutput_[i]->deriveCount(recordsInOf(i, input));
    }
  }
  for (size_t i = 0; i < ops_.size(); ++i) {
    metrics::MetricGroupImpl& g = *contexts_[i]->group;
    std::function<int64_t()> in = recordsInOf(i, input);
    std::function<int64_t()> inWatermark;
    if (i == 0) {
      inWatermark = [&input] { return input.inputWatermark(); };
    } else {
      inWatermark = [outs = chainedInputs_[i]] {
        int64_t w = kMaxTimestamp;
        for (const OutputBase* o : outs) w = std::min(w, o->lastWatermark());
        return outs.empty() ? kMinTimestamp : w;
      };
    }
    std::vector<const OutputBase*> outs = sideOutputs_[i];
    outs.push_back(mainOutput_[i]);
    auto out = [outs] {
      int64_t n = 0;
      for (const OutputBase* o : outs) n += o->recordsCounted();
      return n;
    };
    g.counterView("numRecordsIn", in);
    g.rateView("numRecordsInPerSecond", in);
    g.counterView("numRecordsOut", out);
    g.rateView("numRecordsOutPerSecond", out);
    g.gauge("currentInputWatermark", [inWatermark] { return static_cast<double>(inWatermark()); });
    const OutputBase* main = mainOutput_[i];
    g.gauge("currentOutputWatermark",
            [main] { return static_cast<double>(main->lastWatermark()); });
    if (i == 0 && source != nullptr) {
      // Flink's source watermarkLag: how far the emitted watermark trails
      // the wall clock.
      g.gauge("watermarkLag", [main] {
        const int64_t w = main->lastWatermark();
        if (w == kMinTimestamp) return 0.0;
        const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
        return static_cast<double>(now - w);
      });
    }
  }
  return [outs = networkOutputs_] {
    int64_t n = 0;
    for (const OutputBase* o : outs) n += o->recordsCounted();
    return n;
  };
}

std::function<int64_t()> OperatorChain::recordsInOf(size_t i, const InputProcessor& input) const {
  if (i == 0) return [&input] { return input.recordsIn(); };
  return [outs = chainedInputs_[i]] {
    int64_t n = 0;
    for (const OutputBase* o : outs) n += o->recordsCounted();
    return n;
  };
}

void OperatorChain::release() {
  // The operators' metric views read the outputs: unregister them first.
  for (auto& c : contexts_) {
    if (c) c->group.reset();
  }
  outputs_.clear();
  refs_.clear();
  ops_.clear();
}

}  // namespace sluice::runtime
