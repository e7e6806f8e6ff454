#include "api/embedded_rest.h"

#include <algorithm>
#include <deque>
#include <mutex>

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

class EmbeddedDispatcher final : public rest::Dispatcher {
 public:
  void add(std::shared_ptr<runtime::JobRun> run) {
    std::lock_guard lock(mu_);
    runs_.push_front(std::move(run));
    // Forget the oldest ended jobs beyond the limit; running ones stay.
    for (size_t i = runs_.size(); i-- > 0 && runs_.size() > kRetainedJobs;) {
      if (isTerminal(runs_[i]->state())) runs_.erase(runs_.begin() + static_cast<long>(i));
    }
  }

  std::vector<rest::JobInfo> jobs() override {
    std::vector<rest::JobInfo> out;
    for (auto& r : snapshot()) out.push_back(rest::describeJob(*r));
    return out;
  }
  std::optional<rest::JobInfo> job(const std::string& id) override {
    auto r = find(id);
    if (!r) return std::nullopt;
    return rest::describeJob(*r);
  }
  rest::ClusterOverview overview() override {
    rest::ClusterOverview o;
    o.taskManagers = 1;
    int used = 0;
    for (auto& r : snapshot()) {
      if (isTerminal(r->state())) continue;
      int p = 1;
      for (const auto& v : r->jobGraph().vertices) p = std::max(p, v.parallelism);
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
    auto r = find(jobId);
    if (!r) return Status::notFound(fmt::format("Job {} not found", jobId));
    if (isTerminal(r->state())) {
      return Status::invalidArgument(
          fmt::format("Job {} has already ended ({})", jobId, jobStatusName(r->state())));
    }
    r->cancel();
    return Status::ok();
  }
  Result<std::string> savepoint(const std::string& jobId, const std::string& directory,
                                bool terminate, bool drain) override {
    auto r = find(jobId);
    if (!r) return Status::notFound(fmt::format("Job {} not found", jobId));
    try {
      return r->triggerSavepoint(directory, terminate, drain);
    } catch (const std::exception& e) {
      return Status::internal(e.what());
    }
  }

  void setConfig(const Configuration& config) { config_ = config; }

 private:
  std::vector<std::shared_ptr<runtime::JobRun>> snapshot() {
    std::lock_guard lock(mu_);
    return {runs_.begin(), runs_.end()};
  }
  std::shared_ptr<runtime::JobRun> find(const std::string& id) {
    std::lock_guard lock(mu_);
    for (auto& r : runs_) {
      if (r->jobId() == id) return r;
    }
    return nullptr;
  }

  std::mutex mu_;
  std::deque<std::shared_ptr<runtime::JobRun>> runs_;
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
  s.dispatcher.add(std::move(run));
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
