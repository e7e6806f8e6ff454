#include "core/metric_registry.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <iterator>
#include <list>
#include <new>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include <sluice/core/config_options.h>
#include <sluice/core/status.h>

#include "core/logging.h"

namespace sluice::metrics {

using Clock = std::chrono::steady_clock;

const char* logicalScope(ScopeKind kind) {
  switch (kind) {
    case ScopeKind::kJobManager: return "jobmanager";
    case ScopeKind::kJobManagerJob: return "jobmanager.job";
    case ScopeKind::kTaskManager: return "taskmanager";
    case ScopeKind::kTaskManagerJob: return "taskmanager.job";
    case ScopeKind::kTask: return "taskmanager.job.task";
    case ScopeKind::kOperator: return "taskmanager.job.task.operator";
  }
  return "unknown";
}

const char* metricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kMeter: return "meter";
    case MetricType::kHistogram: return "histogram";
  }
  return "unknown";
}

namespace {

std::string join(const std::vector<std::string>& parts, const std::string& last) {
  std::string out;
  for (const std::string& p : parts) {
    out += p;
    out += '.';
  }
  out += last;
  return out;
}

std::string joinScope(const std::vector<std::string>& components) {
  std::string out;
  for (size_t i = 0; i < components.size(); ++i) {
    if (i > 0) out += '.';
    out += components[i];
  }
  return out;
}

std::vector<std::string> splitDots(const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (true) {
    const size_t dot = text.find('.', start);
    out.push_back(text.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return out;
}

constexpr size_t kKinds = 6;

size_t indexOf(ScopeKind kind) { return static_cast<size_t>(kind); }

// The scope whose format "*" stands for (Flink's parent scope).
std::optional<ScopeKind> parentOf(ScopeKind kind) {
  switch (kind) {
    case ScopeKind::kJobManagerJob: return ScopeKind::kJobManager;
    case ScopeKind::kTaskManagerJob: return ScopeKind::kTaskManager;
    case ScopeKind::kTask: return ScopeKind::kTaskManagerJob;
    case ScopeKind::kOperator: return ScopeKind::kTask;
    case ScopeKind::kJobManager:
    case ScopeKind::kTaskManager: return std::nullopt;
  }
  return std::nullopt;
}

const ConfigOption<std::string>& scopeOption(ScopeKind kind) {
  switch (kind) {
    case ScopeKind::kJobManager: return options::kMetricsScopeJm;
    case ScopeKind::kJobManagerJob: return options::kMetricsScopeJmJob;
    case ScopeKind::kTaskManager: return options::kMetricsScopeTm;
    case ScopeKind::kTaskManagerJob: return options::kMetricsScopeTmJob;
    case ScopeKind::kTask: return options::kMetricsScopeTask;
    case ScopeKind::kOperator: return options::kMetricsScopeOperator;
  }
  return options::kMetricsScopeTm;
}

// Readings of a monotonic total over a sliding window of time: the change
// per second between the newest reading and the oldest one still in the
// window (the window is shorter while fewer readings exist, so a rate shows
// from the second reading on). Used only under the registry's update lock.
class SlidingWindow {
 public:
  explicit SlidingWindow(Clock::duration span) : span_(span) {}

  std::optional<double> add(Clock::time_point now, int64_t total) {
    if (!readings_.empty() && now - readings_.back().first < std::chrono::milliseconds(500)) {
      return std::nullopt;
    }
    readings_.emplace_back(now, total);
    // Keep the newest reading at or before now - span as the window's start.
    while (readings_.size() > 2 && now - readings_[1].first >= span_) readings_.pop_front();
    if (readings_.size() < 2) return std::nullopt;
    const auto& first = readings_.front();
    const double seconds = std::chrono::duration<double>(now - first.first).count();
    return static_cast<double>(total - first.second) / seconds;
  }

 private:
  Clock::duration span_;
  std::deque<std::pair<Clock::time_point, int64_t>> readings_;
};

// A user meter (over a counter) or an engine rate view (over a reader).
class RateMeter final : public Meter {
 public:
  explicit RateMeter(Counter* events) : events_(events != nullptr ? events : &own_) {}
  explicit RateMeter(std::function<int64_t()> reader)
      : events_(nullptr), reader_(std::move(reader)) {}

  void markEvent() override {
    if (events_ != nullptr) events_->inc();
  }
  void markEvent(int64_t n) override {
    if (events_ != nullptr) events_->inc(n);
  }
  double getRate() const override { return rate_.load(std::memory_order_relaxed); }
  int64_t getCount() const override { return events_ != nullptr ? events_->getCount() : reader_(); }

  void update(Clock::time_point now) {
    if (auto r = window_.add(now, getCount())) rate_.store(*r, std::memory_order_relaxed);
  }

 private:
  Counter own_;
  Counter* events_;
  std::function<int64_t()> reader_;
  SlidingWindow window_{std::chrono::seconds(60)};
  std::atomic<double> rate_{0};
};

// Flink's TimerGauge: ms per second spent in a state, over the last 5 s,
// rounded to whole milliseconds (Flink reports a long).
class TimeView {
 public:
  explicit TimeView(NanosReader nanos) : nanos_(std::move(nanos)) {}

  void update(Clock::time_point now) {
    if (auto nanosPerSecond = window_.add(now, nanos_())) {
      const double ms = std::clamp(std::round(*nanosPerSecond / 1e6), 0.0, 1000.0);
      value_.store(ms, std::memory_order_relaxed);
      hasValue_.store(true, std::memory_order_release);
    }
  }
  double value() const { return value_.load(std::memory_order_relaxed); }
  bool hasValue() const { return hasValue_.load(std::memory_order_acquire); }

 private:
  NanosReader nanos_;
  SlidingWindow window_{std::chrono::seconds(5)};
  std::atomic<double> value_{0};
  std::atomic<bool> hasValue_{false};
};

enum class Source {
  kCounter,
  kCounterView,
  kGauge,
  kHistogram,
  kMeter,
  kRateView,
  kTimeView,
  kRemainderView,
};

const char* sourceName(Source s) {
  switch (s) {
    case Source::kCounter: return "counter";
    case Source::kCounterView: return "counter view";
    case Source::kGauge: return "gauge";
    case Source::kHistogram: return "histogram";
    case Source::kMeter: return "meter";
    case Source::kRateView: return "rate view";
    case Source::kTimeView: return "time view";
    case Source::kRemainderView: return "remainder view";
  }
  return "metric";
}

MetricType typeOf(Source s) {
  switch (s) {
    case Source::kCounter:
    case Source::kCounterView: return MetricType::kCounter;
    case Source::kHistogram: return MetricType::kHistogram;
    case Source::kMeter:
    case Source::kRateView: return MetricType::kMeter;
    case Source::kGauge:
    case Source::kTimeView:
    case Source::kRemainderView: return MetricType::kGauge;
  }
  return MetricType::kGauge;
}

void checkName(const std::string& name, const char* what) {
  if (name.empty()) throw SluiceException(fmt::format("a metric {} name must not be empty", what));
}

}  // namespace

std::string MetricSample::restId() const { return join(subScope, name); }

std::string MetricSample::identifier() const {
  return scope.empty() ? restId() : scope + "." + restId();
}

std::string formatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  if (value == std::trunc(value) && std::fabs(value) < 9.0e18) {
    return fmt::format("{}", static_cast<int64_t>(value));
  }
  // Long.MAX_VALUE and MIN_VALUE (watermarks at the end of input and before
  // the first) round to +-2^63 as doubles: print them as Flink does.
  if (value >= 9.223372036854775e18) return "9223372036854775807";
  if (value <= -9.223372036854775e18) return "-9223372036854775808";
  return fmt::format("{}", value);  // the shortest text that reads back the same
}

// ---- MetricGroupImpl ----

struct MetricGroupImpl::Entry {
  std::string name;
  Source source = Source::kGauge;
  bool reported = true;
  std::unique_ptr<Counter> counter;      // kCounter
  std::function<int64_t()> count;        // kCounterView
  std::function<double()> gauge;         // kGauge
  std::unique_ptr<Histogram> histogram;  // kHistogram
  std::unique_ptr<RateMeter> meter;      // kMeter, kRateView
  std::unique_ptr<TimeView> time;        // kTimeView
  std::vector<std::string> of;           // kRemainderView
  mutable std::atomic<bool> failureLogged{false};
};

MetricGroupImpl::MetricGroupImpl(MetricRegistry& registry, ScopeKind kind,
                                 std::map<std::string, std::string> variables, std::string scope)
    : MetricGroupImpl(registry, kind, std::move(variables), splitDots(scope)) {}

MetricGroupImpl::MetricGroupImpl(MetricRegistry& registry, ScopeKind kind,
                                 std::map<std::string, std::string> variables,
                                 std::vector<std::string> scopeComponents)
    : registry_(registry),
      kind_(kind),
      variables_(std::move(variables)),
      scope_(joinScope(scopeComponents)),
      scopeComponents_(std::move(scopeComponents)) {
  registry_.registerGroup(this);
}

MetricGroupImpl::MetricGroupImpl(MetricGroupImpl* parent, std::string component,
                                 std::string logicalComponent,
                                 std::map<std::string, std::string> extraVariables)
    : registry_(parent->registry_),
      parent_(parent),
      kind_(parent->kind_),
      variables_(std::move(extraVariables)),
      scope_(parent->scope_),
      scopeComponents_(parent->scopeComponents_),
      component_(std::move(component)),
      logicalComponent_(std::move(logicalComponent)) {
  scopeComponents_.push_back(component_);
}

MetricGroupImpl::~MetricGroupImpl() {
  if (parent_ == nullptr && retainOnClose_) {
    // What the views read is still there: the owner destroys the group
    // first.
    std::vector<MetricSample> last;
    try {
      collect(last);
      registry_.retire(std::move(last));
    } catch (...) {
      // Out of memory while keeping final values: they are lost, the
      // group still goes.
    }
  }
  // Waits for a snapshot or update that is reading this group (and its
  // sub-groups, which go with it) to be done with it.
  if (parent_ == nullptr) registry_.unregisterGroup(this);
}

MetricGroupImpl::Entry* MetricGroupImpl::find(const std::string& name) {
  for (auto& e : entries_) {
    if (e->reported && e->name == name) return e.get();
  }
  return nullptr;
}

MetricGroupImpl::Entry& MetricGroupImpl::add(std::unique_ptr<Entry> entry) {
  if (Entry* prior = find(entry->name)) {
    entry->reported = false;
    log::warn("Name collision: group {} already has a {} named '{}'; the new {} is not reported",
              joinScope(scopeComponents_), sourceName(prior->source), entry->name,
              sourceName(entry->source));
  }
  entries_.push_back(std::move(entry));
  return *entries_.back();
}

Counter& MetricGroupImpl::counter(const std::string& name) {
  checkName(name, "counter");
  std::lock_guard<std::mutex> lock(mu_);
  if (Entry* e = find(name); e != nullptr && e->source == Source::kCounter) return *e->counter;
  auto entry = std::make_unique<Entry>();
  entry->name = name;
  entry->source = Source::kCounter;
  entry->counter = std::make_unique<Counter>();
  return *add(std::move(entry)).counter;
}

void MetricGroupImpl::gauge(const std::string& name, std::function<double()> value) {
  checkName(name, "gauge");
  if (!value) throw SluiceException(fmt::format("gauge '{}' has no value function", name));
  std::lock_guard<std::mutex> lock(mu_);
  auto entry = std::make_unique<Entry>();
  entry->name = name;
  entry->source = Source::kGauge;
  entry->gauge = std::move(value);
  add(std::move(entry));
}

Histogram& MetricGroupImpl::histogram(const std::string& name,
                                      std::unique_ptr<Histogram> histogram) {
  checkName(name, "histogram");
  std::lock_guard<std::mutex> lock(mu_);
  if (Entry* e = find(name); e != nullptr && e->source == Source::kHistogram) {
    return *e->histogram;
  }
  auto entry = std::make_unique<Entry>();
  entry->name = name;
  entry->source = Source::kHistogram;
  entry->histogram =
      histogram ? std::move(histogram) : std::make_unique<DescriptiveStatisticsHistogram>(500);
  return *add(std::move(entry)).histogram;
}

Meter& MetricGroupImpl::meter(const std::string& name, Counter* events) {
  checkName(name, "meter");
  std::lock_guard<std::mutex> lock(mu_);
  if (Entry* e = find(name); e != nullptr && e->source == Source::kMeter) return *e->meter;
  auto entry = std::make_unique<Entry>();
  entry->name = name;
  entry->source = Source::kMeter;
  entry->meter = std::make_unique<RateMeter>(events);
  if (registry_.hasUpdateThread()) entry->meter->update(Clock::now());
  return *add(std::move(entry)).meter;
}

void MetricGroupImpl::counterView(const std::string& name, std::function<int64_t()> count) {
  checkName(name, "counter");
  std::lock_guard<std::mutex> lock(mu_);
  auto entry = std::make_unique<Entry>();
  entry->name = name;
  entry->source = Source::kCounterView;
  entry->count = std::move(count);
  add(std::move(entry));
}

void MetricGroupImpl::rateView(const std::string& name, std::function<int64_t()> count) {
  checkName(name, "meter");
  std::lock_guard<std::mutex> lock(mu_);
  auto entry = std::make_unique<Entry>();
  entry->name = name;
  entry->source = Source::kRateView;
  entry->meter = std::make_unique<RateMeter>(std::move(count));
  if (registry_.hasUpdateThread()) entry->meter->update(Clock::now());
  add(std::move(entry));
}

void MetricGroupImpl::timePerSecondView(const std::string& name, NanosReader nanos) {
  checkName(name, "gauge");
  std::lock_guard<std::mutex> lock(mu_);
  auto entry = std::make_unique<Entry>();
  entry->name = name;
  entry->source = Source::kTimeView;
  entry->time = std::make_unique<TimeView>(std::move(nanos));
  if (registry_.hasUpdateThread()) entry->time->update(Clock::now());
  add(std::move(entry));
}

void MetricGroupImpl::remainderPerSecondView(const std::string& name, std::vector<std::string> of) {
  checkName(name, "gauge");
  std::lock_guard<std::mutex> lock(mu_);
  auto entry = std::make_unique<Entry>();
  entry->name = name;
  entry->source = Source::kRemainderView;
  entry->of = std::move(of);
  add(std::move(entry));
}

MetricGroupImpl& MetricGroupImpl::child(const std::string& component, bool valueGroup,
                                        const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& c : children_) {
    if (c->component_ == component && c->logicalComponent_.empty() == valueGroup) return *c;
  }
  std::map<std::string, std::string> extra;
  if (valueGroup) extra.emplace("<" + key + ">", component);
  // The constructor for sub-groups is private, hence no make_unique.
  children_.push_back(std::unique_ptr<MetricGroupImpl>(
      new MetricGroupImpl(this, component, valueGroup ? std::string() : component, extra)));
  return *children_.back();
}

