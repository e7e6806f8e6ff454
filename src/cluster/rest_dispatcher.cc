#include "cluster/rest_dispatcher.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <system_error>

#include <fmt/format.h>

#include <sluice/core/clock.h>
#include <sluice/core/config_options.h>
#include <sluice/graph/job_graph.h>

#include "cluster/rpc_util.h"
#include "core/logging.h"
#include "core/metric_registry.h"
#include "core/random_id.h"
#include "rest/job_info.h"
#include "rest/metric_reporters.h"
#include "rest/web_monitor.h"
#include "runtime/task_metrics.h"

namespace sluice::cluster {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

// How long the metric fetcher waits for a TaskManager's answer.
constexpr int64_t kMetricFetchDeadlineMs = 2000;
// Longest uploaded file name kept (the id adds 33 characters).
constexpr size_t kMaxJarNameLength = 200;

// A name that stays inside the upload directory: no path, no hidden file.
bool isPlainFileName(const std::string& name) {
  if (name.empty() || name.size() > kMaxJarNameLength + 33 || name == "." || name == "..") {
    return false;
  }
  if (name.front() == '.') return false;
  return std::none_of(name.begin(), name.end(), [](char c) {
    return c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
}

// The jar's file name from its id "<hex>_<name>"; empty when `id` is none.
std::string jarName(const std::string& id) {
  const auto underscore = id.find('_');
  if (underscore == std::string::npos || underscore == 0 || underscore + 1 >= id.size()) return "";
  return id.substr(underscore + 1);
}

class ClusterDispatcher final : public rest::Dispatcher {
 public:
  ClusterDispatcher(JobManagerBackend& backend, const Configuration& config)
      : backend_(backend),
        fetchInterval_(config.get(options::kMetricsFetcherUpdateInterval)),
        uploadDir_(config.get(options::kWebUploadDir)) {
    if (uploadDir_.empty()) uploadDir_ = (fs::path(backend.blobDirectory()) / "jars").string();
  }

  std::vector<rest::JobInfo> jobs() override {
    std::vector<rest::JobInfo> out;
    for (const auto& v : backend_.jobViews()) out.push_back(describe(v));
    return out;
  }

  std::optional<rest::JobInfo> job(const std::string& id) override {
    std::optional<JobManagerBackend::JobView> v = backend_.jobView(id);
    if (!v) return std::nullopt;
    return describe(*v);
  }

  rest::ClusterOverview overview() override {
    rest::ClusterOverview o;
    for (const auto& tm : backend_.taskManagerViews()) {
      ++o.taskManagers;
      o.slotsTotal += tm.slots;
      o.slotsAvailable += tm.freeSlots;
    }
    return o;
  }

  std::vector<rest::TaskManagerInfo> taskManagers() override {
    std::vector<rest::TaskManagerInfo> out;
    for (const auto& tm : backend_.taskManagerViews()) {
      rest::TaskManagerInfo i;
      i.id = tm.id;
      i.path = hostPort(tm.host, tm.rpcPort);
      i.dataPort = tm.dataPort;
      i.timeSinceLastHeartbeat = tm.lastHeartbeatEpochMs;
      i.slotsNumber = tm.slots;
      i.freeSlots = tm.freeSlots;
      i.cpuCores = tm.cpuCores;
      i.physicalMemory = tm.physicalMemory;
      i.freeMemory = tm.freeMemory;
      i.managedMemory = tm.managedMemory;
      i.networkMemory = tm.networkMemory;
      out.push_back(std::move(i));
    }
    return out;
  }

  rest::MetricStore metrics() override {
    rest::MetricStore store;
    rest::addSamples(store, metrics::MetricRegistry::process().snapshotWithRetired());
    std::lock_guard lock(fetchMu_);
    refreshTaskManagerMetrics();
    for (const auto& [id, tm] : cache_) rest::addSamples(store, tm.samples, id);
    return store;
  }

  Status cancel(const std::string& jobId) override { return fromGrpc(backend_.cancel(jobId)); }

  Result<std::string> savepoint(const std::string& jobId, const std::string& directory,
                                bool terminate, bool drain) override {
    std::string path;
    grpc::Status st = backend_.savepoint(jobId, directory, terminate, drain, &path);
    if (!st.ok()) return fromGrpc(st);
    return path;
  }

  bool supportsJars() const override { return true; }

  Result<rest::JarInfo> uploadJar(const std::string& fileName, const std::string& bytes) override {
    if (!isPlainFileName(fileName) || fileName.size() > kMaxJarNameLength) {
      return Status::invalidArgument(
          fmt::format("'{}' is not a plain file name (no directories, not hidden, at most {} "
                      "characters): name the uploaded job library by its file name only",
                      fileName, kMaxJarNameLength));
    }
    if (bytes.empty()) return Status::invalidArgument("the uploaded job library is empty");
    std::error_code ec;
    fs::create_directories(uploadDir_, ec);
    if (ec) {
      return Status::ioError(
          fmt::format("cannot create the upload directory '{}' "
                      "(web.upload.dir): {}",
                      uploadDir_, ec.message()));
    }
    rest::JarInfo jar;
    jar.id = randomHexId() + "_" + fileName;
    jar.name = fileName;
    const fs::path target = fs::path(uploadDir_) / jar.id;
    const fs::path temp = fs::path(uploadDir_) / ("." + jar.id + ".part");
    {
      std::ofstream out(temp, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      out.close();
      if (!out) {
        fs::remove(temp, ec);
        return Status::ioError(
            fmt::format("cannot write the uploaded job library to '{}'", temp.string()));
      }
    }
    fs::rename(temp, target, ec);
    if (ec) {
      fs::remove(temp, ec);
      return Status::ioError(
          fmt::format("cannot store the uploaded job library as '{}'", target.string()));
    }
    jar.uploaded = SystemClock::instance().currentTimeMillis();
    log::info("Stored the uploaded job library {} ({} bytes) as {}", fileName, bytes.size(),
              target.string());
    return jar;
  }

  std::vector<rest::JarInfo> jars() override {
    std::vector<rest::JarInfo> out;
    std::error_code ec;
    fs::directory_iterator it(uploadDir_, ec);
    if (ec) return out;
    for (const auto& e : it) {
      const std::string id = e.path().filename().string();
      if (!isPlainFileName(id) || jarName(id).empty() || !e.is_regular_file(ec)) continue;
      rest::JarInfo jar;
      jar.id = id;
      jar.name = jarName(id);
      const auto mtime = fs::last_write_time(e.path(), ec);
      if (!ec) {
        const auto sys = std::chrono::file_clock::to_sys(mtime);
        jar.uploaded =
            std::chrono::duration_cast<std::chrono::milliseconds>(sys.time_since_epoch()).count();
      }
      out.push_back(std::move(jar));
    }
    std::sort(out.begin(), out.end(), [](const rest::JarInfo& a, const rest::JarInfo& b) {
      return a.uploaded != b.uploaded ? a.uploaded > b.uploaded : a.id < b.id;
    });
    return out;
  }

  Status deleteJar(const std::string& id) override {
    Result<std::string> path = jarPath(id);
    if (!path.isOk()) return path.status();
    std::error_code ec;
    fs::remove(path.value(), ec);
    if (ec) return Status::ioError(fmt::format("cannot delete jar {}: {}", id, ec.message()));
    log::info("Deleted the uploaded job library {}", id);
    return Status::ok();
  }

  Result<std::string> runJar(const std::string& id, const rest::JarRunRequest& request) override {
    Result<std::string> path = jarPath(id);
    if (!path.isOk()) return path.status();
    if (request.parallelism == 0 || request.parallelism < -1) {
      return Status::invalidArgument(
          fmt::format("parallelism must be positive, got {}", request.parallelism));
    }
    std::ifstream in(path.value(), std::ios::binary);
    if (!in) return Status::ioError(fmt::format("cannot read jar {}", id));
    std::ostringstream bytes;
    bytes << in.rdbuf();
    JobManagerBackend::Submission s;
    s.library = bytes.str();
    s.libraryName = jarName(id);
    s.args = request.programArgs;
    // As Flink's jar run: the cluster's configuration, then the request's
    // settings. submit() leaves out rest.authentication.token.
    s.config = backend_.configuration();
    if (request.parallelism > 0) {
      s.config.setString(std::string(options::kParallelismDefault.key),
                         std::to_string(request.parallelism), "the jar run request");
    }
    if (!request.savepointPath.empty()) {
      s.config.setString(std::string(options::kExecutionSavepointPath.key), request.savepointPath,
                         "the jar run request");
    }
    if (request.allowNonRestoredState) {
      s.config.setString(std::string(options::kExecutionSavepointIgnoreUnclaimedState.key), "true",
                         "the jar run request");
    }
    std::string jobId, jobName;
    grpc::Status st = backend_.submit(s, &jobId, &jobName);
    if (!st.ok()) return fromGrpc(st);
    return jobId;
  }

 private:
  struct TaskManagerMetrics {
    std::string endpoint;
    std::unique_ptr<rpc::TaskExecutorService::Stub> stub;
    std::vector<metrics::MetricSample> samples;  // the latest answer
  };

  // The stored jar `id`'s path, or kNotFound.
  Result<std::string> jarPath(const std::string& id) const {
    const Status missing = Status::notFound(
        fmt::format("Jar file {} does not exist (GET /jars lists the uploaded ones)", id));
    if (!isPlainFileName(id) || jarName(id).empty()) return missing;
    const fs::path p = fs::path(uploadDir_) / id;
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) return missing;
    return p.string();
  }

  // Flink's MetricFetcher: every live TaskManager's metrics, fetched
  // together when the last fetch is older than the update interval. A
  // TaskManager that does not answer keeps its previous values. Caller
  // holds fetchMu_.
  void refreshTaskManagerMetrics() {
    const auto now = SteadyClock::now();
    if (fetched_ && now - lastFetch_ < fetchInterval_) return;
    const auto live = backend_.taskManagerViews();
    std::map<std::string, TaskManagerMetrics> next;
    for (const auto& tm : live) {
      TaskManagerMetrics m;
      auto old = cache_.find(tm.id);
      const std::string endpoint = hostPort(tm.host, tm.rpcPort);
      if (old != cache_.end() && old->second.endpoint == endpoint) {
        m = std::move(old->second);
      } else {
        m.endpoint = endpoint;
        m.stub = rpc::TaskExecutorService::NewStub(makeChannel(endpoint));
      }
      next.emplace(tm.id, std::move(m));
    }
    cache_ = std::move(next);

    struct Call {
      std::string id;
      grpc::ClientContext ctx;
      rpc::MetricDump dump;
      grpc::Status status;
      std::unique_ptr<grpc::ClientAsyncResponseReader<rpc::MetricDump>> reader;
    };
    grpc::CompletionQueue cq;
    std::vector<std::unique_ptr<Call>> calls;
    const rpc::Empty empty;
    for (auto& [id, tm] : cache_) {
      auto call = std::make_unique<Call>();
      call->id = id;
      setDeadline(call->ctx, kMetricFetchDeadlineMs);
      call->reader = tm.stub->PrepareAsyncGetMetrics(&call->ctx, empty, &cq);
      call->reader->StartCall();
      call->reader->Finish(&call->dump, &call->status, call.get());
      calls.push_back(std::move(call));
    }
    for (size_t done = 0; done < calls.size(); ++done) {
      void* tag = nullptr;
      bool ok = false;
      if (!cq.Next(&tag, &ok)) break;
      auto* call = static_cast<Call*>(tag);
      auto it = cache_.find(call->id);
      if (it == cache_.end()) continue;
      if (ok && call->status.ok()) {
        it->second.samples = fromProto(call->dump);
      } else {
        log::debug(
            "TaskManager {} at {} did not send its metrics ({}); keeping its previous "
            "values",
            call->id, it->second.endpoint, call->status.error_message());
      }
    }
    cq.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq.Next(&tag, &ok)) {
    }
    lastFetch_ = SteadyClock::now();
    fetched_ = true;
  }

  // A job as the REST API shows it: a started one from its run, one still
  // starting or one that could not start from the JobManager's entry.
  rest::JobInfo describe(const JobManagerBackend::JobView& v) {
    const int64_t now = SystemClock::instance().currentTimeMillis();
    if (v.run) {
      rest::JobInfo info = rest::describeJob(*v.run);
      info.id = v.id;
      info.name = v.name;
      info.startTime = v.startTimeMs;
      info.timestamps["INITIALIZING"] = v.startTimeMs;
      info.timestamps["CREATED"] = v.startTimeMs;
      info.timestamps["RUNNING"] = v.run->startTimeMs();
      info.durationMs = (info.endTime > 0 ? info.endTime : now) - info.startTime;
      return info;
    }
    rest::JobInfo info;
    info.id = v.id;
    info.name = v.name;
    info.startTime = v.startTimeMs;
    info.timestamps["INITIALIZING"] = v.startTimeMs;
    const bool failed = !v.startError.empty();
    if (failed) {
      info.state = "FAILED";
      info.endTime = v.endTimeMs > 0 ? v.endTimeMs : now;
      info.timestamps["FAILED"] = info.endTime;
      rest::ExceptionInfo e;
      e.exceptionName = "sluice::SluiceException";
      e.stacktrace = v.startError;
      e.timestamp = info.endTime;
      info.exceptions.push_back(std::move(e));
    } else {
      info.state = v.waitingForSlots ? "CREATED" : "INITIALIZING";
      if (v.waitingForSlots) info.timestamps["CREATED"] = v.startTimeMs;
    }
    info.durationMs = (failed ? info.endTime : now) - info.startTime;
    if (!v.graph) return info;
    try {
      const JobGraph jg = createJobGraph(*v.graph);
      std::vector<std::string> ids;
      for (const auto& vertex : jg.vertices) ids.push_back(runtime::jobVertexHexId(jg, vertex.id));
      for (const auto& vertex : jg.vertices) {
        rest::VertexInfo vi;
        vi.id = ids[static_cast<size_t>(vertex.id)];
        vi.index = vertex.id;
        vi.name = vertex.name;
        vi.parallelism = vertex.parallelism;
        vi.maxParallelism = vertex.maxParallelism;
        info.maxParallelism = std::max(info.maxParallelism, vertex.maxParallelism);
        vi.status = failed ? "CANCELED" : "CREATED";
        for (int n : vertex.chain) vi.operatorNames.push_back(v.graph->node(n).name);
        for (int je : vertex.inputs) {
          const JobEdge& e = jg.edges.at(static_cast<size_t>(je));
          vi.inputs.push_back(
              {ids.at(static_cast<size_t>(e.source)), rest::shipStrategy(e.partition)});
        }
        for (int s = 0; s < vertex.parallelism; ++s) {
          rest::SubtaskInfo st;
          st.subtask = s;
          st.status = vi.status;
          vi.subtasks.push_back(std::move(st));
        }
        info.vertices.push_back(std::move(vi));
      }
    } catch (const std::exception& e) {
      log::debug("Job {}: no job graph to show: {}", v.id, e.what());
    }
    return info;
  }

  JobManagerBackend& backend_;
  const std::chrono::milliseconds fetchInterval_;
  std::string uploadDir_;
  std::mutex fetchMu_;                               // one fetch at a time; guards what follows
  std::map<std::string, TaskManagerMetrics> cache_;  // by TaskManager id
  SteadyClock::time_point lastFetch_;
  bool fetched_ = false;
};

}  // namespace

Status fromGrpc(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK: return Status::ok();
    case grpc::StatusCode::NOT_FOUND: return Status::notFound(status.error_message());
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return Status::invalidArgument(status.error_message());
    default: return Status::internal(status.error_message());
  }
}

