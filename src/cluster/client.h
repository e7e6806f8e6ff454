// The cluster client: what `sluice run/list/cancel/savepoint/stop` and
// execute() with execution.target: remote do, over the JobManager's RPC.
// Every function throws SluiceException with a message for the user
// ("cannot reach the JobManager at localhost:6123: ...", "no job with id
// ...").
#pragma once

#include <string>
#include <vector>

#include <sluice/core/config.h>

#include "cluster.pb.h"

namespace sluice::cluster {

class ClusterClient {
 public:
  // `address` is host:port of the JobManager's RPC endpoint. A non-empty
  // `token` (rest.authentication.token) goes with every call as
  // "authorization: Bearer <token>".
  explicit ClusterClient(std::string address, std::string token = "");
  ~ClusterClient();

  // Uploads the job library and starts the job; returns its id. The token
  // is never part of the configuration sent.
  rpc::SubmitJobResponse submit(const std::string& libraryPath,
                                const std::vector<std::string>& args, const Configuration& config);
  rpc::JobInfo job(const std::string& jobId);
  std::vector<rpc::JobInfo> list();
  void cancel(const std::string& jobId);
  // Returns the savepoint's path.
  std::string savepoint(const std::string& jobId, const std::string& directory, bool stop,
                        bool drain);
  // Polls until the job is in a terminal state (FINISHED, FAILED, CANCELED).
  rpc::JobInfo waitForEnd(const std::string& jobId);

  const std::string& address() const { return address_; }

 private:
  struct Stub;
  std::string address_;
  std::string token_;
  std::unique_ptr<Stub> stub_;
};

// host:port of the JobManager from -m or the configuration.
std::string jobManagerAddress(const Configuration& config);
// A client of the JobManager `config` names, with its token.
ClusterClient clientFor(const Configuration& config);

// Makes execute() with execution.target: remote submit the job library
// `libraryPath` (the library sluice_add_job builds next to the executable)
// with the program's arguments.
void installRemoteExecutor(std::string libraryPath, std::vector<std::string> args);

}  // namespace sluice::cluster
