#include "cluster/task_manager.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include <sluice/core/config_options.h>

#include "checkpoint/checkpoint_metadata.h"
#include "checkpoint/state_assignment.h"
#include "checkpoint/task_state_codec.h"
#include "cluster/job_library.h"
#include "cluster/network/data_plane.h"
#include "cluster/plan_mode.h"
#include "cluster/rpc_util.h"
#include "core/logging.h"
#include "core/metric_registry.h"
#include "core/random_id.h"
#include "core/serial_executor.h"
#include "rest/metric_reporters.h"
#include "runtime/process_metrics.h"
#include "runtime/task_group.h"

namespace sluice::cluster {
namespace {

using SteadyClock = std::chrono::steady_clock;

// A job as this TaskManager knows it: its graph, rebuilt in plan mode once
// per job, shared by its attempts.
struct JobPlan {
  CapturedPlan plan;
  JobGraph jobGraph;
};

checkpoint::CheckpointOptions checkpointOptionsFromProto(const rpc::CheckpointOptionsMsg& m) {
  checkpoint::CheckpointOptions o;
  o.type = m.type() == static_cast<int32_t>(CheckpointType::kSavepoint)
               ? CheckpointType::kSavepoint
               : CheckpointType::kCheckpoint;
  o.terminate = m.terminate();
  o.drain = m.drain();
  o.targetDirectory = m.target_location();
  return o;
}

grpc::Status unknownTask(const rpc::TaskRef& t) {
  return grpc::Status(grpc::StatusCode::NOT_FOUND,
                      fmt::format("no subtask {} of vertex {} of job {} attempt {} runs here",
                                  t.subtask(), t.vertex(), t.job_id(), t.attempt()));
}

}  // namespace

// One job attempt's subtasks on this TaskManager.
class AttemptRun final : public runtime::TaskListener,
                         public checkpoint::CheckpointCoordinatorGateway,
                         public runtime::RemoteChannels {
 public:
  AttemptRun(TaskManager::Impl& tm, std::shared_ptr<JobPlan> plan, const rpc::DeployRequest& req);
  ~AttemptRun() override;

  void start();
  runtime::Task* task(int vertex, int subtask) {
    if (vertex < 0 || vertex >= static_cast<int>(plan_->jobGraph.vertices.size())) return nullptr;
    if (subtask < 0 || subtask >= plan_->jobGraph.vertices[vertex].parallelism) return nullptr;
    return group_->task(vertex, subtask);
  }
  void cancelAll() { group_->cancelAll(); }
  // A data connection of this attempt broke, or the TaskManager stops: its
  // tasks end failed with `error`.
  void fail(const std::string& error);
  size_t size() const { return group_->tasks().size(); }
  void join() { group_->join(); }
  const std::string& jobId() const { return jobId_; }
  int attempt() const { return attempt_; }

  // TaskListener
  void taskFinished(int vertex, int subtask) override;
  // CheckpointCoordinatorGateway
  void acknowledgeCheckpoint(int64_t id, checkpoint::TaskId task,
                             checkpoint::TaskStateSnapshot snapshot) override;
  void declineCheckpoint(int64_t id, checkpoint::TaskId task, const std::string& reason,
                         bool countsAsFailure) override;
  // RemoteChannels
  runtime::BufferSink* producerChannel(int jobEdge, int producerSubtask, int subpartition) override;
  void consumeRemote(int vertex, int subtask, std::vector<Input> inputs,
                     runtime::InputGate& gate) override;

 private:
  class SourceLink;
  rpc::TaskRef ref(int vertex, int subtask) const {
    rpc::TaskRef r;
    r.set_job_id(jobId_);
    r.set_attempt(attempt_);
    r.set_vertex(vertex);
    r.set_subtask(subtask);
    return r;
  }

  TaskManager::Impl& tm_;
  const std::shared_ptr<JobPlan> plan_;
  const std::string jobId_;
  const int attempt_;
  std::map<std::pair<int, int>, rpc::TaskLocation> locations_;
  checkpoint::StateAssignment restores_;
  std::unique_ptr<SerialExecutor> checkpointIo_;
  std::vector<std::unique_ptr<SourceLink>> sourceLinks_;
  std::unique_ptr<runtime::TaskGroup> group_;
  std::atomic<int> remaining_{0};
  std::mutex mu_;
  std::string failure_;  // a data-plane failure, reported as the tasks' cause
};

class TaskManager::Impl final : public rpc::TaskExecutorService::Service {
 public:
  explicit Impl(Configuration config);
  ~Impl() override;