struct ClusterRest::Impl {
  std::unique_ptr<ClusterDispatcher> dispatcher;
  std::unique_ptr<rest::MetricReporters> reporters;
  std::shared_ptr<metrics::MetricGroupImpl> jobManagerMetrics;
  std::unique_ptr<rest::WebMonitor> monitor;
};

ClusterRest::ClusterRest(JobManagerBackend& backend, const Configuration& config)
    : impl_(std::make_unique<Impl>()) {
  metrics::MetricRegistry& registry = metrics::MetricRegistry::process();
  registry.configure(config);
  // Flink's JobManager metrics (the jobmanager scope).
  impl_->jobManagerMetrics = registry.createGroup(
      metrics::ScopeKind::kJobManager, {{"<host>", config.get(options::kJobManagerRpcAddress)}});
  metrics::MetricGroupImpl& g = *impl_->jobManagerMetrics;
  JobManagerBackend* b = &backend;
  g.gauge("numRegisteredTaskManagers",
          [b] { return static_cast<double>(b->taskManagerViews().size()); });
  g.gauge("numRunningJobs", [b] { return static_cast<double>(b->runningJobs()); });
  g.gauge("taskSlotsAvailable", [b] {
    int n = 0;
    for (const auto& tm : b->taskManagerViews()) n += tm.freeSlots;
    return static_cast<double>(n);
  });
  g.gauge("taskSlotsTotal", [b] {
    int n = 0;
    for (const auto& tm : b->taskManagerViews()) n += tm.slots;
    return static_cast<double>(n);
  });

  Result<std::unique_ptr<rest::MetricReporters>> reporters =
      rest::MetricReporters::start(config, registry);
  if (!reporters.isOk()) {
    throw SluiceException(fmt::format("the JobManager cannot start its metric reporters: {}",
                                      reporters.status().message()));
  }
  // The Prometheus reporter logs the port it bound.
  impl_->reporters = std::move(reporters).value();

  impl_->dispatcher = std::make_unique<ClusterDispatcher>(backend, config);
  rest::WebMonitorOptions o = rest::WebMonitorOptions::fromConfig(config);
  o.mode = "cluster";
  auto monitor = std::make_unique<rest::WebMonitor>(*impl_->dispatcher, o);
  if (Status st = monitor->start(); !st.isOk()) {
    throw SluiceException(
        fmt::format("the JobManager cannot serve its REST API and web UI: {}", st.message()));
  }
  impl_->monitor = std::move(monitor);
  log::info("REST API and web UI at {}", impl_->monitor->address());
}

ClusterRest::~ClusterRest() {
  // Requests in flight call the dispatcher and the backend: they end first.
  if (impl_->monitor) impl_->monitor->stop();
  impl_->monitor.reset();
  if (impl_->reporters) impl_->reporters->stop();
  impl_->reporters.reset();
  impl_->jobManagerMetrics.reset();
}

std::string ClusterRest::address() const {
  return impl_->monitor ? impl_->monitor->address() : std::string();
}

int ClusterRest::prometheusPort() const {
  return impl_->reporters ? impl_->reporters->prometheusPort() : -1;
}

}  // namespace sluice::cluster
