#include "cluster/job_manager.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <sluice/core/clock.h>
#include <sluice/core/config_options.h>

#include "checkpoint/task_state_codec.h"
#include "cluster/job_library.h"
#include "cluster/plan_mode.h"
#include "cluster/rest_dispatcher.h"
#include "cluster/rpc_util.h"
#include "core/logging.h"
#include "core/random_id.h"
#include "core/serial_executor.h"
#include "runtime/mini_cluster.h"

namespace sluice::cluster {
namespace {

using SteadyClock = std::chrono::steady_clock;

// One registered TaskManager, as the ResourceManager sees it.
struct TaskManagerEntry {
  std::string id;
  std::string host;
  int rpcPort = 0;
  int dataPort = 0;
  int slots = 0;
  rpc::RegisterTaskManagerRequest registration;  // hardware and memory, for REST
  std::unique_ptr<rpc::TaskExecutorService::Stub> stub;
  // Calls to this TaskManager, in order, off the caller's thread.
  std::unique_ptr<SerialExecutor> out;
  // Guarded by Impl::mu_.
  SteadyClock::time_point lastHeartbeat;
  std::vector<std::string> slotOwner;  // job id per slot, empty when free
  bool lost = false;

  std::string describe() const {
    return fmt::format("TaskManager {} at {}", id, hostPort(host, rpcPort));
  }
  int freeSlots() const {
    return static_cast<int>(std::count(slotOwner.begin(), slotOwner.end(), std::string()));
  }
};

rpc::CheckpointOptionsMsg toProto(const checkpoint::CheckpointOptions& o) {
  rpc::CheckpointOptionsMsg m;
  m.set_type(static_cast<int32_t>(o.type));
  m.set_terminate(o.terminate);
  m.set_drain(o.drain);
  m.set_target_location(o.targetDirectory);
  return m;
}

}  // namespace

class RemoteDeployment;

class JobManager::Impl final : public JobManagerBackend {
 public:
  explicit Impl(Configuration config);
  ~Impl() override;

  // ResourceManager: `count` slots for `jobId`, waiting up to
  // slot.request.timeout. Throws RetryableStartFailure naming what was
  // needed and there.
  std::vector<std::shared_ptr<TaskManagerEntry>> allocateSlots(const std::string& jobId, int count);
  void releaseSlots(const std::string& jobId);

  struct JobEntry {
    std::string id;
    std::string name;
    std::string blobKey;
    std::string libraryName;
    std::vector<std::string> args;
    Configuration submitted;  // plan-mode base of every process
    CapturedPlan plan;
    int64_t startTimeMs = 0;
    std::shared_ptr<runtime::JobRun> run;  // null until started
    // Set once, before the run starts; lives as long as the entry.
    std::shared_ptr<RemoteDeployment> deployment;
    int parallelism = 1;
    int tasks = 0;
    std::string startError;  // the job could not start
    int64_t startFailedMs = -1;
    bool startDone = false;
    std::thread starter;
  };

  // Service handlers.
  grpc::Status registerTaskManager(const rpc::RegisterTaskManagerRequest& req);
  grpc::Status heartbeat(const rpc::HeartbeatRequest& req, rpc::HeartbeatResponse* resp);
  grpc::Status getBlob(const rpc::BlobRequest& req, rpc::BlobResponse* resp);
  grpc::Status updateTaskState(const rpc::TaskStateUpdate& req);
  grpc::Status acknowledgeCheckpoint(const rpc::AcknowledgeCheckpointRequest& req);
  grpc::Status declineCheckpoint(const rpc::DeclineCheckpointRequest& req);
  grpc::Status sourceEvent(const rpc::SourceEventRequest& req);
  grpc::Status submitJob(const rpc::SubmitJobRequest& req, rpc::SubmitJobResponse* resp);
  grpc::Status listJobs(rpc::ListJobsResponse* resp);
  grpc::Status getJob(const rpc::JobIdRequest& req, rpc::JobInfo* resp);
  grpc::Status cancelJob(const rpc::JobIdRequest& req);
  grpc::Status triggerSavepoint(const rpc::SavepointRequest& req, rpc::SavepointResponse* resp);

  int port() const { return port_; }
  void wait();
  void shutdown();

  const Configuration& config() const { return config_; }
  BlobStore& blobs() { return blobs_; }
  // rest.authentication.token; empty: client calls need none.
  const std::string& token() const { return token_; }

  // JobManagerBackend (the REST API).
  std::vector<JobView> jobViews() override;
  std::optional<JobView> jobView(const std::string& id) override;
  std::vector<TaskManagerView> taskManagerViews() override;
  int runningJobs() override;
  grpc::Status submit(const Submission& submission, std::string* jobId,
                      std::string* jobName) override;
  grpc::Status cancel(const std::string& jobId) override;
  grpc::Status savepoint(const std::string& jobId, const std::string& directory, bool terminate,
                         bool drain, std::string* path) override;
  const Configuration& configuration() const override { return config_; }
  std::string blobDirectory() const override { return blobs_.directory(); }

 private:
  std::shared_ptr<JobEntry> findJob(const std::string& id);
  JobView viewOf(const JobEntry& job) const;  // caller holds mu_
  // The job's deployment, when `attempt` is its running attempt.
  std::shared_ptr<RemoteDeployment> currentDeployment(JobEntry& job, int attempt);
  void fillInfo(JobEntry& job, rpc::JobInfo* info);
  void monitorHeartbeats();
  // Removes the ended jobs that jobstore.expiration-time and
  // jobstore.max-capacity no longer keep.
  void expireJobs();
  void taskManagerLost(const std::shared_ptr<TaskManagerEntry>& tm, const std::string& why);

  const Configuration config_;
  const std::string token_;
  const int64_t jobStoreExpirationMs_;
  const size_t jobStoreMaxCapacity_;
  BlobStore blobs_;
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  // The REST API, web UI and metrics; stopped first, it calls into the rest.
  std::unique_ptr<ClusterRest> rest_;