  // Calls to the JobManager, in order, off the caller's thread.
  void toJobManager(
      std::function<grpc::Status(rpc::JobManagerService::Stub&, grpc::ClientContext&)> call,
      std::string what);
  void attemptEnded(AttemptRun* run);
  DataPlane& dataPlane() { return *dataPlane_; }
  const Configuration& config() const { return config_; }
  const std::string& id() const { return id_; }
  const std::string& host() const { return host_; }

  grpc::Status Deploy(grpc::ServerContext*, const rpc::DeployRequest* req, rpc::Empty*) override;
  grpc::Status CancelAttempt(grpc::ServerContext*, const rpc::AttemptRequest* req,
                             rpc::Empty*) override;
  grpc::Status CancelTask(grpc::ServerContext*, const rpc::TaskControlRequest* req,
                          rpc::Empty*) override;
  grpc::Status TriggerCheckpoint(grpc::ServerContext*, const rpc::TriggerCheckpointRequest* req,
                                 rpc::Empty*) override;
  grpc::Status NotifyCheckpoint(grpc::ServerContext*, const rpc::NotifyCheckpointRequest* req,
                                rpc::Empty*) override;
  grpc::Status AssignSplit(grpc::ServerContext*, const rpc::SplitRequest* req,
                           rpc::Empty*) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const rpc::Empty*, rpc::Empty*) override {
    return grpc::Status::OK;
  }
  grpc::Status GetMetrics(grpc::ServerContext*, const rpc::Empty*, rpc::MetricDump* resp) override {
    // Ended tasks' final values too: the REST API shows them.
    toProto(metrics::MetricRegistry::process().snapshotWithRetired(), resp);
    return grpc::Status::OK;
  }

  int rpcPort_ = 0;
  int dataPort_ = 0;
  void wait();
  void shutdown();

 private:
  std::shared_ptr<AttemptRun> findAttempt(const std::string& jobId, int attempt);
  runtime::Task* findTask(const rpc::TaskRef& ref, std::shared_ptr<AttemptRun>& holder);
  std::shared_ptr<JobPlan> planFor(const rpc::DeployRequest& req);
  void heartbeatLoop();
  bool registerOnce();
  void cancelEverything(const std::string& why);

  const Configuration config_;
  const std::string id_;
  std::string host_;
  BlobStore blobs_;
  // Status.* metrics of this process, and its reporters (Prometheus, log).
  std::shared_ptr<metrics::MetricGroupImpl> processMetrics_;
  std::unique_ptr<rest::MetricReporters> reporters_;
  std::unique_ptr<DataPlane> dataPlane_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<rpc::JobManagerService::Stub> jm_;
  std::string jmAddress_;
  std::unique_ptr<SerialExecutor> out_;
  std::unique_ptr<SerialExecutor> reaper_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::map<std::pair<std::string, int>, std::shared_ptr<AttemptRun>> attempts_;
  std::map<std::string, std::shared_ptr<JobPlan>> plans_;
  std::thread heartbeat_;
};

// ---- AttemptRun ---------------------------------------------------------------------

class AttemptRun::SourceLink final : public runtime::SourceCoordinatorLink {
 public:
  SourceLink(AttemptRun& run, int vertex) : run_(run), vertex_(vertex) {}
  void addReader(int subtask) override { send(subtask, rpc::SourceEventRequest::ADD_READER); }
  void requestSplit(int subtask) override { send(subtask, rpc::SourceEventRequest::REQUEST_SPLIT); }

 private:
  void send(int subtask, rpc::SourceEventRequest::Kind kind) {
    rpc::SourceEventRequest req;
    *req.mutable_task() = run_.ref(vertex_, subtask);
    req.set_kind(kind);
    run_.tm_.toJobManager(
        [req](auto& stub, auto& ctx) {
          rpc::Empty e;
          return stub.SourceEvent(&ctx, req, &e);
        },
        "send a source event");
  }
  AttemptRun& run_;
  const int vertex_;
};

