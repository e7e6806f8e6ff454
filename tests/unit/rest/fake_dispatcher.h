// A Dispatcher with known, fixed data for the REST endpoint's unit tests
// (web_monitor_*_test.cc): four jobs (running, finished, cancelled, failed),
// one TaskManager, a MetricStore, and actions that record what they were
// asked. savepoint() blocks until the test releases it, so a test sees the
// operation in progress first. Thread-safe: the server calls it from its own
// threads.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "rest/dispatcher.h"

namespace sluice::fake_dispatcher {

inline const std::string kJobA = "0123456789abcdef0123456789abcdef";  // RUNNING
inline const std::string kJobB = "11111111111111111111111111111111";  // FINISHED
inline const std::string kJobC = "22222222222222222222222222222222";  // CANCELED
inline const std::string kJobD = "33333333333333333333333333333333";  // FAILED
inline const std::string kV1 = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";    // A: source, p=2
inline const std::string kV2 = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";    // A: window, p=3
inline const std::string kVB = "cccccccccccccccccccccccccccccccc";    // B: only vertex
inline const std::string kTm = "tm-1";

struct SavepointCall {
  std::string jobId;
  std::string directory;
  bool terminate = false;
  bool drain = false;
};

class FakeDispatcher : public rest::Dispatcher {
 public:
  FakeDispatcher() { build(); }

  // ---- test controls ----
  std::vector<std::string> cancelCalls() {
    std::lock_guard lock(mu_);
    return cancels_;
  }
  std::vector<SavepointCall> savepointCalls() {
    std::lock_guard lock(mu_);
    return savepoints_;
  }
  // What the next savepoints return once released.
  void setSavepointResult(Result<std::string> r) {
    std::lock_guard lock(mu_);
    savepointResult_ = std::move(r);
  }
  void releaseSavepoints() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  void setSupportsJars(bool on) {
    std::lock_guard lock(mu_);
    supportsJars_ = on;
  }
  std::map<std::string, std::string> uploads() {
    std::lock_guard lock(mu_);
    return uploads_;
  }
  std::vector<std::pair<std::string, rest::JarRunRequest>> runs() {
    std::lock_guard lock(mu_);
    return runs_;
  }
  std::vector<std::string> deletes() {
    std::lock_guard lock(mu_);
    return deletes_;
  }
  int jobCalls() {
    std::lock_guard lock(mu_);
    return jobCalls_;
  }

  // The data, as the tests compute their expectations from it.
  const std::vector<rest::JobInfo>& allJobs() const { return jobs_; }
  const rest::MetricStore& store() const { return metrics_; }
  const rest::JobInfo& jobA() const { return jobs_[0]; }
  const rest::TaskManagerInfo& taskManager() const { return tms_[0]; }

  // ---- Dispatcher ----
  std::vector<rest::JobInfo> jobs() override {
    std::lock_guard lock(mu_);
    ++jobCalls_;
    return jobs_;
  }
  std::optional<rest::JobInfo> job(const std::string& id) override {
    std::lock_guard lock(mu_);
    ++jobCalls_;
    for (const auto& j : jobs_) {
      if (j.id == id) return j;
    }
    return std::nullopt;
  }
  rest::ClusterOverview overview() override { return {1, 4, 1}; }
  std::vector<rest::TaskManagerInfo> taskManagers() override { return tms_; }
  rest::MetricStore metrics() override { return metrics_; }

  Status cancel(const std::string& jobId) override {
    std::lock_guard lock(mu_);
    cancels_.push_back(jobId);
    if (jobId == kJobA) return Status::ok();
    for (const auto& j : jobs_) {
      if (j.id == jobId) return Status::invalidArgument("job " + jobId + " is already " + j.state);
    }
    return Status::notFound("no job " + jobId);
  }

  Result<std::string> savepoint(const std::string& jobId, const std::string& directory,
                                bool terminate, bool drain) override {
    std::unique_lock lock(mu_);
    savepoints_.push_back({jobId, directory, terminate, drain});
    cv_.wait(lock, [&] { return released_; });
    return savepointResult_;
  }