  std::mutex mu_;
  std::condition_variable slotsChanged_;
  std::condition_variable stopped_;
  bool stop_ = false;
  std::vector<std::shared_ptr<TaskManagerEntry>> taskManagers_;  // registration order
  std::map<std::string, std::shared_ptr<JobEntry>> jobs_;
  std::vector<std::string> jobOrder_;
  std::thread heartbeatMonitor_;
};

// ---- the deployment of one job's attempts into TaskManager slots ---------------------

class RemoteTask;

class RemoteDeployment final : public runtime::TaskDeployment,
                               public std::enable_shared_from_this<RemoteDeployment> {
 public:
  RemoteDeployment(JobManager::Impl& jm, JobManager::Impl::JobEntry& job, const JobGraph& jobGraph)
      : jm_(jm), job_(job), jobGraph_(jobGraph) {}
  ~RemoteDeployment() override;

  std::vector<std::vector<runtime::TaskControl*>> deploy(const Attempt& attempt) override;
  void setSourceCoordinator(int vertex, runtime::SourceCoordinatorLink* link) override {
    std::lock_guard lock(mu_);
    sources_[vertex] = link;
  }
  void start() override;
  void join() override;
  runtime::TaskLocation location(int vertex, int subtask) const override;

  // From the TaskManagers (any thread).
  void taskUpdate(const rpc::TaskStateUpdate& update);
  void taskManagerLost(const std::string& tmId, const std::string& why);
  // The running attempt's checkpoint coordinator and source coordinators,
  // for calls of its tasks; null for calls of another attempt.
  checkpoint::CheckpointCoordinatorGateway* gatewayFor(int attempt) {
    std::lock_guard lock(mu_);
    return !closed_ && attempt == attempt_ ? gateway_ : nullptr;
  }
  runtime::SourceCoordinatorLink* sourceFor(int attempt, int vertex) {
    std::lock_guard lock(mu_);
    if (closed_ || attempt != attempt_) return nullptr;
    auto it = sources_.find(vertex);
    return it == sources_.end() ? nullptr : it->second;
  }
  bool isCurrent(int attempt) {
    std::lock_guard lock(mu_);
    return !closed_ && attempt == attempt_;
  }
  // The scheduler is gone (the job could not start): calls change nothing.
  void close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    running_.clear();
  }
  void post(RemoteTask& task,
            std::function<grpc::Status(rpc::TaskExecutorService::Stub&, grpc::ClientContext&)> call,
            const char* what);

 private:
  void ended(int vertex, int subtask, runtime::TaskResult result);

  JobManager::Impl& jm_;
  JobManager::Impl::JobEntry& job_;
  const JobGraph& jobGraph_;
  std::mutex mu_;
  std::condition_variable cv_;
  int attempt_ = -1;
  bool closed_ = false;
  runtime::TaskEvents* events_ = nullptr;
  std::vector<std::shared_ptr<TaskManagerEntry>> slots_;  // per slot index
  // Where each slot of the latest attempt is, for location(): its own lock,
  // as the scheduler asks with its lock held.
  mutable std::mutex locationMu_;
  std::vector<runtime::TaskLocation> slotLocations_;
  std::vector<std::vector<std::unique_ptr<RemoteTask>>> tasks_;
  std::vector<std::vector<std::unique_ptr<RemoteTask>>> previous_;
  std::set<std::pair<int, int>> running_;  // not yet ended
  int ending_ = 0;                         // ended() calls still telling the scheduler
  CheckpointingMode mode_ = CheckpointingMode::kExactlyOnce;
  bool checkpointing_ = false;
  checkpoint::CheckpointCoordinatorGateway* gateway_ = nullptr;
  std::map<int, runtime::SourceCoordinatorLink*> sources_;  // by source vertex
  std::string restoreDirectory_;
  std::string incrementalShared_;
};

// What the scheduler owns: the job entry keeps the deployment itself, so
// that calls from TaskManagers never reach a destroyed one.
class DeploymentHandle final : public runtime::TaskDeployment {
 public:
  explicit DeploymentHandle(std::shared_ptr<RemoteDeployment> d) : d_(std::move(d)) {}
  std::vector<std::vector<runtime::TaskControl*>> deploy(const Attempt& attempt) override {
    return d_->deploy(attempt);
  }
  void setSourceCoordinator(int vertex, runtime::SourceCoordinatorLink* link) override {
    d_->setSourceCoordinator(vertex, link);
  }
  void start() override { d_->start(); }
  void join() override { d_->join(); }
  runtime::TaskLocation location(int vertex, int subtask) const override {
    return d_->location(vertex, subtask);
  }

 private:
  std::shared_ptr<RemoteDeployment> d_;
};

// A subtask running in a TaskManager, as the scheduler controls it.
class RemoteTask final : public runtime::TaskControl {
 public:
  RemoteTask(RemoteDeployment& d, std::shared_ptr<TaskManagerEntry> tm, rpc::TaskRef ref)
      : d_(d), tm_(std::move(tm)), ref_(std::move(ref)) {}

  void cancel() override {
    rpc::TaskControlRequest req;
    *req.mutable_task() = ref_;
    d_.post(
        *this,
        [req](auto& stub, auto& ctx) {
          rpc::Empty e;
          return stub.CancelTask(&ctx, req, &e);
        },
        "cancel");
  }
  void postSplit(std::vector<uint8_t> split) override {
    rpc::SplitRequest req;
    *req.mutable_task() = ref_;
    req.set_split(std::string(split.begin(), split.end()));
    d_.post(
        *this,
        [req](auto& stub, auto& ctx) {
          rpc::Empty e;
          return stub.AssignSplit(&ctx, req, &e);
        },
        "assign a split to");
  }
  void postNoMoreSplits() override {
    rpc::SplitRequest req;
    *req.mutable_task() = ref_;
    req.set_no_more_splits(true);
    d_.post(
        *this,
        [req](auto& stub, auto& ctx) {
          rpc::Empty e;
          return stub.AssignSplit(&ctx, req, &e);
        },
        "signal no more splits to");
  }
  void triggerCheckpoint(CheckpointBarrier barrier,
                         checkpoint::CheckpointOptions options) override {
    rpc::TriggerCheckpointRequest req;
    *req.mutable_task() = ref_;
    req.set_checkpoint_id(barrier.id);
    req.set_timestamp(barrier.timestamp);
    *req.mutable_options() = toProto(options);
    d_.post(
        *this,
        [req](auto& stub, auto& ctx) {
          rpc::Empty e;
          return stub.TriggerCheckpoint(&ctx, req, &e);
        },
        "trigger a checkpoint on");
  }
  void notifyCheckpointComplete(int64_t id) override { notify(id, false, {}); }
  void notifyCheckpointAborted(int64_t id, checkpoint::CheckpointOptions options) override {
    notify(id, true, options);
  }

  TaskManagerEntry& tm() { return *tm_; }
  const rpc::TaskRef& ref() const { return ref_; }