AttemptRun::AttemptRun(TaskManager::Impl& tm, std::shared_ptr<JobPlan> plan,
                       const rpc::DeployRequest& req)
    : tm_(tm), plan_(std::move(plan)), jobId_(req.job_id()), attempt_(req.attempt()) {
  const StreamGraph& sg = *plan_->plan.graph;
  const JobGraph& jg = plan_->jobGraph;
  for (const auto& loc : req.locations()) locations_[{loc.vertex(), loc.subtask()}] = loc;
  for (const auto& v : jg.vertices) {
    for (int s = 0; s < v.parallelism; ++s) {
      if (locations_.count({v.id, s}) == 0) {
        throw SluiceException(fmt::format(
            "the deployment of job {} names no TaskManager for subtask {} of '{}': the "
            "JobManager and this TaskManager rebuilt different graphs from the job (is its "
            "main deterministic?)",
            jobId_, s, v.name));
      }
    }
  }
  if (!req.restore_checkpoint().empty()) {
    Result<checkpoint::CompletedCheckpoint> cp =
        checkpoint::loadCheckpoint(req.restore_checkpoint());
    if (!cp.isOk()) throw SluiceException(cp.status().message());
    Result<checkpoint::StateAssignment> assigned = checkpoint::assignStates(
        cp.value(), sg, jg, checkpoint::operatorUids(sg),
        plan_->plan.configuration.get(options::kExecutionSavepointIgnoreUnclaimedState));
    if (!assigned.isOk()) throw SluiceException(assigned.status().message());
    restores_ = std::move(assigned).value();
  }
  runtime::MiniClusterOptions o;
  const Configuration& tmc = tm_.config();
  o.segmentSize = tmc.get(options::kTaskManagerMemorySegmentSize).bytes;
  o.buffersPerChannel = tmc.get(options::kTaskManagerNetworkMemoryBuffersPerChannel);
  o.floatingBuffers = tmc.get(options::kTaskManagerNetworkMemoryFloatingBuffersPerGate);
  o.configuration = plan_->plan.configuration;
  o.metricVariables = {{"<host>", tm_.host()},
                       {"<tm_id>", tm_.id()},
                       {"<job_id>", jobId_},
                       {"<job_name>", jg.jobName}};
  checkpointIo_ = std::make_unique<SerialExecutor>("checkpoint-io");
  runtime::TaskGroupSpec spec;
  spec.attempt = attempt_;
  spec.restores = &restores_;
  spec.checkpointGateway = req.checkpointing() ? this : nullptr;
  spec.mode = req.checkpointing_mode() == "AT_LEAST_ONCE" ? CheckpointingMode::kAtLeastOnce
                                                          : CheckpointingMode::kExactlyOnce;
  spec.incrementalSharedDirectory = req.incremental_shared_directory();
  spec.listener = this;
  const std::string me = tm_.id();
  spec.isLocal = [this, me](int v, int s) { return locations_.at({v, s}).resource_id() == me; };
  spec.remote = this;
  spec.numberOfSlots = tmc.get(options::kTaskManagerNumberOfTaskSlots);
  group_ = std::make_unique<runtime::TaskGroup>(sg, jg, o, *checkpointIo_, std::move(spec));
  for (const auto& v : jg.vertices) {
    if (!sg.node(v.head()).factory->isSource()) continue;
    sourceLinks_.push_back(std::make_unique<SourceLink>(*this, v.id));
    for (int s = 0; s < v.parallelism; ++s) {
      if (runtime::Task* t = group_->task(v.id, s))
        t->setSourceCoordinator(sourceLinks_.back().get());
    }
  }
  remaining_.store(static_cast<int>(group_->tasks().size()));
}

AttemptRun::~AttemptRun() {
  group_->cancelAll();
  group_->join();
  tm_.dataPlane().releaseAttempt(jobId_, attempt_);
}

void AttemptRun::start() {
  group_->start([this](runtime::Task& task, runtime::TaskResult& result) {
    {
      std::lock_guard lock(mu_);
      if (!failure_.empty() && !result.failed) {
        result.failed = true;
        result.error = failure_;
      }
    }
    rpc::TaskStateUpdate u;
    *u.mutable_task() = ref(task.vertexId(), task.subtask());
    u.set_kind(rpc::TaskStateUpdate::ENDED);
    u.set_failed(result.failed);
    u.set_cancelled(result.cancelled);
    u.set_error(result.error);
    u.set_records_dropped(result.numRecordsDropped);
    for (auto& [k, v] : result.counters) {
      rpc::KeyValue* kv = u.add_counters();
      kv->set_key(k);
      kv->set_value(std::to_string(v));
    }
    if (result.failed) log::error("{}", result.error);
    tm_.toJobManager(
        [u](auto& stub, auto& ctx) {
          rpc::Empty e;
          return stub.UpdateTaskState(&ctx, u, &e);
        },
        "report a task's end");
    if (remaining_.fetch_sub(1) == 1) tm_.attemptEnded(this);
  });
}

