// The JobManager (Flink's Dispatcher, ResourceManager and one JobMaster per
// job, in one process): accepts job libraries from clients, keeps them in
// the blob store, registers TaskManagers and their slots, watches their
// heartbeats, and runs each job's Scheduler (runtime/scheduler.h) with a
// deployment that places the subtasks into TaskManager slots. The job's
// checkpoint coordinator runs here; tasks acknowledge to it over RPC. It
// serves Flink's REST API and the web UI on rest.bind-address:rest.port
// (cluster/rest_dispatcher.h) and runs the metric reporters it is
// configured with. With rest.authentication.token set, client calls that
// change jobs (submit, cancel, savepoint, stop) must carry the token, on
// RPC as on REST; the TaskManagers' calls need none.
//
// Thread-safe. The RPC service runs on gRPC's threads; a monitor thread
// declares TaskManagers lost after heartbeat.timeout.
#pragma once

#include <memory>
#include <string>

#include <sluice/core/config.h>

namespace sluice::cluster {

class JobManager {
 public:
  // Listens on jobmanager.bind-host:jobmanager.rpc.port (0: a free port)
  // and rest.bind-address:rest.port. Throws SluiceException naming the
  // address when it cannot.
  explicit JobManager(Configuration config);
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  int port() const;
  // Blocks until shutdown().
  void wait();
  // Cancels every job and stops serving. Any thread, also a signal watcher.
  void shutdown();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::cluster