 private:
  void notify(int64_t id, bool aborted, const checkpoint::CheckpointOptions& options) {
    rpc::NotifyCheckpointRequest req;
    *req.mutable_task() = ref_;
    req.set_checkpoint_id(id);
    req.set_aborted(aborted);
    *req.mutable_options() = toProto(options);
    d_.post(
        *this,
        [req](auto& stub, auto& ctx) {
          rpc::Empty e;
          return stub.NotifyCheckpoint(&ctx, req, &e);
        },
        "notify a checkpoint to");
  }

  RemoteDeployment& d_;
  const std::shared_ptr<TaskManagerEntry> tm_;
  const rpc::TaskRef ref_;
};

RemoteDeployment::~RemoteDeployment() = default;

void RemoteDeployment::post(
    RemoteTask& task,
    std::function<grpc::Status(rpc::TaskExecutorService::Stub&, grpc::ClientContext&)> call,
    const char* what) {
  TaskManagerEntry* tm = &task.tm();
  const std::string name = fmt::format("{} subtask {}/{} of vertex {}", what, task.ref().subtask(),
                                       task.ref().vertex(), tm->describe());
  tm->out->submit([tm, call = std::move(call), name] {
    grpc::ClientContext ctx;
    setDeadline(ctx, 30000);
    grpc::Status st = call(*tm->stub, ctx);
    // A lost TaskManager's tasks are failed by the heartbeat monitor; a
    // call that does not arrive changes nothing more.
    if (!st.ok()) log::debug("could not {}: {}", name, st.error_message());
  });
}

std::vector<std::vector<runtime::TaskControl*>> RemoteDeployment::deploy(const Attempt& attempt) {
  int needed = 1;
  for (const auto& v : jobGraph_.vertices) needed = std::max(needed, v.parallelism);
  std::vector<std::shared_ptr<TaskManagerEntry>> slots = jm_.allocateSlots(job_.id, needed);
  std::lock_guard lock(mu_);
  previous_ = std::move(tasks_);
  tasks_.clear();
  slots_ = std::move(slots);
  attempt_ = attempt.number;
  events_ = attempt.events;
  mode_ = attempt.mode;
  checkpointing_ = attempt.checkpointGateway != nullptr;
  gateway_ = attempt.checkpointGateway;
  sources_.clear();
  restoreDirectory_ = attempt.checkpoint != nullptr ? attempt.checkpoint->directory : "";
  if (attempt.checkpoint != nullptr && restoreDirectory_.empty()) {
    jm_.releaseSlots(job_.id);
    throw SluiceException(
        "the checkpoint to restore is kept in the JobManager's memory only; a cluster job needs "
        "state.checkpoints.dir on a filesystem every process reaches");
  }
  incrementalShared_ = attempt.incrementalSharedDirectory;
  {
    std::lock_guard locations(locationMu_);
    slotLocations_.clear();
    for (const auto& tm : slots_) {
      slotLocations_.push_back({tm->host, tm->id, hostPort(tm->host, tm->rpcPort)});
    }
  }
  running_.clear();
  std::vector<std::vector<runtime::TaskControl*>> controls(jobGraph_.vertices.size());
  tasks_.resize(jobGraph_.vertices.size());
  for (const auto& v : jobGraph_.vertices) {
    for (int s = 0; s < v.parallelism; ++s) {
      rpc::TaskRef ref;
      ref.set_job_id(job_.id);
      ref.set_attempt(attempt.number);
      ref.set_vertex(v.id);
      ref.set_subtask(s);
      tasks_[v.id].push_back(std::make_unique<RemoteTask>(*this, slots_.at(s), ref));
      controls[v.id].push_back(tasks_[v.id].back().get());
      running_.insert({v.id, s});
    }
  }
  return controls;
}

void RemoteDeployment::start() {
  rpc::DeployRequest base;
  std::map<TaskManagerEntry*, std::vector<std::pair<int, int>>> perTm;
  {
    std::lock_guard lock(mu_);
    base.set_job_id(job_.id);
    base.set_attempt(attempt_);
    base.set_blob_key(job_.blobKey);
    base.set_library_name(job_.libraryName);
    for (const auto& a : job_.args) base.add_args(a);
    toProto(job_.submitted, base.mutable_config());
    base.set_restore_checkpoint(restoreDirectory_);
    base.set_incremental_shared_directory(incrementalShared_);
    base.set_checkpointing_mode(mode_ == CheckpointingMode::kExactlyOnce ? "EXACTLY_ONCE"
                                                                         : "AT_LEAST_ONCE");
    base.set_checkpointing(checkpointing_);
    for (const auto& v : jobGraph_.vertices) {
      for (int s = 0; s < v.parallelism; ++s) {
        TaskManagerEntry& tm = *slots_.at(s);
        rpc::TaskLocation* loc = base.add_locations();
        loc->set_vertex(v.id);
        loc->set_subtask(s);
        loc->set_resource_id(tm.id);
        loc->set_host(tm.host);
        loc->set_data_port(tm.dataPort);
        perTm[&tm].push_back({v.id, s});
      }
    }
  }
  const int attempt = base.attempt();
  for (auto& [tm, subtasks] : perTm) {
    log::info("Deploying {} subtasks of job {} attempt {} to {}", subtasks.size(), job_.id, attempt,
              tm->describe());
    // The call keeps the deployment alive: once its tasks have ended, the
    // job may end and leave the job store (and its entry) while the call
    // is still returning.
    tm->out->submit([self = shared_from_this(), tm, base, subtasks = subtasks, attempt] {
      grpc::ClientContext ctx;
      setDeadline(ctx, 120000);
      rpc::Empty e;
      grpc::Status st = tm->stub->Deploy(&ctx, base, &e);
      if (st.ok()) return;
      const std::string error = fmt::format("could not deploy job {} to {}: {}", base.job_id(),
                                            tm->describe(), st.error_message());
      log::error("{}", error);
      if (!self->isCurrent(attempt)) return;
      for (auto [v, s] : subtasks) {
        runtime::TaskResult r;
        r.failed = true;
        r.error = error;
        self->ended(v, s, std::move(r));
      }
    });
  }
}

void RemoteDeployment::ended(int vertex, int subtask, runtime::TaskResult result) {
  runtime::TaskEvents* events;
  {
    std::lock_guard lock(mu_);
    if (running_.erase({vertex, subtask}) == 0) return;
    events = events_;
    ++ending_;
  }
  events->taskEnded(vertex, subtask, std::move(result));
  std::lock_guard lock(mu_);
  --ending_;
  cv_.notify_all();
}