void AttemptRun::fail(const std::string& error) {
  {
    std::lock_guard lock(mu_);
    if (!failure_.empty()) return;
    failure_ = error;
  }
  log::error("Job {} attempt {}: {}", jobId_, attempt_, error);
  group_->cancelAll();
}

void AttemptRun::taskFinished(int vertex, int subtask) {
  rpc::TaskStateUpdate u;
  *u.mutable_task() = ref(vertex, subtask);
  u.set_kind(rpc::TaskStateUpdate::FINISHED_INPUT);
  tm_.toJobManager(
      [u](auto& stub, auto& ctx) {
        rpc::Empty e;
        return stub.UpdateTaskState(&ctx, u, &e);
      },
      "report a finished task");
}

void AttemptRun::acknowledgeCheckpoint(int64_t id, checkpoint::TaskId task,
                                       checkpoint::TaskStateSnapshot snapshot) {
  rpc::AcknowledgeCheckpointRequest req;
  *req.mutable_task() = ref(task.vertex, task.subtask);
  req.set_checkpoint_id(id);
  req.set_snapshot(checkpoint::encodeTaskStateSnapshot(snapshot));
  tm_.toJobManager(
      [req](auto& stub, auto& ctx) {
        rpc::Empty e;
        return stub.AcknowledgeCheckpoint(&ctx, req, &e);
      },
      "acknowledge a checkpoint");
}

void AttemptRun::declineCheckpoint(int64_t id, checkpoint::TaskId task, const std::string& reason,
                                   bool countsAsFailure) {
  rpc::DeclineCheckpointRequest req;
  *req.mutable_task() = ref(task.vertex, task.subtask);
  req.set_checkpoint_id(id);
  req.set_reason(reason);
  req.set_counts_as_failure(countsAsFailure);
  tm_.toJobManager(
      [req](auto& stub, auto& ctx) {
        rpc::Empty e;
        return stub.DeclineCheckpoint(&ctx, req, &e);
      },
      "decline a checkpoint");
}

runtime::BufferSink* AttemptRun::producerChannel(int jobEdge, int producerSubtask,
                                                 int subpartition) {
  return tm_.dataPlane().producerChannel(
      ChannelKey{jobId_, attempt_, jobEdge, producerSubtask, subpartition});
}

void AttemptRun::consumeRemote(int, int, std::vector<Input> inputs, runtime::InputGate& gate) {
  std::vector<DataPlane::RemoteInput> remote;
  for (const Input& in : inputs) {
    const int producerVertex = plan_->jobGraph.edges.at(static_cast<size_t>(in.jobEdge)).source;
    const rpc::TaskLocation& loc = locations_.at({producerVertex, in.producerSubtask});
    DataPlane::RemoteInput r;
    r.key = ChannelKey{jobId_, attempt_, in.jobEdge, in.producerSubtask, in.subpartition};
    r.host = loc.host();
    r.port = loc.data_port();
    r.gateChannel = in.gateChannel;
    remote.push_back(std::move(r));
  }
  tm_.dataPlane().consumeRemote(std::move(remote), gate);
}

// ---- TaskManager::Impl ----------------------------------------------------------------