  bool supportsJars() const override {
    std::lock_guard lock(mu_);
    return supportsJars_;
  }
  Result<rest::JarInfo> uploadJar(const std::string& fileName, const std::string& bytes) override {
    std::lock_guard lock(mu_);
    uploads_[fileName] = bytes;
    jars_.push_back({"0f0f_" + fileName, fileName, 1700000000000});
    return jars_.back();
  }
  std::vector<rest::JarInfo> jars() override {
    std::lock_guard lock(mu_);
    return jars_;
  }
  Status deleteJar(const std::string& id) override {
    std::lock_guard lock(mu_);
    deletes_.push_back(id);
    for (auto it = jars_.begin(); it != jars_.end(); ++it) {
      if (it->id == id) {
        jars_.erase(it);
        return Status::ok();
      }
    }
    return Status::notFound("no jar " + id);
  }
  Result<std::string> runJar(const std::string& id, const rest::JarRunRequest& request) override {
    std::lock_guard lock(mu_);
    runs_.emplace_back(id, request);
    for (const auto& j : jars_) {
      if (j.id == id) return std::string("feedfacefeedfacefeedfacefeedface");
    }
    return Status::notFound("no jar " + id);
  }

 private:
  static rest::SubtaskInfo subtask(int index, const char* status, int attempt, int64_t start,
                                   int64_t end) {
    rest::SubtaskInfo s;
    s.subtask = index;
    s.status = status;
    s.attempt = attempt;
    s.host = "10.0.0.1";
    s.endpoint = "10.0.0.1:6121";
    s.taskManagerId = kTm;
    s.startTime = start;
    s.endTime = end;
    return s;
  }