runtime::TaskLocation RemoteDeployment::location(int, int subtask) const {
  // Subtask i of every vertex runs in the job's slot i.
  std::lock_guard lock(locationMu_);
  if (subtask < 0 || static_cast<size_t>(subtask) >= slotLocations_.size()) return {};
  return slotLocations_[static_cast<size_t>(subtask)];
}

void RemoteDeployment::join() {
  {
    std::unique_lock lock(mu_);
    // Not while an ended() call is still telling the scheduler: the
    // scheduler may go once join() returns.
    cv_.wait(lock, [&] { return running_.empty() && ending_ == 0; });
  }
  jm_.releaseSlots(job_.id);
}

void RemoteDeployment::taskUpdate(const rpc::TaskStateUpdate& u) {
  if (!isCurrent(u.task().attempt())) return;
  if (u.kind() == rpc::TaskStateUpdate::FINISHED_INPUT) {
    runtime::TaskEvents* events;
    {
      std::lock_guard lock(mu_);
      if (running_.count({u.task().vertex(), u.task().subtask()}) == 0) return;
      events = events_;
    }
    events->taskFinished(u.task().vertex(), u.task().subtask());
    return;
  }
  runtime::TaskResult r;
  r.failed = u.failed();
  r.cancelled = u.cancelled();
  r.error = u.error();
  r.numRecordsDropped = u.records_dropped();
  for (const auto& kv : u.counters()) r.counters[kv.key()] = std::stoll(kv.value());
  ended(u.task().vertex(), u.task().subtask(), std::move(r));
}

void RemoteDeployment::taskManagerLost(const std::string& tmId, const std::string& why) {
  std::vector<std::pair<int, int>> lost;
  {
    std::lock_guard lock(mu_);
    for (auto [v, s] : running_) {
      if (slots_.at(s)->id == tmId) lost.push_back({v, s});
    }
  }
  for (auto [v, s] : lost) {
    runtime::TaskResult r;
    r.failed = true;
    r.error = why;
    ended(v, s, std::move(r));
  }
}

// ---- the gRPC service ------------------------------------------------------------------

namespace {

class Service final : public rpc::JobManagerService::Service {
 public:
  explicit Service(JobManager::Impl& jm) : jm_(jm) {}
  grpc::Status RegisterTaskManager(grpc::ServerContext*, const rpc::RegisterTaskManagerRequest* r,
                                   rpc::RegisterTaskManagerResponse*) override {
    return jm_.registerTaskManager(*r);
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const rpc::HeartbeatRequest* r,
                         rpc::HeartbeatResponse* resp) override {
    return jm_.heartbeat(*r, resp);
  }
  grpc::Status GetBlob(grpc::ServerContext*, const rpc::BlobRequest* r,
                       rpc::BlobResponse* resp) override {
    return jm_.getBlob(*r, resp);
  }
  grpc::Status UpdateTaskState(grpc::ServerContext*, const rpc::TaskStateUpdate* r,
                               rpc::Empty*) override {
    return jm_.updateTaskState(*r);
  }
  grpc::Status AcknowledgeCheckpoint(grpc::ServerContext*,
                                     const rpc::AcknowledgeCheckpointRequest* r,
                                     rpc::Empty*) override {
    return jm_.acknowledgeCheckpoint(*r);
  }
  grpc::Status DeclineCheckpoint(grpc::ServerContext*, const rpc::DeclineCheckpointRequest* r,
                                 rpc::Empty*) override {
    return jm_.declineCheckpoint(*r);
  }
  grpc::Status SourceEvent(grpc::ServerContext*, const rpc::SourceEventRequest* r,
                           rpc::Empty*) override {
    return jm_.sourceEvent(*r);
  }
  grpc::Status SubmitJob(grpc::ServerContext* ctx, const rpc::SubmitJobRequest* r,
                         rpc::SubmitJobResponse* resp) override {
    if (grpc::Status st = authorize(*ctx, "submit a job"); !st.ok()) return st;
    return jm_.submitJob(*r, resp);
  }
  grpc::Status ListJobs(grpc::ServerContext*, const rpc::Empty*,
                        rpc::ListJobsResponse* resp) override {
    return jm_.listJobs(resp);
  }
  grpc::Status GetJob(grpc::ServerContext*, const rpc::JobIdRequest* r,
                      rpc::JobInfo* resp) override {
    return jm_.getJob(*r, resp);
  }
  grpc::Status CancelJob(grpc::ServerContext* ctx, const rpc::JobIdRequest* r,
                         rpc::Empty*) override {
    if (grpc::Status st = authorize(*ctx, "cancel a job"); !st.ok()) return st;
    return jm_.cancelJob(*r);
  }
  grpc::Status TriggerSavepoint(grpc::ServerContext* ctx, const rpc::SavepointRequest* r,
                                rpc::SavepointResponse* resp) override {
    if (grpc::Status st = authorize(*ctx, r->stop() ? "stop a job" : "take a savepoint");
        !st.ok()) {
      return st;
    }
    return jm_.triggerSavepoint(*r, resp);
  }

 private:
  // With rest.authentication.token set, a client call that changes a job
  // must carry "authorization: Bearer <token>".
  grpc::Status authorize(const grpc::ServerContext& ctx, const char* what) const {
    const std::string& token = jm_.token();
    if (token.empty()) return grpc::Status::OK;
    const auto& md = ctx.client_metadata();
    auto it = md.find("authorization");
    const char* problem = "carries no token";
    if (it != md.end()) {
      const std::string got(it->second.data(), it->second.size());
      if (tokenMatches(got, "Bearer " + token)) return grpc::Status::OK;
      problem = "carries a wrong token";
    }
    log::warn("Refused a client's call to {}: it {} (rest.authentication.token)", what, problem);
    return grpc::Status(
        grpc::StatusCode::UNAUTHENTICATED,
        fmt::format("the JobManager requires rest.authentication.token to {} and the request {}; "
                    "give the client the token (-D rest.authentication.token=... or config.yaml)",
                    what, problem));
  }
  // Compares without stopping at the first difference.
  static bool tokenMatches(const std::string& got, const std::string& expected) {
    unsigned diff = got.size() == expected.size() ? 0U : 1U;
    for (size_t i = 0; i < expected.size(); ++i) {
      diff |= static_cast<unsigned char>(i < got.size() ? got[i] : 0) ^
              static_cast<unsigned char>(expected[i]);
    }
    return diff == 0;
  }