TaskManager::Impl::Impl(Configuration config)
    : config_(std::move(config)),
      id_(fmt::format("tm-{}", randomHexId().substr(0, 12))),
      blobs_(config_.get(options::kBlobStorageDirectory)) {
  host_ = config_.get(options::kTaskManagerHost);
  metrics::MetricRegistry::process().configure(config_);
  processMetrics_ = runtime::registerProcessMetrics({{"<host>", host_}, {"<tm_id>", id_}}, config_);
  Result<std::unique_ptr<rest::MetricReporters>> reporters =
      rest::MetricReporters::start(config_, metrics::MetricRegistry::process());
  if (!reporters.isOk()) {
    throw SluiceException(fmt::format("TaskManager {}: {}", id_, reporters.status().message()));
  }
  // The Prometheus reporter logs the port it bound.
  reporters_ = std::move(reporters).value();
  const std::string bind = config_.get(options::kTaskManagerBindHost);
  DataPlaneOptions d;
  d.bindHost = bind;
  d.port = config_.get(options::kTaskManagerDataPort);
  d.segmentSize = config_.get(options::kTaskManagerMemorySegmentSize).bytes;
  d.buffersPerChannel = config_.get(options::kTaskManagerNetworkMemoryBuffersPerChannel);
  d.floatingBuffersPerGate = config_.get(options::kTaskManagerNetworkMemoryFloatingBuffersPerGate);
  d.maxNetworkMemory = config_.get(options::kTaskManagerMemoryNetworkMax).bytes;
  dataPlane_ = std::make_unique<DataPlane>(d);
  dataPort_ = dataPlane_->port();
  dataPlane_->setFailureListener(
      [this](const std::string& job, int attempt, const std::string& error) {
        if (auto run = findAttempt(job, attempt)) run->fail(error);
      });
  const std::string address = hostPort(bind, config_.get(options::kTaskManagerRpcPort));
  server_ = startServer(address, *this, &rpcPort_, "TaskManager",
                        "taskmanager.bind-host, taskmanager.rpc.port");
  jmAddress_ = hostPort(config_.get(options::kJobManagerRpcAddress),
                        config_.get(options::kJobManagerRpcPort));
  jm_ = rpc::JobManagerService::NewStub(makeChannel(jmAddress_));
  out_ = std::make_unique<SerialExecutor>("rpc-jm");
  reaper_ = std::make_unique<SerialExecutor>("attempt-reaper");
  log::info("TaskManager {} listening on {} (rpc) and {} (data), {} slots; JobManager at {}", id_,
            hostPort(bind, rpcPort_), hostPort(bind, dataPort_),
            config_.get(options::kTaskManagerNumberOfTaskSlots), jmAddress_);
  heartbeat_ = std::thread([this] { heartbeatLoop(); });
}

TaskManager::Impl::~Impl() {
  shutdown();
  if (heartbeat_.joinable()) heartbeat_.join();
  cancelEverything("the TaskManager shuts down");
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  reaper_.reset();
  {
    std::lock_guard lock(mu_);
    attempts_.clear();
  }
  out_.reset();
  if (reporters_) reporters_->stop();
}

void TaskManager::Impl::wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return stop_; });
}

void TaskManager::Impl::shutdown() {
  std::lock_guard lock(mu_);
  stop_ = true;
  cv_.notify_all();
}

void TaskManager::Impl::cancelEverything(const std::string& why) {
  std::vector<std::shared_ptr<AttemptRun>> runs;
  {
    std::lock_guard lock(mu_);
    for (auto& [k, r] : attempts_) runs.push_back(r);
  }
  if (!runs.empty()) log::warn("Cancelling {} job attempts: {}", runs.size(), why);
  // Not a cancel the JobManager asked for: the tasks end failed, with the
  // cause, so that their job fails over instead of looking finished.
  for (auto& r : runs) r->fail(fmt::format("TaskManager {}: {}", id_, why));
}

void TaskManager::Impl::toJobManager(
    std::function<grpc::Status(rpc::JobManagerService::Stub&, grpc::ClientContext&)> call,
    std::string what) {
  out_->submit([this, call = std::move(call), what = std::move(what)] {
    grpc::ClientContext ctx;
    setDeadline(ctx, 30000);
    grpc::Status st = call(*jm_, ctx);
    if (!st.ok()) {
      log::warn("could not {}: {}", what, describeRpcError(st, "the JobManager at " + jmAddress_));
    }
  });
}

bool TaskManager::Impl::registerOnce() {
  rpc::RegisterTaskManagerRequest req;
  req.set_resource_id(id_);
  req.set_host(host_);
  req.set_rpc_port(rpcPort_);
  req.set_data_port(dataPort_);
  req.set_number_of_slots(config_.get(options::kTaskManagerNumberOfTaskSlots));
  req.set_fingerprint(buildFingerprint());
  const runtime::HardwareInfo hw = runtime::hardwareInfo();
  req.set_cpu_cores(hw.cpuCores);
  req.set_physical_memory(hw.physicalMemory);
  req.set_free_memory(hw.freeMemory);
  req.set_managed_memory(
      static_cast<int64_t>(config_.get(options::kTaskManagerMemoryManagedSize).bytes));
  req.set_network_memory(
      static_cast<int64_t>(config_.get(options::kTaskManagerMemoryNetworkMax).bytes));
  grpc::ClientContext ctx;
  setDeadline(ctx, 5000);
  rpc::RegisterTaskManagerResponse resp;
  grpc::Status st = jm_->RegisterTaskManager(&ctx, req, &resp);
  if (!st.ok()) {
    log::warn("TaskManager {} could not register: {}", id_,
              describeRpcError(st, "the JobManager at " + jmAddress_));
    return false;
  }
  log::info("TaskManager {} registered at the JobManager at {}", id_, jmAddress_);
  return true;
}