  void build() {
    using rest::CheckpointInfo;
    rest::JobInfo a;
    a.id = kJobA;
    a.name = "word count";
    a.state = "RUNNING";
    a.startTime = 1000;
    a.durationMs = 5000;
    a.maxParallelism = 128;
    a.isStoppable = true;
    a.timestamps = {{"INITIALIZING", 1000}, {"CREATED", 1000}, {"RUNNING", 1100}};
    rest::VertexInfo v1;
    v1.id = kV1;
    v1.index = 0;
    v1.name = "Source: Words -> Map";
    v1.parallelism = 2;
    v1.maxParallelism = 128;
    v1.status = "RUNNING";
    v1.startTime = 1100;
    v1.operatorNames = {"Source: Words", "Map"};
    v1.subtasks = {subtask(0, "RUNNING", 0, 1100, -1), subtask(1, "RUNNING", 1, 1200, -1)};
    rest::VertexInfo v2;
    v2.id = kV2;
    v2.index = 1;
    v2.name = "Window -> Sink: Print";
    v2.parallelism = 3;
    v2.maxParallelism = 64;
    v2.status = "RUNNING";
    v2.startTime = 1150;
    v2.operatorNames = {"Window", "Sink: Print"};
    v2.inputs = {{kV1, "HASH"}};
    v2.subtasks = {subtask(0, "RUNNING", 0, 1150, -1), subtask(1, "RUNNING", 0, 1160, -1),
                   subtask(2, "FINISHED", 0, 1170, 3000)};
    a.vertices = {v1, v2};

    rest::CheckpointingInfo& c = a.checkpoints;
    c.enabled = true;
    c.mode = "exactly_once";
    c.intervalMs = 10000;
    c.timeoutMs = 600000;
    c.minPauseMs = 500;
    c.maxConcurrent = 1;
    c.externalized = true;
    c.deleteOnCancellation = false;
    c.stateBackend = "EmbeddedRocksDBStateBackend";
    c.checkpointStorage = "FileSystemCheckpointStorage";
    c.unaligned = false;
    c.tolerableFailures = 3;
    c.restoredCount = 1;
    c.completedCount = 3;
    c.failedCount = 1;
    c.inProgressCount = 1;
    auto ckpt = [](int64_t id, const char* status, bool sp, int64_t trigger, int64_t ack,
                   int64_t duration, int64_t size, int64_t align) {
      CheckpointInfo ci;
      ci.id = id;
      ci.status = status;
      ci.isSavepoint = sp;
      ci.triggerTimestamp = trigger;
      ci.latestAckTimestamp = ack;
      ci.endToEndDurationMs = duration;
      ci.checkpointedSize = size;
      ci.stateSize = size * 2;
      ci.alignmentDurationMs = align;
      ci.numSubtasks = 5;
      ci.numAcknowledgedSubtasks = std::string(status) == "COMPLETED" ? 5 : 2;
      return ci;
    };
    CheckpointInfo c5 = ckpt(5, "IN_PROGRESS", false, 50000, 50010, 10, 0, 0);
    CheckpointInfo c4 = ckpt(4, "COMPLETED", true, 40000, 40300, 300, 4000, 7);
    c4.externalPath = "file:/savepoints/savepoint-4";
    CheckpointInfo c3 = ckpt(3, "FAILED", false, 30000, 30050, 50, 0, 0);
    c3.failureMessage = "Checkpoint expired before completing.";
    c3.failureTimestamp = 30600;
    CheckpointInfo c2 = ckpt(2, "COMPLETED", false, 20000, 20200, 200, 2000, 3);
    c2.externalPath = "file:/checkpoints/chk-2";
    c2.tasks[kV1] = {2, 2, 20150, 700};
    c2.tasks[kV2] = {3, 3, 20200, 1300};
    CheckpointInfo c1 = ckpt(1, "COMPLETED", false, 10000, 10100, 100, 1000, 1);
    c1.externalPath = "file:/checkpoints/chk-1";
    c.history = {c5, c4, c3, c2, c1};
    c.restored = rest::CheckpointingInfo::Restored{7, 900, true, "file:/savepoints/sp-7"};

    auto exception = [](const char* name, const char* trace, int64_t ts, const char* task,
                        const char* loc) {
      rest::ExceptionInfo e;
      e.exceptionName = name;
      e.stacktrace = trace;
      e.timestamp = ts;
      e.taskName = task;
      e.location = loc;
      e.taskManagerId = *task ? kTm : "";
      return e;
    };
    a.exceptions = {exception("sluice::SluiceException", "Map failed: boom", 4000, "Map (2/2)",
                              "10.0.0.1:6121"),
                    exception("sluice::SluiceException", "restart budget used up", 3500, "", ""),
                    exception("sluice::SluiceException", "Sink failed: disk full", 3000,
                              "Sink: Print (1/3)", "10.0.0.1:6121")};
    a.restarts = 2;

    rest::JobInfo b;
    b.id = kJobB;
    b.name = "bounded";
    b.state = "FINISHED";
    b.startTime = 100;
    b.endTime = 900;
    b.durationMs = 800;
    b.timestamps = {{"CREATED", 100}, {"RUNNING", 150}, {"FINISHED", 900}};
    rest::VertexInfo vb;
    vb.id = kVB;
    vb.name = "Source: Numbers -> Sink: Collect";
    vb.parallelism = 1;
    vb.status = "FINISHED";
    vb.startTime = 150;
    vb.endTime = 900;
    vb.subtasks = {subtask(0, "FINISHED", 0, 150, 900)};
    b.vertices = {vb};
    b.checkpoints.enabled = false;

    rest::JobInfo cJob;
    cJob.id = kJobC;
    cJob.name = "cancelled";
    cJob.state = "CANCELED";
    rest::JobInfo d;
    d.id = kJobD;
    d.name = "failed";
    d.state = "FAILED";
    jobs_ = {a, b, cJob, d};

    rest::TaskManagerInfo tm;
    tm.id = kTm;
    tm.path = "10.0.0.1:6122";
    tm.dataPort = 6121;
    tm.timeSinceLastHeartbeat = 1700000001234;
    tm.slotsNumber = 4;
    tm.freeSlots = 1;
    tm.cpuCores = 8;
    tm.physicalMemory = int64_t{16} << 30;
    tm.freeMemory = int64_t{8} << 30;
    tm.managedMemory = int64_t{1} << 30;
    tm.networkMemory = int64_t{256} << 20;
    tms_ = {tm};

    metrics_.jobManager = {{"numRunningJobs", "1"}, {"taskSlotsTotal", "4"}};
    metrics_.jobs[kJobA] = {{"uptime", "5000"}, {"numRestarts", "2"}};
    metrics_.taskManagers[kTm] = {{"Status.Process.Memory.RSS", "104857600"},
                                  {"Status.Process.CPU.Load", "0.25"},
                                  {"Status.Flink.Memory.Managed.Used", "1000"},
                                  {"Status.Flink.Memory.Managed.Total", "2000"},
                                  {"Status.Shuffle.Netty.UsedMemory", "300"},
                                  {"Status.Shuffle.Netty.TotalMemory", "1000"},
                                  {"Status.Shuffle.Netty.AvailableMemory", "700"}};
    auto& v1m = metrics_.tasks[kJobA][kV1];
    v1m[0] = {{"numRecordsIn", "10"},
              {"numRecordsOut", "20"},
              {"numBytesIn", "100"},
              {"numBytesOut", "200"},
              {"backPressuredTimeMsPerSecond", "50"},
              {"idleTimeMsPerSecond", "100"},
              {"busyTimeMsPerSecond", "850"},
              {"currentInputWatermark", "1500"},
              {"Map.numRecordsIn", "10"}};
    v1m[1] = {{"numRecordsIn", "30"},
              {"numRecordsOut", "40"},
              {"numBytesIn", "300"},
              {"numBytesOut", "400"},
              {"backPressuredTimeMsPerSecond", "300"},
              {"idleTimeMsPerSecond", "200"},
              {"busyTimeMsPerSecond", "500"},
              {"currentInputWatermark", "1600"},
              {"Map.numRecordsIn", "30"}};
    auto& v2m = metrics_.tasks[kJobA][kV2];
    v2m[0] = {{"numRecordsIn", "7"},
              {"numRecordsOut", "1"},
              {"numBytesIn", "70"},
              {"backPressuredTimeMsPerSecond", "0"},
              {"idleTimeMsPerSecond", "900"},
              {"busyTimeMsPerSecond", "100"},
              {"status", "open"}};
    v2m[1] = {{"numRecordsIn", "13"},
              {"numRecordsOut", "2"},
              {"numBytesIn", "130"},
              {"backPressuredTimeMsPerSecond", "800"},
              {"idleTimeMsPerSecond", "0"},
              {"busyTimeMsPerSecond", "200"},
              {"status", "open"}};
    v2m[2] = {{"numRecordsIn", "20"},
              {"numBytesIn", "200"},
              {"backPressuredTimeMsPerSecond", "100"},
              {"idleTimeMsPerSecond", "400"},
              {"busyTimeMsPerSecond", "500"},
              {"currentInputWatermark", "2000"}};
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<rest::JobInfo> jobs_;
  std::vector<rest::TaskManagerInfo> tms_;
  rest::MetricStore metrics_;
  std::vector<std::string> cancels_;
  std::vector<SavepointCall> savepoints_;
  Result<std::string> savepointResult_ = std::string("file:/savepoints/savepoint-new");
  bool released_ = false;
  bool supportsJars_ = false;
  std::map<std::string, std::string> uploads_;
  std::vector<rest::JarInfo> jars_;
  std::vector<std::pair<std::string, rest::JarRunRequest>> runs_;
  std::vector<std::string> deletes_;
  int jobCalls_ = 0;
};

}  // namespace sluice::fake_dispatcher
