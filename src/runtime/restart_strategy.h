// Restart strategies: whether and when a failed job restarts (Flink's
// restart-strategy.* keys: none, fixed-delay, failure-rate,
// exponential-delay). The scheduler asks onFailure() once per failure.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <sluice/core/config.h>

namespace sluice::runtime {

class RestartStrategy {
 public:
  virtual ~RestartStrategy() = default;
  // Called once per failure at `now`: the delay before the restart, or
  // nullopt when the job must fail.
  virtual std::optional<std::chrono::milliseconds> onFailure(
      std::chrono::steady_clock::time_point now) = 0;
  virtual std::string describe() const = 0;
};

// From restart-strategy.type and its parameters; `checkpointingEnabled`
// decides the default as Flink does. Throws SluiceException for an unknown
// type or a bad parameter, naming the key.
std::unique_ptr<RestartStrategy> createRestartStrategy(const Configuration& config,
                                                       bool checkpointingEnabled);

}  // namespace sluice::runtime