MetricGroup& MetricGroupImpl::addGroup(const std::string& name) {
  checkName(name, "group");
  return child(name, false, "");
}

MetricGroup& MetricGroupImpl::addGroup(const std::string& key, const std::string& value) {
  checkName(key, "group key");
  checkName(value, "group value");
  return child(key, false, "").child(value, true, key);
}

std::vector<std::string> MetricGroupImpl::getScopeComponents() const { return scopeComponents_; }

std::map<std::string, std::string> MetricGroupImpl::getAllVariables() const {
  std::map<std::string, std::string> out;
  // The nearest group's value wins (a key-value group below another of the
  // same key).
  for (const MetricGroupImpl* g = this; g != nullptr; g = g->parent_) {
    for (const auto& [k, v] : g->variables_) out.emplace(k, v);
  }
  return out;
}

std::string MetricGroupImpl::getMetricIdentifier(const std::string& metricName) const {
  return join(scopeComponents_, metricName);
}

void MetricGroupImpl::snapshotStructure(std::vector<Entry*>& entries,
                                        std::vector<MetricGroupImpl*>& children) const {
  std::lock_guard<std::mutex> lock(mu_);
  entries.reserve(entries_.size());
  for (const auto& e : entries_) {
    if (e->reported) entries.push_back(e.get());
  }
  children.reserve(children_.size());
  for (const auto& c : children_) children.push_back(c.get());
}