void TaskManager::Impl::heartbeatLoop() {
  const auto interval = config_.get(options::kHeartbeatInterval);
  const auto timeout = config_.get(options::kHeartbeatTimeout);
  const auto period = std::max(std::chrono::milliseconds(10), std::min(interval, timeout / 4));
  bool registered = false;
  auto lastContact = SteadyClock::now();
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    if (!registered) {
      registered = registerOnce();
      if (registered) lastContact = SteadyClock::now();
    } else {
      rpc::HeartbeatRequest req;
      req.set_resource_id(id_);
      grpc::ClientContext ctx;
      setDeadline(ctx, std::max<int64_t>(100, period.count()));
      rpc::HeartbeatResponse resp;
      grpc::Status st = jm_->Heartbeat(&ctx, req, &resp);
      if (st.ok()) {
        lastContact = SteadyClock::now();
        if (!resp.known()) {
          // The JobManager declared us lost (or restarted): our tasks are
          // no longer its; register again with fresh slots.
          cancelEverything("the JobManager no longer knows this TaskManager");
          registered = false;
        }
      } else if (SteadyClock::now() - lastContact > timeout) {
        log::error("TaskManager {} lost the JobManager at {}: no heartbeat answer for {} ms", id_,
                   jmAddress_, timeout.count());
        cancelEverything("the JobManager was lost");
        registered = false;
      }
    }
    lock.lock();
    cv_.wait_for(lock, registered ? period : std::chrono::milliseconds(500), [&] { return stop_; });
  }
}

std::shared_ptr<JobPlan> TaskManager::Impl::planFor(const rpc::DeployRequest& req) {
  {
    std::lock_guard lock(mu_);
    auto it = plans_.find(req.job_id());
    if (it != plans_.end()) return it->second;
  }
  if (!blobs_.has(req.blob_key())) {
    rpc::BlobRequest br;
    br.set_blob_key(req.blob_key());
    rpc::BlobResponse resp;
    grpc::ClientContext ctx;
    setDeadline(ctx, 120000);
    grpc::Status st = jm_->GetBlob(&ctx, br, &resp);
    if (!st.ok()) {
      throw SluiceException(describeRpcError(st, "the JobManager's blob store at " + jmAddress_));
    }
    if (BlobStore::keyOf(resp.data()) != req.blob_key()) {
      throw SluiceException(
          fmt::format("the job library fetched for blob {} is damaged (its "
                      "contents do not match its key)",
                      req.blob_key()));
    }
    blobs_.put(resp.data());
  }
  std::shared_ptr<JobLibrary> lib = JobLibrary::load(blobs_.path(req.blob_key()));
  auto plan = std::make_shared<JobPlan>();
  std::vector<std::string> args(req.args().begin(), req.args().end());
  plan->plan = capturePlan(lib->main(), req.library_name(), args,
                           cluster::fromProto(req.config(), "the submission"));
  plan->jobGraph = createJobGraph(*plan->plan.graph);
  std::lock_guard lock(mu_);
  plans_[req.job_id()] = plan;
  return plan;
}

grpc::Status TaskManager::Impl::Deploy(grpc::ServerContext*, const rpc::DeployRequest* req,
                                       rpc::Empty*) {
  try {
    std::shared_ptr<JobPlan> plan = planFor(*req);
    auto run = std::make_shared<AttemptRun>(*this, plan, *req);
    {
      std::lock_guard lock(mu_);
      if (stop_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
      attempts_[{req->job_id(), req->attempt()}] = run;
    }
    log::info("Running {} subtasks of job {} attempt {}", run->size(), req->job_id(),
              req->attempt());
    run->start();
    return grpc::Status::OK;
  } catch (const std::exception& e) {
    log::error("Cannot run job {} attempt {}: {}", req->job_id(), req->attempt(), e.what());
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e.what());
  }
}

