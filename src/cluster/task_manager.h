// The TaskManager (Flink's TaskExecutor): offers its slots to the
// JobManager, heartbeats, and runs the subtasks deployed to it. For each
// deployment it loads the job library from the blob store, rebuilds the
// job's graph in plan mode, restores the assigned state from the checkpoint
// directory, and runs a TaskGroup whose channels to other TaskManagers go
// through its data plane. Its tasks' metrics and its own (Status.*) are in
// the process's registry: the JobManager fetches them over RPC
// (GetMetrics) for the REST API, and the reporters configured here
// (metrics.reporter.*) serve them from this process.
//
// Thread-safe. RPCs run on gRPC's threads; one thread heartbeats (and
// registers again when the JobManager forgot this TaskManager).
#pragma once

#include <memory>
#include <string>

#include <sluice/core/config.h>

namespace sluice::cluster {

class TaskManager {
 public:
  // Listens on taskmanager.bind-host (taskmanager.rpc.port,
  // taskmanager.data.port; 0: free ports) and starts registering at the
  // JobManager. Throws SluiceException naming the address when it cannot
  // listen.
  explicit TaskManager(Configuration config);
  ~TaskManager();
  TaskManager(const TaskManager&) = delete;
  TaskManager& operator=(const TaskManager&) = delete;

  int rpcPort() const;
  int dataPort() const;
  const std::string& resourceId() const;
  void wait();
  void shutdown();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::cluster