void MetricGroupImpl::collect(std::vector<MetricSample>& out) const {
  std::vector<std::string> sub;
  std::vector<std::string> logicalSub;
  std::map<std::string, std::string> vars = variables_;
  collectInto(out, sub, logicalSub, vars);
}

void MetricGroupImpl::collectInto(std::vector<MetricSample>& out, std::vector<std::string>& sub,
                                  std::vector<std::string>& logicalSub,
                                  std::map<std::string, std::string>& vars) const {
  std::vector<Entry*> entries;
  std::vector<MetricGroupImpl*> children;
  snapshotStructure(entries, children);

  auto timeView = [&entries](const std::string& name) -> const TimeView* {
    for (const Entry* e : entries) {
      if (e->name == name && e->source == Source::kTimeView) return e->time.get();
    }
    return nullptr;
  };

  for (const Entry* e : entries) {
    MetricSample s;
    s.kind = kind_;
    s.scope = scope_;
    s.name = e->name;
    s.type = typeOf(e->source);
    switch (e->source) {
      case Source::kCounter:
        s.count = e->counter->getCount();
        s.value = static_cast<double>(s.count);
        break;
      case Source::kCounterView:
        s.count = e->count();
        s.value = static_cast<double>(s.count);
        break;
      case Source::kGauge: try { s.value = e->gauge();
        } catch (const std::exception& ex) {
          if (!e->failureLogged.exchange(true)) {
            log::warn("gauge {} threw ({}); it is left out of metric reports",
                      getMetricIdentifier(e->name), ex.what());
          }
          continue;
        } catch (...) {
          if (!e->failureLogged.exchange(true)) {
            log::warn("gauge {} threw a non-standard exception; it is left out of metric reports",
                      getMetricIdentifier(e->name));
          }
          continue;
        }
        break;
      case Source::kHistogram:
        s.histogram = e->histogram->getStatistics();
        s.count = e->histogram->getCount();
        s.value = static_cast<double>(s.count);
        break;
      case Source::kMeter:
      case Source::kRateView:
        s.value = e->meter->getRate();
        s.count = e->meter->getCount();
        break;
      case Source::kTimeView: s.value = e->time->value(); break;
      case Source::kRemainderView: {
        // Nothing is known before the first time view has a value: 0, not
        // "all busy".
        double sum = 0;
        bool any = false;
        for (const std::string& n : e->of) {
          if (const TimeView* t = timeView(n); t != nullptr && t->hasValue()) {
            sum += t->value();
            any = true;
          }
        }
        s.value = any ? std::max(0.0, 1000.0 - sum) : 0.0;
        break;
      }
    }
    s.variables = vars;
    s.subScope = sub;
    s.logicalSubScope = logicalSub;
    out.push_back(std::move(s));
  }

  for (const MetricGroupImpl* c : children) {
    sub.push_back(c->component_);
    if (!c->logicalComponent_.empty()) logicalSub.push_back(c->logicalComponent_);
    if (c->variables_.empty()) {
      c->collectInto(out, sub, logicalSub, vars);
    } else {
      std::map<std::string, std::string> childVars = vars;
      for (const auto& [k, v] : c->variables_) childVars[k] = v;
      c->collectInto(out, sub, logicalSub, childVars);
    }
    if (!c->logicalComponent_.empty()) logicalSub.pop_back();
    sub.pop_back();
  }
}

