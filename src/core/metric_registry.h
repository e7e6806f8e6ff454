// The metric registry of one process (Flink's MetricRegistryImpl): every
// metric group the engine and user functions created, the views (rates
// and time-per-second gauges) it brings up to date once a second, and a
// snapshot of all values for reporters, the REST API and the JobManager.
//
// Groups form Flink's hierarchy through their kind and variables rather
// than through parent objects: a task group carries the TaskManager's and
// the job's variables as well as its own. Sub-groups (addGroup) hang below
// a base group. A group is unregistered when its owner destroys it.
//
// Scope formats are Flink's `metrics.scope.*` keys (defaults as Flink's);
// the logical scope ("taskmanager.job.task.operator") names metrics for
// the Prometheus reporter.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <sluice/core/config.h>
#include <sluice/core/metrics.h>

namespace sluice::metrics {

enum class ScopeKind {
  kJobManager,
  kJobManagerJob,
  kTaskManager,
  kTaskManagerJob,
  kTask,
  kOperator
};
// "jobmanager", "jobmanager.job", "taskmanager", "taskmanager.job",
// "taskmanager.job.task", "taskmanager.job.task.operator".
const char* logicalScope(ScopeKind kind);

enum class MetricType { kCounter, kGauge, kMeter, kHistogram };
const char* metricTypeName(MetricType type);

// One metric's value at the time of a snapshot.
struct MetricSample {
  ScopeKind kind = ScopeKind::kTaskManager;
  // The base group's variables and those of key-value sub-groups, with
  // their angle brackets: {"<job_id>", "..."}.
  std::map<std::string, std::string> variables;
  // The formatted scope of the base group ("localhost.taskmanager.tm1.Job.Map.0").
  std::string scope;
  // Sub-group components below the base group (addGroup), e.g.
  // {"Status", "JVM", "CPU"} or {"mygroup"}; for logical scopes, the keys of
  // key-value groups only.
  std::vector<std::string> subScope;
  std::vector<std::string> logicalSubScope;
  std::string name;
  MetricType type = MetricType::kGauge;
  double value = 0;               // counter count, gauge value, meter rate; histogram: count
  int64_t count = 0;              // meter events, histogram values recorded
  HistogramStatistics histogram;  // kHistogram only

  // subScope and name joined with '.': the id Flink's REST API uses
  // ("numRecordsIn", "Status.JVM.CPU.Load", "mygroup.words").
  std::string restId() const;
  // scope, subScope and name joined with '.'.
  std::string identifier() const;
};

// Formats a value as Flink's REST API and log reporter do: integral values
// without a decimal point, others with up to 17 significant digits.
std::string formatMetricValue(double value);

// A counter of events only one thread updates (the task thread), read by
// others: cheaper than Counter on the hot path, no read-modify-write.
class SingleWriterCount {
 public:
  void add(int64_t n) {
    v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void increment() { add(1); }
  int64_t get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> v_{0};
};

// Milliseconds per second spent in some state, over the last 5 seconds
// (Flink's TimerGauge): `totalNanos` reads the time spent so far, including
// an ongoing period.
using NanosReader = std::function<int64_t()>;

class MetricGroupImpl;

class MetricRegistry {
 public:
  // Whether the registry runs its own thread calling updateViews() once a
  // second (started with the first group). Tests that drive updateViews()
  // with their own clock construct a registry without one.
  enum class UpdateThread { kStart, kNone };

  // The registry of this process, configured by configure(). It is never
  // destroyed, so groups owned by static objects may unregister at exit; its
  // update thread runs until the process ends.
  static MetricRegistry& process();

  // Reads the scope formats (`metrics.scope.*`) from `config`; groups
  // created afterwards use them. Throws SluiceException naming the key for a
  // format that starts with '*' (Flink: "inherit the parent's scope") where
  // the scope has no parent (jm, tm).
  void configure(const Configuration& config);

  // A new base group of `kind` with `variables` ({"<host>", "..."}; those
  // the kind's scope format names). Unregistered when destroyed.
  std::shared_ptr<MetricGroupImpl> createGroup(ScopeKind kind,
                                               std::map<std::string, std::string> variables);

  // Every metric's current value. Gauges are called on this thread, with no
  // lock of the registry or of a group held; a group being destroyed waits
  // until a snapshot in progress is done with it (so a gauge must not destroy
  // the group it belongs to). A gauge that throws is left out (logged once).
  std::vector<MetricSample> snapshot() const;
  // Only the metrics whose group has `variable` == `value`.
  std::vector<MetricSample> snapshot(const std::string& variable, const std::string& value) const;

  // Brings meters and time gauges up to date (the registry's own thread calls
  // it once a second; tests may call it with their own clock reading). A
  // reading less than half a second after a view's previous one is ignored,
  // so a view registered just before a tick does not report a rate over a
  // sliver of time.
  void updateViews(std::chrono::steady_clock::time_point now);

  // For MetricGroupImpl. A scope format is split at '.', and every component
  // that is a variable the group has ("<job_name>") is replaced by its value
  // as it is, dots included (as Flink: reporters filter characters, not the
  // registry; an empty value becomes "null"). Unknown variables stay literal.
  std::string formatScope(ScopeKind kind, const std::map<std::string, std::string>& vars) const;
  std::vector<std::string> scopeComponents(ScopeKind kind,
                                           const std::map<std::string, std::string>& vars) const;
  void registerGroup(MetricGroupImpl* group);
  void unregisterGroup(MetricGroupImpl* group);