  JobManager::Impl& jm_;
};

int32_t positive(const Configuration& config, const ConfigOption<int32_t>& option) {
  const int32_t value = config.get(option);
  if (value < 1) {
    throw SluiceException(fmt::format("{} must be at least 1, got {}", option.key, value));
  }
  return value;
}

grpc::Status notFound(const std::string& jobId) {
  return grpc::Status(grpc::StatusCode::NOT_FOUND,
                      fmt::format("no job with id '{}' (sluice list shows the jobs)", jobId));
}

}  // namespace

JobManager::Impl::Impl(Configuration config)
    : config_(std::move(config)),
      token_(config_.get(options::kRestAuthenticationToken)),
      jobStoreExpirationMs_(int64_t{1000} * positive(config_, options::kJobStoreExpirationTime)),
      jobStoreMaxCapacity_(static_cast<size_t>(positive(config_, options::kJobStoreMaxCapacity))),
      blobs_(config_.get(options::kBlobStorageDirectory)) {
  service_ = std::make_unique<Service>(*this);
  const std::string address =
      hostPort(config_.get(options::kJobManagerBindHost), config_.get(options::kJobManagerRpcPort));
  server_ = startServer(address, *service_, &port_, "JobManager",
                        "jobmanager.bind-host, jobmanager.rpc.port");
  log::info("JobManager listening on {} (blob store {})",
            hostPort(config_.get(options::kJobManagerBindHost), port_), blobs_.directory());
  if (!token_.empty()) {
    log::info(
        "Client calls that change jobs need the token (rest.authentication.token); TaskManager "
        "calls do not");
  }
  rest_ = std::make_unique<ClusterRest>(*this, config_);
  heartbeatMonitor_ = std::thread([this] { monitorHeartbeats(); });
}

JobManager::Impl::~Impl() {
  shutdown();
  if (heartbeatMonitor_.joinable()) heartbeatMonitor_.join();
  std::vector<std::shared_ptr<JobEntry>> jobs;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, j] : jobs_) jobs.push_back(j);
  }
  for (auto& j : jobs) {
    if (j->starter.joinable()) j->starter.join();
  }
  for (auto& j : jobs) {
    if (j->run) {
      j->run->cancel();
      j->run->wait();
    }
  }
  // The REST endpoint stops once the jobs ended, so that a request waiting
  // for one (a savepoint) has returned.
  rest_.reset();
  // The runs, with their deployments, go before the TaskManager entries.
  {
    std::lock_guard lock(mu_);
    jobs_.clear();
  }
  jobs.clear();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

void JobManager::Impl::wait() {
  std::unique_lock lock(mu_);
  stopped_.wait(lock, [&] { return stop_; });
}

void JobManager::Impl::shutdown() {
  std::lock_guard lock(mu_);
  stop_ = true;
  stopped_.notify_all();
  slotsChanged_.notify_all();
}

// ---- ResourceManager --------------------------------------------------------------

grpc::Status JobManager::Impl::registerTaskManager(const rpc::RegisterTaskManagerRequest& req) {
  if (req.fingerprint() != buildFingerprint()) {
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        fmt::format("TaskManager {} runs another Sluice build [{}] than the JobManager [{}]",
                    req.resource_id(), req.fingerprint(), buildFingerprint()));
  }
  if (req.number_of_slots() < 1 || req.number_of_slots() > 4096 || req.data_port() <= 0 ||
      req.data_port() > 65535 || req.rpc_port() <= 0 || req.rpc_port() > 65535) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "invalid TaskManager registration (slots or ports out of range)");
  }
  auto tm = std::make_shared<TaskManagerEntry>();
  tm->id = req.resource_id();
  tm->host = req.host();
  tm->rpcPort = req.rpc_port();
  tm->dataPort = req.data_port();
  tm->slots = req.number_of_slots();
  tm->registration = req;
  tm->slotOwner.assign(static_cast<size_t>(tm->slots), "");
  tm->stub = rpc::TaskExecutorService::NewStub(makeChannel(hostPort(tm->host, tm->rpcPort)));
  tm->out = std::make_unique<SerialExecutor>("rpc-tm");
  tm->lastHeartbeat = SteadyClock::now();
  std::shared_ptr<TaskManagerEntry> replaced;
  {
    std::lock_guard lock(mu_);
    for (auto& t : taskManagers_) {
      if (t->id == tm->id) replaced = t;
    }
  }
  if (replaced) taskManagerLost(replaced, replaced->describe() + " registered again");
  {
    std::lock_guard lock(mu_);
    taskManagers_.push_back(tm);
    slotsChanged_.notify_all();
  }
  log::info("Registered {} with {} slots (data port {})", tm->describe(), tm->slots, tm->dataPort);
  return grpc::Status::OK;
}

grpc::Status JobManager::Impl::heartbeat(const rpc::HeartbeatRequest& req,
                                         rpc::HeartbeatResponse* resp) {
  std::lock_guard lock(mu_);
  resp->set_known(false);
  for (auto& t : taskManagers_) {
    if (t->id == req.resource_id()) {
      t->lastHeartbeat = SteadyClock::now();
      resp->set_known(true);
    }
  }
  return grpc::Status::OK;
}

void JobManager::Impl::monitorHeartbeats() {
  const auto timeout = config_.get(options::kHeartbeatTimeout);
  const auto interval = std::max(std::chrono::milliseconds(10),
                                 std::min(config_.get(options::kHeartbeatInterval), timeout) / 4);
  std::unique_lock lock(mu_);
  while (!stop_) {
    stopped_.wait_for(lock, interval);
    if (stop_) break;
    const auto now = SteadyClock::now();
    std::vector<std::shared_ptr<TaskManagerEntry>> lost;
    for (auto& t : taskManagers_) {
      if (now - t->lastHeartbeat > timeout) lost.push_back(t);
    }
    lock.unlock();
    expireJobs();
    for (auto& t : lost) {
      taskManagerLost(
          t,
          fmt::format("{} was lost: no heartbeat for {} ms (heartbeat.timeout)", t->describe(),
                      std::chrono::duration_cast<std::chrono::milliseconds>(now - t->lastHeartbeat)
                          .count()));
    }
    lock.lock();
  }
}