void MetricGroupImpl::updateViews(std::chrono::steady_clock::time_point now) {
  std::vector<Entry*> entries;
  std::vector<MetricGroupImpl*> children;
  snapshotStructure(entries, children);
  for (Entry* e : entries) {
    try {
      if (e->meter) e->meter->update(now);
      if (e->time) e->time->update(now);
    } catch (const std::exception& ex) {
      if (!e->failureLogged.exchange(true)) {
        log::warn("metric {} failed to update: {}", getMetricIdentifier(e->name), ex.what());
      }
    }
  }
  for (MetricGroupImpl* c : children) c->updateViews(now);
}

// ---- MetricRegistry ----

struct MetricRegistry::Impl {
  struct Slot {
    MetricGroupImpl* group;
    int pins = 0;           // snapshots / updates reading the group now
    bool removing = false;  // its destructor waits for pins == 0
  };

  explicit Impl(UpdateThread updates) : wantThread(updates == UpdateThread::kStart) {
    for (size_t i = 0; i < kKinds; ++i) {
      formats[i] = std::string(scopeOption(static_cast<ScopeKind>(i)).defaultValue);
    }
  }

  mutable std::mutex mu;  // everything below except updateMu
  mutable std::condition_variable unpinned;
  std::list<Slot> slots;  // in registration order
  std::unordered_map<MetricGroupImpl*, std::list<Slot>::iterator> index;
  std::string formats[kKinds];

