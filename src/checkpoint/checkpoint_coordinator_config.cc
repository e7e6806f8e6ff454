#include "checkpoint/checkpoint_coordinator_config.h"

#include <cctype>

#include <fmt/format.h>

#include <sluice/core/config_options.h>

#include "checkpoint/checkpoint_storage.h"

namespace sluice::checkpoint {
namespace {

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

CheckpointCoordinatorConfig CheckpointCoordinatorConfig::fromConfiguration(
    const Configuration& config) {
  namespace o = options;
  CheckpointCoordinatorConfig c;
  c.interval = config.get(o::kExecutionCheckpointingInterval);
  const std::string modeName = upper(config.get(o::kExecutionCheckpointingMode));
  if (modeName == "EXACTLY_ONCE") {
    c.mode = CheckpointingMode::kExactlyOnce;
  } else if (modeName == "AT_LEAST_ONCE") {
    c.mode = CheckpointingMode::kAtLeastOnce;
  } else {
    throw SluiceException(fmt::format(
        "execution.checkpointing.mode: unknown mode '{}'; use EXACTLY_ONCE or AT_LEAST_ONCE",
        config.get(o::kExecutionCheckpointingMode)));
  }
  c.timeout = config.get(o::kExecutionCheckpointingTimeout);
  if (c.timeout.count() <= 0) {
    throw SluiceException("execution.checkpointing.timeout must be positive");
  }
  c.minPause = config.get(o::kExecutionCheckpointingMinPause);
  if (c.minPause.count() < 0) {
    throw SluiceException("execution.checkpointing.min-pause must not be negative");
  }
  c.maxConcurrent = config.get(o::kExecutionCheckpointingMaxConcurrentCheckpoints);
  if (c.maxConcurrent < 1) {
    throw SluiceException(
        fmt::format("execution.checkpointing.max-concurrent-checkpoints must be at least 1, got {}",
                    c.maxConcurrent));
  }
  c.tolerableFailures = config.get(o::kExecutionCheckpointingTolerableFailedCheckpoints);
  if (c.tolerableFailures < 0) {
    throw SluiceException(
        "execution.checkpointing.tolerable-failed-checkpoints must not be negative");
  }
  const std::string retention =
      upper(config.get(o::kExecutionCheckpointingExternalizedCheckpointRetention));
  if (retention == "RETAIN_ON_CANCELLATION") {
    c.retainOnCancellation = true;
  } else if (retention != "DELETE_ON_CANCELLATION" && retention != "NO_EXTERNALIZED_CHECKPOINTS") {
    throw SluiceException(fmt::format(
        "execution.checkpointing.externalized-checkpoint-retention: unknown value '{}'; use "
        "DELETE_ON_CANCELLATION or RETAIN_ON_CANCELLATION",
        config.get(o::kExecutionCheckpointingExternalizedCheckpointRetention)));
  }
  c.numRetained = config.get(o::kStateCheckpointsNumRetained);
  if (c.numRetained < 1) {
    throw SluiceException(
        fmt::format("state.checkpoints.num-retained must be at least 1, got {}", c.numRetained));
  }
  c.checkpointsBase = stripFileScheme(config.get(o::kStateCheckpointsDir));
  c.savepointsBase = stripFileScheme(config.get(o::kStateSavepointsDir));
  c.ignoreUnclaimedState = config.get(o::kExecutionSavepointIgnoreUnclaimedState);
  c.incremental = config.get(o::kStateBackendIncremental);
  return c;
}

}  // namespace sluice::checkpoint
