#include "api/embedded_rest.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include <sluice/core/config_options.h>

#include "core/metric_registry.h"
#include "rest/job_info.h"
#include "rest/metric_reporters.h"
#include "rest/web_monitor.h"
#include "runtime/process_metrics.h"

namespace sluice::internal {
namespace {

// Jobs an embedded endpoint keeps showing after they ended.
constexpr size_t kRetainedJobs = 32;

// Holds a job's JobRun only weakly: whoever runs the job (execute(), a
// JobClient) owns it. When the job ends, its REST description is kept (as
// Flink archives an ended job's execution graph): the run holds the job's
// graph, user functions and what they captured (an in-memory input, say),
// which must go with the job's owner.
class EmbeddedDispatcher final : public rest::Dispatcher {
 public:
  void add(const std::shared_ptr<runtime::JobRun>& run) {
    {
      std::lock_guard lock(mu_);
      Entry e;
      e.id = run->jobId();
      e.run = run;
      entries_.push_front(std::move(e));
      // Forget the oldest ended jobs beyond the limit; running ones stay.
      for (size_t i = entries_.size(); i-- > 0 && entries_.size() > kRetainedJobs;) {
        if (entries_[i].ended) entries_.erase(entries_.begin() + static_cast<long>(i));
      }
    }
    // Outside mu_: it runs now when the job has already ended.
    run->onEnd([this, id = run->jobId()](runtime::JobRun& ended) {
      rest::JobInfo info = rest::describeJob(ended);
      std::lock_guard lock(mu_);
      for (Entry& e : entries_) {
        if (e.id == id) {
          e.archived = std::move(info);
          e.ended = true;
        }
      }
    });
  }

  std::vector<rest::JobInfo> jobs() override {
    std::vector<rest::JobInfo> out;
    for (auto& e : snapshot()) {
      if (std::optional<rest::JobInfo> info = describe(e)) out.push_back(std::move(*info));
    }
    return out;
  }
  std::optional<rest::JobInfo> job(const std::string& id) override {
    std::optional<Entry> e = find(id);
    if (!e) return std::nullopt;
    return describe(*e);
  }
  rest::ClusterOverview overview() override {
    rest::ClusterOverview o;
    o.taskManagers = 1;
    int used = 0;
    for (auto& e : snapshot()) {
      std::shared_ptr<runtime::JobRun> run = e.ended ? nullptr : e.run.lock();
      if (!run || isTerminal(run->state())) continue;
      int p = 1;
      for (const auto& v : run->jobGraph().vertices) p = std::max(p, v.parallelism);
      used += p;
    }
    // Embedded mode has as many slots as its jobs need.
    o.slotsTotal = used;
    o.slotsAvailable = 0;
    return o;
  }
  std::vector<rest::TaskManagerInfo> taskManagers() override {
    rest::TaskManagerInfo tm;
    tm.id = runtime::embeddedTaskManagerId();
    tm.path = "localhost";
    tm.slotsNumber = overview().slotsTotal;
    tm.freeSlots = 0;
    tm.timeSinceLastHeartbeat = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
    const runtime::HardwareInfo h = runtime::hardwareInfo();
    tm.cpuCores = h.cpuCores;
    tm.physicalMemory = h.physicalMemory;
    tm.freeMemory = h.freeMemory;
    tm.managedMemory =
        static_cast<int64_t>(config_.get(options::kTaskManagerMemoryManagedSize).bytes);
    tm.networkMemory =
        static_cast<int64_t>(config_.get(options::kTaskManagerMemoryNetworkMax).bytes);
    return {tm};
  }
  rest::MetricStore metrics() override {
    rest::MetricStore store;
    rest::addSamples(store, metrics::MetricRegistry::process().snapshotWithRetired(),
                     runtime::embeddedTaskManagerId());
    return store;
  }
  Status cancel(const std::string& jobId) override {
    std::optional<Entry> e = find(jobId);
    if (!e) return Status::notFound(fmt::format("Job {} not found", jobId));
    std::shared_ptr<runtime::JobRun> run = e->ended ? nullptr : e->run.lock();
    if (!run || isTerminal(run->state())) return alreadyEnded(*e);
    run->cancel();
    return Status::ok();
  }
  Result<std::string> savepoint(const std::string& jobId, const std::string& directory,
                                bool terminate, bool drain) override {
    std::optional<Entry> e = find(jobId);
    if (!e) return Status::notFound(fmt::format("Job {} not found", jobId));
    std::shared_ptr<runtime::JobRun> run = e->ended ? nullptr : e->run.lock();
    if (!run) return alreadyEnded(*e);
    try {
      return run->triggerSavepoint(directory, terminate, drain);
    } catch (const std::exception& ex) {
      return Status::internal(ex.what());
    }
  }