void TaskManager::Impl::attemptEnded(AttemptRun* run) {
  // On the last task's thread: the group is joined and freed elsewhere.
  const std::pair<std::string, int> key{run->jobId(), run->attempt()};
  reaper_->submit([this, key] {
    std::shared_ptr<AttemptRun> r;
    {
      std::lock_guard lock(mu_);
      auto it = attempts_.find(key);
      if (it == attempts_.end()) return;
      r = std::move(it->second);
      attempts_.erase(it);
    }
    r.reset();  // joins the task threads, releases the attempt's channels
  });
}

std::shared_ptr<AttemptRun> TaskManager::Impl::findAttempt(const std::string& jobId, int attempt) {
  std::lock_guard lock(mu_);
  auto it = attempts_.find({jobId, attempt});
  return it == attempts_.end() ? nullptr : it->second;
}

runtime::Task* TaskManager::Impl::findTask(const rpc::TaskRef& ref,
                                           std::shared_ptr<AttemptRun>& holder) {
  holder = findAttempt(ref.job_id(), ref.attempt());
  if (!holder) return nullptr;
  return holder->task(ref.vertex(), ref.subtask());
}

grpc::Status TaskManager::Impl::CancelAttempt(grpc::ServerContext*, const rpc::AttemptRequest* req,
                                              rpc::Empty*) {
  if (auto run = findAttempt(req->job_id(), req->attempt())) run->cancelAll();
  return grpc::Status::OK;
}

grpc::Status TaskManager::Impl::CancelTask(grpc::ServerContext*, const rpc::TaskControlRequest* req,
                                           rpc::Empty*) {
  std::shared_ptr<AttemptRun> holder;
  runtime::Task* t = findTask(req->task(), holder);
  if (t == nullptr) return grpc::Status::OK;  // already gone: nothing to cancel
  t->cancel();
  return grpc::Status::OK;
}

grpc::Status TaskManager::Impl::TriggerCheckpoint(grpc::ServerContext*,
                                                  const rpc::TriggerCheckpointRequest* req,
                                                  rpc::Empty*) {
  std::shared_ptr<AttemptRun> holder;
  runtime::Task* t = findTask(req->task(), holder);
  if (t == nullptr) return unknownTask(req->task());
  CheckpointBarrier b;
  b.id = req->checkpoint_id();
  b.timestamp = req->timestamp();
  checkpoint::CheckpointOptions o = checkpointOptionsFromProto(req->options());
  b.type = o.type;
  t->triggerCheckpoint(b, o);
  return grpc::Status::OK;
}

grpc::Status TaskManager::Impl::NotifyCheckpoint(grpc::ServerContext*,
                                                 const rpc::NotifyCheckpointRequest* req,
                                                 rpc::Empty*) {
  std::shared_ptr<AttemptRun> holder;
  runtime::Task* t = findTask(req->task(), holder);
  if (t == nullptr) return unknownTask(req->task());
  if (req->aborted()) {
    t->notifyCheckpointAborted(req->checkpoint_id(), checkpointOptionsFromProto(req->options()));
  } else {
    t->notifyCheckpointComplete(req->checkpoint_id());
  }
  return grpc::Status::OK;
}

grpc::Status TaskManager::Impl::AssignSplit(grpc::ServerContext*, const rpc::SplitRequest* req,
                                            rpc::Empty*) {
  std::shared_ptr<AttemptRun> holder;
  runtime::Task* t = findTask(req->task(), holder);
  if (t == nullptr) return unknownTask(req->task());
  if (req->no_more_splits()) {
    t->postNoMoreSplits();
  } else {
    t->postSplit(std::vector<uint8_t>(req->split().begin(), req->split().end()));
  }
  return grpc::Status::OK;
}

// ---- TaskManager ---------------------------------------------------------------------------

TaskManager::TaskManager(Configuration config) : impl_(std::make_unique<Impl>(std::move(config))) {}
TaskManager::~TaskManager() = default;
int TaskManager::rpcPort() const { return impl_->rpcPort_; }
int TaskManager::dataPort() const { return impl_->dataPort_; }
const std::string& TaskManager::resourceId() const { return impl_->id(); }
void TaskManager::wait() { impl_->wait(); }
void TaskManager::shutdown() { impl_->shutdown(); }

}  // namespace sluice::cluster