void JobManager::Impl::expireJobs() {
  std::vector<std::shared_ptr<JobEntry>> expired;
  {
    std::lock_guard lock(mu_);
    const int64_t now = SystemClock::instance().currentTimeMillis();
    // Ended jobs, by the time they ended. One whose run is also held
    // elsewhere (a REST request reading it) waits for the next round; once
    // it is out of jobs_, nothing takes it again.
    std::vector<std::pair<int64_t, std::string>> ended;
    for (const auto& [id, j] : jobs_) {
      int64_t end = -1;
      if (j->run) {
        if (j->run.use_count() == 1) end = j->run->endTimeMs();
      } else if (j->startDone) {
        end = j->startFailedMs;
      }
      if (end >= 0) ended.emplace_back(end, id);
    }
    std::sort(ended.begin(), ended.end());
    size_t keep = ended.size();
    for (size_t i = 0; i < ended.size(); ++i) {
      const bool tooOld = now - ended[i].first >= jobStoreExpirationMs_;
      const bool overCapacity = keep > jobStoreMaxCapacity_;
      if (!tooOld && !overCapacity) continue;
      const std::string& id = ended[i].second;
      log::info("Removed job {} from the JobManager, which it ended {} ms ago ({})", id,
                now - ended[i].first,
                tooOld ? "jobstore.expiration-time" : "jobstore.max-capacity");
      expired.push_back(jobs_.at(id));
      jobs_.erase(id);
      std::erase(jobOrder_, id);
      --keep;
    }
  }
  // Outside mu_: a run's end listener may still be finishing.
  for (auto& j : expired) {
    if (j->starter.joinable()) j->starter.join();
    if (j->run) j->run->wait();
  }
}

void JobManager::Impl::taskManagerLost(const std::shared_ptr<TaskManagerEntry>& tm,
                                       const std::string& why) {
  std::vector<std::shared_ptr<RemoteDeployment>> deployments;
  {
    std::lock_guard lock(mu_);
    auto it = std::find(taskManagers_.begin(), taskManagers_.end(), tm);
    if (it == taskManagers_.end()) return;
    taskManagers_.erase(it);
    tm->lost = true;
    for (auto& [id, j] : jobs_) {
      if (j->deployment) deployments.push_back(j->deployment);
    }
    slotsChanged_.notify_all();
  }
  log::error("{}; its tasks fail and their jobs restart per their restart strategy", why);
  for (auto& d : deployments) d->taskManagerLost(tm->id, why);
}

std::vector<std::shared_ptr<TaskManagerEntry>> JobManager::Impl::allocateSlots(
    const std::string& jobId, int count) {
  const auto timeout = config_.get(options::kSlotRequestTimeout);
  const bool spread = config_.get(options::kClusterEvenlySpreadOutSlots);
  const auto deadline = SteadyClock::now() + timeout;
  std::unique_lock lock(mu_);
  auto freeSlots = [&] {
    int n = 0;
    for (auto& t : taskManagers_) n += t->freeSlots();
    return n;
  };
  bool logged = false;
  while (freeSlots() < count) {
    if (stop_) throw runtime::RetryableStartFailure("the JobManager is shutting down");
    if (!logged) {
      log::info("Job {} waits for {} slots; {} are free (slot.request.timeout {} ms)", jobId, count,
                freeSlots(), timeout.count());
      logged = true;
    }
    if (slotsChanged_.wait_until(lock, deadline) == std::cv_status::timeout &&
        freeSlots() < count) {
      int total = 0;
      for (auto& t : taskManagers_) total += t->slots;
      throw runtime::RetryableStartFailure(fmt::format(
          "could not get the slots the job needs within slot.request.timeout ({} ms): it needs "
          "{} slots, the cluster has {} free of {} on {} TaskManagers",
          timeout.count(), count, freeSlots(), total, taskManagers_.size()));
    }
  }
  std::vector<std::shared_ptr<TaskManagerEntry>> slots;
  while (static_cast<int>(slots.size()) < count) {
    std::shared_ptr<TaskManagerEntry> pick;
    for (auto& t : taskManagers_) {
      if (t->freeSlots() == 0) continue;
      if (!pick || (spread && t->freeSlots() > pick->freeSlots())) pick = t;
      if (!spread) break;
    }
    auto slot = std::find(pick->slotOwner.begin(), pick->slotOwner.end(), std::string());
    *slot = jobId;
    slots.push_back(pick);
  }
  return slots;
}

void JobManager::Impl::releaseSlots(const std::string& jobId) {
  std::lock_guard lock(mu_);
  for (auto& t : taskManagers_) {
    for (auto& owner : t->slotOwner) {
      if (owner == jobId) owner.clear();
    }
  }
  slotsChanged_.notify_all();
}

// ---- TaskManager calls ----------------------------------------------------------------

grpc::Status JobManager::Impl::getBlob(const rpc::BlobRequest& req, rpc::BlobResponse* resp) {
  try {
    resp->set_data(blobs_.read(req.blob_key()));
    return grpc::Status::OK;
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, e.what());
  }
}

std::shared_ptr<JobManager::Impl::JobEntry> JobManager::Impl::findJob(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second;
}

std::shared_ptr<RemoteDeployment> JobManager::Impl::currentDeployment(JobEntry& job, int attempt) {
  std::shared_ptr<RemoteDeployment> d;
  {
    std::lock_guard lock(mu_);
    d = job.deployment;
  }
  if (!d || !d->isCurrent(attempt)) return nullptr;
  return d;
}

grpc::Status JobManager::Impl::updateTaskState(const rpc::TaskStateUpdate& req) {
  auto job = findJob(req.task().job_id());
  if (!job) return notFound(req.task().job_id());
  std::shared_ptr<RemoteDeployment> d;
  {
    std::lock_guard lock(mu_);
    d = job->deployment;
  }
  if (d) d->taskUpdate(req);
  return grpc::Status::OK;
}

grpc::Status JobManager::Impl::acknowledgeCheckpoint(const rpc::AcknowledgeCheckpointRequest& req) {
  auto job = findJob(req.task().job_id());
  if (!job) return notFound(req.task().job_id());
  auto d = currentDeployment(*job, req.task().attempt());
  checkpoint::CheckpointCoordinatorGateway* gateway =
      d ? d->gatewayFor(req.task().attempt()) : nullptr;
  if (gateway == nullptr) return grpc::Status::OK;  // of an attempt that ended
  Result<checkpoint::TaskStateSnapshot> snapshot =
      checkpoint::decodeTaskStateSnapshot(req.snapshot());
  const checkpoint::TaskId task{req.task().vertex(), req.task().subtask()};
  if (!snapshot.isOk()) {
    log::error(
        "Job {}: the acknowledgement of checkpoint {} by subtask {} of vertex {} is damaged: {}",
        job->id, req.checkpoint_id(), task.subtask, task.vertex, snapshot.status().message());
    gateway->declineCheckpoint(req.checkpoint_id(), task, snapshot.status().message(), true);
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, snapshot.status().message());
  }
  gateway->acknowledgeCheckpoint(req.checkpoint_id(), task, std::move(snapshot).value());
  return grpc::Status::OK;
}