  bool wantThread;
  bool threadStarted = false;
  bool stopping = false;
  std::condition_variable wake;
  std::thread thread;

  std::mutex updateMu;  // one updateViews() at a time: the views' windows are not locked

  // Final values of retired groups, by job id (oldest job first).
  std::mutex retiredMu;
  std::list<std::pair<std::string, std::map<std::string, MetricSample>>> retired;

  // Pins every group that is not being destroyed.
  std::vector<MetricGroupImpl*> pinAll() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<MetricGroupImpl*> out;
    out.reserve(slots.size());
    for (Slot& s : slots) {
      if (s.removing) continue;
      ++s.pins;
      out.push_back(s.group);
    }
    return out;
  }

  void unpin(const std::vector<MetricGroupImpl*>& groups) {
    std::lock_guard<std::mutex> lock(mu);
    bool wakeRemover = false;
    for (MetricGroupImpl* g : groups) {
      auto it = index.find(g);
      if (it == index.end()) continue;
      Slot& s = *it->second;
      if (--s.pins == 0 && s.removing) wakeRemover = true;
    }
    if (wakeRemover) unpinned.notify_all();
  }

  // The groups pinned for one snapshot or update, unpinned on every way out
  // (a gauge may throw what collect() does not catch, e.g. std::bad_alloc).
  struct Pinned {
    explicit Pinned(Impl& i) : impl(i), groups(i.pinAll()) {}
    ~Pinned() { impl.unpin(groups); }
    Pinned(const Pinned&) = delete;
    Pinned& operator=(const Pinned&) = delete;
    Impl& impl;
    std::vector<MetricGroupImpl*> groups;
  };
};

