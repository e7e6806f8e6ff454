// Embedded mode's REST API, web UI and metric reporters: one per process,
// started with the first job whose configuration asks for them
// (rest.embedded.enabled, or rest.port set; metrics.reporter.*), serving
// every job this process ran, as Flink's local environment with the web UI.
#pragma once

#include <memory>
#include <string>

#include <sluice/core/config.h>

#include "runtime/mini_cluster.h"

namespace sluice::internal {

// Registers `run` with this process's REST endpoint and reporters, starting
// them as `config` asks. Throws SluiceException when they cannot start
// (port taken, bad TLS files, unknown reporter).
void registerEmbeddedJob(const Configuration& config, std::shared_ptr<runtime::JobRun> run);

// "http://127.0.0.1:<port>" of this process's REST endpoint; empty when it
// does not run.
std::string embeddedWebInterfaceUrl();
// The Prometheus reporter's port, -1 without one.
int embeddedPrometheusPort();

}  // namespace sluice::internal