grpc::Status JobManager::Impl::declineCheckpoint(const rpc::DeclineCheckpointRequest& req) {
  auto job = findJob(req.task().job_id());
  if (!job) return notFound(req.task().job_id());
  auto d = currentDeployment(*job, req.task().attempt());
  checkpoint::CheckpointCoordinatorGateway* gateway =
      d ? d->gatewayFor(req.task().attempt()) : nullptr;
  if (gateway == nullptr) return grpc::Status::OK;
  gateway->declineCheckpoint(req.checkpoint_id(), {req.task().vertex(), req.task().subtask()},
                             req.reason(), req.counts_as_failure());
  return grpc::Status::OK;
}

grpc::Status JobManager::Impl::sourceEvent(const rpc::SourceEventRequest& req) {
  auto job = findJob(req.task().job_id());
  if (!job) return notFound(req.task().job_id());
  auto d = currentDeployment(*job, req.task().attempt());
  if (!d) return grpc::Status::OK;
  runtime::SourceCoordinatorLink* link = d->sourceFor(req.task().attempt(), req.task().vertex());
  if (link == nullptr) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        fmt::format("vertex {} has no source coordinator", req.task().vertex()));
  }
  if (req.kind() == rpc::SourceEventRequest::ADD_READER) {
    link->addReader(req.task().subtask());
  } else {
    link->requestSplit(req.task().subtask());
  }
  return grpc::Status::OK;
}

// ---- clients ---------------------------------------------------------------------------

grpc::Status JobManager::Impl::submitJob(const rpc::SubmitJobRequest& req,
                                         rpc::SubmitJobResponse* resp) {
  if (req.fingerprint() != buildFingerprint()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        fmt::format("the client runs another Sluice build [{}] than the "
                                    "JobManager [{}]",
                                    req.fingerprint(), buildFingerprint()));
  }
  Submission submission;
  submission.library = req.library();
  submission.libraryName = req.library_name();
  submission.args.assign(req.args().begin(), req.args().end());
  submission.config = fromProto(req.config(), "the submission");
  std::string id, name;
  grpc::Status st = submit(submission, &id, &name);
  if (!st.ok()) return st;
  resp->set_job_id(id);
  resp->set_job_name(name);
  return grpc::Status::OK;
}

grpc::Status JobManager::Impl::submit(const Submission& submission, std::string* jobId,
                                      std::string* jobName) {
  auto job = std::make_shared<JobEntry>();
  job->id = randomHexId();
  job->libraryName = submission.libraryName.empty() ? "job library" : submission.libraryName;
  job->args = submission.args;
  // The token is the cluster's, never a job's: the job's configuration is
  // shown over REST and handed to every TaskManager.
  for (const std::string& key : submission.config.keys()) {
    if (key == options::kRestAuthenticationToken.key) continue;
    job->submitted.setString(key, *submission.config.getString(key), submission.config.source(key));
  }
  try {
    job->blobKey = blobs_.put(submission.library);
    std::shared_ptr<JobLibrary> lib = JobLibrary::load(blobs_.path(job->blobKey));
    job->plan = capturePlan(lib->main(), job->libraryName, job->args, job->submitted);
  } catch (const std::exception& e) {
    log::error("Refused a job from {}: {}", job->libraryName, e.what());
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e.what());
  }
  job->name = job->plan.graph->jobName;
  try {
    for (const auto& v : createJobGraph(*job->plan.graph).vertices) {
      job->parallelism = std::max(job->parallelism, v.parallelism);
      job->tasks += v.parallelism;
    }
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e.what());
  }
  const Configuration& jc = job->plan.configuration;
  if (jc.get(options::kExecutionCheckpointingInterval).count() > 0 &&
      jc.get(options::kStateCheckpointsDir).empty()) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        "the job takes checkpoints (execution.checkpointing.interval) but sets no "
        "state.checkpoints.dir: on a cluster, checkpoints go to a directory every process "
        "reaches (a shared filesystem)");
  }
  job->startTimeMs = SystemClock::instance().currentTimeMillis();
  {
    std::lock_guard lock(mu_);
    // Jobs that arrive while the JobManager stops would outlive it.
    if (stop_)
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the JobManager is shutting down");
    jobs_[job->id] = job;
    jobOrder_.push_back(job->id);
  }
  log::info("Submitted job '{}' ({}) from {}", job->name, job->id, job->libraryName);
  *jobId = job->id;
  *jobName = job->name;
  job->starter = std::thread([this, job] {
    runtime::MiniClusterOptions o;
    o.configuration = job->plan.configuration;
    o.segmentSize = config_.get(options::kTaskManagerMemorySegmentSize).bytes;
    o.metricVariables["<host>"] = config_.get(options::kJobManagerRpcAddress);
    try {
      auto run = runtime::JobRun::start(
          job->plan.graph, o,
          [this, job](const std::string&, const JobGraph& jg) {
            auto d = std::make_shared<RemoteDeployment>(*this, *job, jg);
            {
              std::lock_guard lock(mu_);
              job->deployment = d;
            }
            return std::make_unique<DeploymentHandle>(std::move(d));
          },
          job->id);
      std::lock_guard lock(mu_);
      job->run = std::move(run);
      job->startDone = true;
    } catch (const std::exception& e) {
      log::error("Job '{}' ({}) could not start: {}", job->name, job->id, e.what());
      releaseSlots(job->id);
      std::lock_guard lock(mu_);
      if (job->deployment) job->deployment->close();
      job->startError = e.what();
      job->startFailedMs = SystemClock::instance().currentTimeMillis();
      job->startDone = true;
    }
  });
  return grpc::Status::OK;
}