MetricRegistry::MetricRegistry(UpdateThread updates) : impl_(std::make_unique<Impl>(updates)) {}

MetricRegistry::~MetricRegistry() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

MetricRegistry& MetricRegistry::process() {
  // Never destroyed (a union member without a destructor call): see the
  // header. The thread-safe static initialisation constructs it once.
  union Holder {
    Holder() { new (&registry) MetricRegistry(); }
    ~Holder() {}
    MetricRegistry registry;
  };
  static Holder holder;
  return holder.registry;
}

void MetricRegistry::configure(const Configuration& config) {
  std::string formats[kKinds];
  for (size_t i = 0; i < kKinds; ++i) {
    const auto kind = static_cast<ScopeKind>(i);
    formats[i] = config.get(scopeOption(kind));
    if ((formats[i] == "*" || formats[i].rfind("*.", 0) == 0) && !parentOf(kind)) {
      throw SluiceException(fmt::format(
          "{}: the scope format '{}' starts with '*' (the parent's scope), but this scope has "
          "no parent",
          scopeOption(kind).key, formats[i]));
    }
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (size_t i = 0; i < kKinds; ++i) impl_->formats[i] = std::move(formats[i]);
}

std::vector<std::string> MetricRegistry::scopeComponents(
    ScopeKind kind, const std::map<std::string, std::string>& vars) const {
  std::string format;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    format = impl_->formats[indexOf(kind)];
  }
  std::vector<std::string> out;
  std::vector<std::string> parts = splitDots(format);
  size_t first = 0;
  if (!parts.empty() && parts[0] == "*") {
    if (auto parent = parentOf(kind)) out = scopeComponents(*parent, vars);
    first = 1;
  }
  for (size_t i = first; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (p.size() >= 3 && p.front() == '<' && p.back() == '>') {
      if (auto it = vars.find(p); it != vars.end()) {
        out.push_back(it->second.empty() ? "null" : it->second);
        continue;
      }
    }
    out.push_back(p);
  }
  return out;
}

std::string MetricRegistry::formatScope(ScopeKind kind,
                                        const std::map<std::string, std::string>& vars) const {
  return joinScope(scopeComponents(kind, vars));
}

std::shared_ptr<MetricGroupImpl> MetricRegistry::createGroup(
    ScopeKind kind, std::map<std::string, std::string> variables) {
  std::vector<std::string> components = scopeComponents(kind, variables);
  auto group =
      std::make_shared<MetricGroupImpl>(*this, kind, std::move(variables), std::move(components));
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->wantThread && !impl_->threadStarted && !impl_->stopping) {
    impl_->threadStarted = true;
    impl_->thread = std::thread([this] {
      log::setThreadName("metric-views");
      std::unique_lock<std::mutex> threadLock(impl_->mu);
      auto next = Clock::now() + std::chrono::seconds(1);
      while (!impl_->wake.wait_until(threadLock, next, [this] { return impl_->stopping; })) {
        threadLock.unlock();
        updateViews(Clock::now());
        threadLock.lock();
        next += std::chrono::seconds(1);
        if (const auto now = Clock::now(); next < now) next = now + std::chrono::seconds(1);
      }
    });
  }
  return group;
}

bool MetricRegistry::hasUpdateThread() const { return impl_->wantThread; }