  // The final values of groups created with retainOnClose(): kept when the
  // group is destroyed (a task that ended), for the REST API, which shows a
  // finished vertex's counts as Flink does. Reporters do not see them.
  // Kept per <job_id>, for the last kRetainedJobs jobs; a later group with
  // the same job, task, subtask, operator and name replaces the value.
  static constexpr size_t kRetainedJobs = 32;
  void retire(std::vector<MetricSample> samples);
  // The retained values, then snapshot(): live values come last, so that
  // whoever files them by id keeps the live one.
  std::vector<MetricSample> snapshotWithRetired() const;
  // With its own thread, a new rate or time view takes its first reading
  // when registered (so events before the first tick count); without one,
  // at the first updateViews().
  bool hasUpdateThread() const;

  // Every group must be destroyed before its registry.
  explicit MetricRegistry(UpdateThread updates = UpdateThread::kStart);
  ~MetricRegistry();
  MetricRegistry(const MetricRegistry&) = delete;
  MetricRegistry& operator=(const MetricRegistry&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A metric group: a base group (kind + variables) or a sub-group of one.
//
// Names: registering a name the group already has returns the existing
// metric when it is of the same kind (counter(), histogram(), meter()), and
// otherwise logs a warning and returns a working metric that is not reported
// (as Flink). A second gauge or view under a taken name is ignored with a
// warning. Empty metric or group names throw SluiceException.
class MetricGroupImpl final : public MetricGroup {
 public:
  // A base group, registered with `registry` until destroyed. `scope` is
  // split at '.' into components; createGroup() passes the components
  // themselves, so that a value with a dot stays one component.
  MetricGroupImpl(MetricRegistry& registry, ScopeKind kind,
                  std::map<std::string, std::string> variables, std::string scope);
  MetricGroupImpl(MetricRegistry& registry, ScopeKind kind,
                  std::map<std::string, std::string> variables,
                  std::vector<std::string> scopeComponents);
  ~MetricGroupImpl() override;

  Counter& counter(const std::string& name) override;
  void gauge(const std::string& name, std::function<double()> value) override;
  Histogram& histogram(const std::string& name, std::unique_ptr<Histogram> histogram) override;
  Meter& meter(const std::string& name, Counter* events) override;
  MetricGroup& addGroup(const std::string& name) override;
  MetricGroup& addGroup(const std::string& key, const std::string& value) override;
  std::vector<std::string> getScopeComponents() const override;
  std::map<std::string, std::string> getAllVariables() const override;
  std::string getMetricIdentifier(const std::string& metricName) const override;

  // Engine metrics over cells the engine owns. The readers are called on
  // the registry's threads (snapshot, update) until the group is destroyed,
  // so what they read must outlive the group; they must not throw.
  // A counter read from `count`.
  // Keep this group's final values when it is destroyed (see
  // MetricRegistry::retire). Base groups only.
  void retainOnClose() { retainOnClose_ = true; }

  void counterView(const std::string& name, std::function<int64_t()> count);
  // `name` = events per second of `count` (a meter), over the last 60 s, or
  // over the time since the first reading while that is shorter.
  void rateView(const std::string& name, std::function<int64_t()> count);
  // `name` = ms per second spent as `nanos` says (a gauge), over the last 5 s
  // (shorter at first, as rateView), rounded to whole ms and capped at 1000.
  void timePerSecondView(const std::string& name, NanosReader nanos);
  // `name` = 1000 minus the sum of the listed time-per-second views of this
  // group (Flink's busyTimeMsPerSecond), never below 0; 0 until one of them
  // has a value (a task that just started is not "all busy").
  void remainderPerSecondView(const std::string& name, std::vector<std::string> of);

  ScopeKind kind() const { return kind_; }
  // A base group's variables; a sub-group's own (key-value) variables only.
  const std::map<std::string, std::string>& variables() const { return variables_; }

  // For MetricRegistry (base groups; sub-groups are reached through them).
  void collect(std::vector<MetricSample>& out) const;
  void updateViews(std::chrono::steady_clock::time_point now);

 private:
  struct Entry;
  MetricGroupImpl(MetricGroupImpl* parent, std::string component, std::string logicalComponent,
                  std::map<std::string, std::string> extraVariables);
  // The reported entry named `name`, or null. Caller holds mu_.
  Entry* find(const std::string& name);
  // Adds `entry`, unreported when its name is taken (logged). Caller holds mu_.
  Entry& add(std::unique_ptr<Entry> entry);
  // The sub-group `component` (a value group of `key` when valueGroup), made
  // on first use.
  MetricGroupImpl& child(const std::string& component, bool valueGroup, const std::string& key);
  void collectInto(std::vector<MetricSample>& out, std::vector<std::string>& sub,
                   std::vector<std::string>& logicalSub,
                   std::map<std::string, std::string>& vars) const;
  void snapshotStructure(std::vector<Entry*>& entries,
                         std::vector<MetricGroupImpl*>& children) const;

  MetricRegistry& registry_;
  MetricGroupImpl* parent_ = nullptr;
  ScopeKind kind_;
  std::map<std::string, std::string> variables_;  // a base group's; a sub-group's extras
  std::string scope_;                             // the base group's, joined with '.'
  std::vector<std::string> scopeComponents_;      // base scope, then sub-group components
  std::string component_;                         // sub-groups
  std::string logicalComponent_;                  // sub-groups ("" for a key-value value group)
  mutable std::mutex mu_;
  // Entries and children are only ever added while the group lives, so a
  // pointer copied under mu_ stays valid without it.
  std::vector<std::unique_ptr<Entry>> entries_;
  std::vector<std::unique_ptr<MetricGroupImpl>> children_;
  bool retainOnClose_ = false;
};

}  // namespace sluice::metrics