void JobManager::Impl::fillInfo(JobEntry& job, rpc::JobInfo* info) {
  info->set_job_id(job.id);
  info->set_job_name(job.name);
  info->set_start_time_ms(job.startTimeMs);
  info->set_parallelism(job.parallelism);
  info->set_tasks(job.tasks);
  if (!job.startDone) {
    info->set_state("CREATED");
    info->set_duration_ms(SystemClock::instance().currentTimeMillis() - job.startTimeMs);
    return;
  }
  if (!job.run) {
    info->set_state("FAILED");
    info->set_error(job.startError);
    return;
  }
  JobStatus st = job.run->state();
  info->set_state(std::string(jobStatusName(st)));
  info->set_restarts(job.run->scheduler().restarts());
  info->set_duration_ms(job.run->runtimeMs());
  if (isTerminal(st)) {
    runtime::JobOutcome out = job.run->wait();
    info->set_error(out.error);
    info->set_duration_ms(out.netRuntimeMs);
    for (auto& [k, v] : out.counters) {
      rpc::KeyValue* kv = info->add_counters();
      kv->set_key(k);
      kv->set_value(std::to_string(v));
    }
  }
}

grpc::Status JobManager::Impl::listJobs(rpc::ListJobsResponse* resp) {
  std::vector<std::shared_ptr<JobEntry>> jobs;
  {
    std::lock_guard lock(mu_);
    for (auto& id : jobOrder_) jobs.push_back(jobs_.at(id));
  }
  for (auto& j : jobs) {
    std::lock_guard lock(mu_);
    fillInfo(*j, resp->add_jobs());
  }
  return grpc::Status::OK;
}

grpc::Status JobManager::Impl::getJob(const rpc::JobIdRequest& req, rpc::JobInfo* resp) {
  auto job = findJob(req.job_id());
  if (!job) return notFound(req.job_id());
  std::lock_guard lock(mu_);
  fillInfo(*job, resp);
  return grpc::Status::OK;
}

grpc::Status JobManager::Impl::cancelJob(const rpc::JobIdRequest& req) {
  auto job = findJob(req.job_id());
  if (!job) return notFound(req.job_id());
  std::shared_ptr<runtime::JobRun> run;
  {
    std::lock_guard lock(mu_);
    run = job->run;
  }
  if (!run) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        fmt::format("job {} is not running (it is still starting or failed to "
                                    "start)",
                                    req.job_id()));
  }
  if (isTerminal(run->state())) {
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        fmt::format("job {} already ended: {}", req.job_id(), jobStatusName(run->state())));
  }
  log::info("Cancelling job {} on request", req.job_id());
  run->cancel();
  return grpc::Status::OK;
}

grpc::Status JobManager::Impl::triggerSavepoint(const rpc::SavepointRequest& req,
                                                rpc::SavepointResponse* resp) {
  auto job = findJob(req.job_id());
  if (!job) return notFound(req.job_id());
  std::shared_ptr<runtime::JobRun> run;
  {
    std::lock_guard lock(mu_);
    run = job->run;
  }
  if (!run || isTerminal(run->state())) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        fmt::format("job {} is not running", req.job_id()));
  }
  try {
    resp->set_path(run->triggerSavepoint(req.target_directory(), req.stop(), req.drain()));
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::ABORTED,
                        fmt::format("the savepoint of job {} failed: {}", req.job_id(), e.what()));
  }
  return grpc::Status::OK;
}

// ---- the REST API's view (JobManagerBackend) ---------------------------------------------

JobManagerBackend::JobView JobManager::Impl::viewOf(const JobEntry& job) const {
  JobView v;
  v.id = job.id;
  v.name = job.name;
  v.startTimeMs = job.startTimeMs;
  v.endTimeMs = job.startFailedMs;
  v.graph = job.plan.graph;
  v.run = job.run;
  v.waitingForSlots = !job.startDone && job.deployment != nullptr;
  v.startError = job.startError;
  return v;
}

std::vector<JobManagerBackend::JobView> JobManager::Impl::jobViews() {
  std::lock_guard lock(mu_);
  std::vector<JobView> out;
  for (auto it = jobOrder_.rbegin(); it != jobOrder_.rend(); ++it) {
    out.push_back(viewOf(*jobs_.at(*it)));
  }
  return out;
}

std::optional<JobManagerBackend::JobView> JobManager::Impl::jobView(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return viewOf(*it->second);
}

std::vector<JobManagerBackend::TaskManagerView> JobManager::Impl::taskManagerViews() {
  const auto steadyNow = SteadyClock::now();
  const int64_t now = SystemClock::instance().currentTimeMillis();
  std::lock_guard lock(mu_);
  std::vector<TaskManagerView> out;
  for (const auto& t : taskManagers_) {
    TaskManagerView v;
    v.id = t->id;
    v.host = t->host;
    v.rpcPort = t->rpcPort;
    v.dataPort = t->dataPort;
    v.slots = t->slots;
    v.freeSlots = t->freeSlots();
    v.lastHeartbeatEpochMs =
        now -
        std::chrono::duration_cast<std::chrono::milliseconds>(steadyNow - t->lastHeartbeat).count();
    v.cpuCores = t->registration.cpu_cores();
    v.physicalMemory = t->registration.physical_memory();
    v.freeMemory = t->registration.free_memory();
    v.managedMemory = t->registration.managed_memory();
    v.networkMemory = t->registration.network_memory();
    out.push_back(std::move(v));
  }
  return out;
}

int JobManager::Impl::runningJobs() {
  std::vector<std::shared_ptr<runtime::JobRun>> runs;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, j] : jobs_) {
      if (j->run) runs.push_back(j->run);
    }
  }
  int n = 0;
  for (const auto& r : runs) n += r->state() == JobStatus::kRunning ? 1 : 0;
  return n;
}

grpc::Status JobManager::Impl::cancel(const std::string& jobId) {
  rpc::JobIdRequest req;
  req.set_job_id(jobId);
  return cancelJob(req);
}

grpc::Status JobManager::Impl::savepoint(const std::string& jobId, const std::string& directory,
                                         bool terminate, bool drain, std::string* path) {
  rpc::SavepointRequest req;
  req.set_job_id(jobId);
  req.set_target_directory(directory);
  req.set_stop(terminate);
  req.set_drain(drain);
  rpc::SavepointResponse resp;
  grpc::Status st = triggerSavepoint(req, &resp);
  if (st.ok()) *path = resp.path();
  return st;
}

// ---- JobManager --------------------------------------------------------------------------

JobManager::JobManager(Configuration config) : impl_(std::make_unique<Impl>(std::move(config))) {}
JobManager::~JobManager() = default;
int JobManager::port() const { return impl_->port(); }
void JobManager::wait() { impl_->wait(); }
void JobManager::shutdown() { impl_->shutdown(); }

}  // namespace sluice::cluster