void MetricRegistry::registerGroup(MetricGroupImpl* group) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->index.count(group)) return;
  impl_->slots.push_back(Impl::Slot{group});
  impl_->index.emplace(group, std::prev(impl_->slots.end()));
}

void MetricRegistry::unregisterGroup(MetricGroupImpl* group) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  auto it = impl_->index.find(group);
  if (it == impl_->index.end()) return;
  Impl::Slot& slot = *it->second;
  slot.removing = true;
  impl_->unpinned.wait(lock, [&slot] { return slot.pins == 0; });
  impl_->slots.erase(it->second);
  impl_->index.erase(it);
}

void MetricRegistry::retire(std::vector<MetricSample> samples) {
  std::lock_guard<std::mutex> lock(impl_->retiredMu);
  for (MetricSample& sample : samples) {
    auto var = [&](const char* name) {
      auto it = sample.variables.find(name);
      return it == sample.variables.end() ? std::string() : it->second;
    };
    const std::string job = var("<job_id>");
    auto it = std::find_if(impl_->retired.begin(), impl_->retired.end(),
                           [&](const auto& entry) { return entry.first == job; });
    if (it == impl_->retired.end()) {
      impl_->retired.emplace_back(job, std::map<std::string, MetricSample>{});
      it = std::prev(impl_->retired.end());
      while (impl_->retired.size() > kRetainedJobs) impl_->retired.pop_front();
    }
    // A task that ended does nothing per second.
    const std::string_view name = sample.name;
    if (name.size() > 9 && name.substr(name.size() - 9) == "PerSecond") sample.value = 0;
    std::string key = fmt::format("{}|{}|{}|{}|{}", static_cast<int>(sample.kind), var("<task_id>"),
                                  var("<subtask_index>"), var("<operator_name>"), sample.restId());
    it->second.insert_or_assign(std::move(key), std::move(sample));
  }
}

std::vector<MetricSample> MetricRegistry::snapshotWithRetired() const {
  std::vector<MetricSample> out;
  {
    std::lock_guard<std::mutex> lock(impl_->retiredMu);
    for (const auto& [job, samples] : impl_->retired) {
      for (const auto& [key, sample] : samples) out.push_back(sample);
    }
  }
  std::vector<MetricSample> live = snapshot();
  out.insert(out.end(), std::make_move_iterator(live.begin()), std::make_move_iterator(live.end()));
  return out;
}

std::vector<MetricSample> MetricRegistry::snapshot() const {
  Impl::Pinned pinned(*impl_);
  std::vector<MetricSample> out;
  for (const MetricGroupImpl* g : pinned.groups) g->collect(out);
  return out;
}

std::vector<MetricSample> MetricRegistry::snapshot(const std::string& variable,
                                                   const std::string& value) const {
  Impl::Pinned pinned(*impl_);
  std::vector<MetricSample> out;
  std::vector<MetricSample> some;
  for (const MetricGroupImpl* g : pinned.groups) {
    if (auto it = g->variables().find(variable); it != g->variables().end()) {
      if (it->second == value) g->collect(out);
      continue;
    }
    // Key-value sub-groups may carry the variable.
    some.clear();
    g->collect(some);
    for (MetricSample& s : some) {
      if (auto it = s.variables.find(variable); it != s.variables.end() && it->second == value) {
        out.push_back(std::move(s));
      }
    }
  }
  return out;
}

void MetricRegistry::updateViews(std::chrono::steady_clock::time_point now) {
  std::lock_guard<std::mutex> serial(impl_->updateMu);
  Impl::Pinned pinned(*impl_);
  for (MetricGroupImpl* g : pinned.groups) g->updateViews(now);
}

}  // namespace sluice::metrics

namespace sluice {

MetricGroup& unregisteredMetricGroup() {
  // A registry of its own that nothing reads or updates; never destroyed, so
  // the metrics live as long as the process.
  struct Unregistered {
    metrics::MetricRegistry registry{metrics::MetricRegistry::UpdateThread::kNone};
    std::shared_ptr<metrics::MetricGroupImpl> group =
        registry.createGroup(metrics::ScopeKind::kTaskManager, {});
  };
  union Holder {
    Holder() { new (&unregistered) Unregistered(); }
    ~Holder() {}
    Unregistered unregistered;
  };
  static Holder holder;
  return *holder.unregistered.group;
}

}  // namespace sluice