  void setConfig(const Configuration& config) { config_ = config; }

 private:
  struct Entry {
    std::string id;
    std::weak_ptr<runtime::JobRun> run;
    bool ended = false;
    rest::JobInfo archived;  // once ended
  };

  // Null only for a run gone without its end being recorded, which its
  // destructor (it waits for the end) rules out.
  static std::optional<rest::JobInfo> describe(const Entry& e) {
    if (e.ended) return e.archived;
    if (std::shared_ptr<runtime::JobRun> run = e.run.lock()) return rest::describeJob(*run);
    return std::nullopt;
  }
  static Status alreadyEnded(const Entry& e) {
    std::optional<rest::JobInfo> info = describe(e);
    return Status::invalidArgument(fmt::format("Job {} has already ended ({})", e.id,
                                               info ? info->state : std::string("FINISHED")));
  }
  std::vector<Entry> snapshot() {
    std::lock_guard lock(mu_);
    return {entries_.begin(), entries_.end()};
  }
  std::optional<Entry> find(const std::string& id) {
    std::lock_guard lock(mu_);
    for (auto& e : entries_) {
      if (e.id == id) return e;
    }
    return std::nullopt;
  }

  std::mutex mu_;
  std::deque<Entry> entries_;
  Configuration config_;
};

// What one process serves, started once.
struct EmbeddedServices {
  std::mutex mu;
  bool metricsConfigured = false;
  EmbeddedDispatcher dispatcher;
  std::unique_ptr<rest::WebMonitor> monitor;
  std::unique_ptr<rest::MetricReporters> reporters;
  std::shared_ptr<metrics::MetricGroupImpl> processMetrics;
};

EmbeddedServices& services() {
  // Never destroyed: jobs may still end while the process exits.
  static auto* s = new EmbeddedServices();
  return *s;
}

bool wantsRest(const Configuration& config) { return config.get(options::kRestEmbeddedEnabled); }

}  // namespace

void registerEmbeddedJob(const Configuration& config, std::shared_ptr<runtime::JobRun> run) {
  EmbeddedServices& s = services();
  std::lock_guard lock(s.mu);
  if (!s.metricsConfigured) {
    s.metricsConfigured = true;
    metrics::MetricRegistry::process().configure(config);
    s.dispatcher.setConfig(config);
    s.processMetrics = runtime::registerProcessMetrics(
        {{"<host>", "localhost"}, {"<tm_id>", runtime::embeddedTaskManagerId()}}, config);
    Result<std::unique_ptr<rest::MetricReporters>> reporters =
        rest::MetricReporters::start(config, metrics::MetricRegistry::process());
    if (!reporters.isOk()) {
      s.metricsConfigured = false;
      throw SluiceException(reporters.status().message());
    }
    s.reporters = std::move(reporters).value();
  }
  s.dispatcher.add(run);
  if (!s.monitor && wantsRest(config)) {
    rest::WebMonitorOptions o = rest::WebMonitorOptions::fromConfig(config);
    o.mode = "embedded";
    auto monitor = std::make_unique<rest::WebMonitor>(s.dispatcher, o);
    if (Status st = monitor->start(); !st.isOk()) throw SluiceException(st.message());
    s.monitor = std::move(monitor);
  }
}

std::string embeddedWebInterfaceUrl() {
  EmbeddedServices& s = services();
  std::lock_guard lock(s.mu);
  return s.monitor ? s.monitor->address() : std::string();
}

int embeddedPrometheusPort() {
  EmbeddedServices& s = services();
  std::lock_guard lock(s.mu);
  return s.reporters ? s.reporters->prometheusPort() : -1;
}

}  // namespace sluice::internal
