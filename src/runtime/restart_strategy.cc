#include "runtime/restart_strategy.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>
#include <vector>

#include <fmt/format.h>

#include <sluice/core/config_options.h>

namespace sluice::runtime {

namespace {

using Millis = std::chrono::milliseconds;
using TimePoint = std::chrono::steady_clock::time_point;

class NoRestart final : public RestartStrategy {
 public:
  std::optional<Millis> onFailure(TimePoint) override { return std::nullopt; }
  std::string describe() const override { return "NoRestartStrategy"; }
};

class FixedDelayRestart final : public RestartStrategy {
 public:
  FixedDelayRestart(int64_t attempts, Millis delay) : attempts_(attempts), delay_(delay) {}
  std::optional<Millis> onFailure(TimePoint) override {
    if (done_ >= attempts_) return std::nullopt;
    ++done_;
    return delay_;
  }
  std::string describe() const override {
    return fmt::format("FixedDelayRestartStrategy(maxNumberRestartAttempts={}, delay={} ms)",
                       attempts_, delay_.count());
  }

 private:
  int64_t attempts_;
  Millis delay_;
  int64_t done_ = 0;
};

class FailureRateRestart final : public RestartStrategy {
 public:
  FailureRateRestart(int maxFailures, Millis interval, Millis delay)
      : maxFailures_(maxFailures), interval_(interval), delay_(delay) {}
  std::optional<Millis> onFailure(TimePoint now) override {
    failures_.push_back(now);
    while (!failures_.empty() && now - failures_.front() > interval_) {
      failures_.erase(failures_.begin());
    }
    if (static_cast<int>(failures_.size()) > maxFailures_) return std::nullopt;
    return delay_;
  }
  std::string describe() const override {
    return fmt::format(
        "FailureRateRestartStrategy(maxFailuresPerInterval={}, failureRateInterval={} ms, "
        "delay={} ms)",
        maxFailures_, interval_.count(), delay_.count());
  }

 private:
  int maxFailures_;
  Millis interval_;
  Millis delay_;
  std::vector<TimePoint> failures_;
};

class ExponentialDelayRestart final : public RestartStrategy {
 public:
  ExponentialDelayRestart(Millis initial, Millis max, double multiplier, Millis resetThreshold,
                          double jitter, int64_t attempts)
      : initial_(initial),
        max_(max),
        multiplier_(multiplier),
        resetThreshold_(resetThreshold),
        jitter_(jitter),
        attempts_(attempts),
        gen_(std::random_device{}()) {}
  std::optional<Millis> onFailure(TimePoint now) override {
    if (last_ && now - *last_ >= resetThreshold_) {
      current_ = Millis{0};
      done_ = 0;
    }
    last_ = now;
    if (done_ >= attempts_) return std::nullopt;
    ++done_;
    current_ = current_.count() == 0 ? initial_
                                     : Millis{static_cast<int64_t>(std::min<double>(
                                           static_cast<double>(current_.count()) * multiplier_,
                                           static_cast<double>(max_.count())))};
    double wait = static_cast<double>(current_.count());
    if (jitter_ > 0) {
      std::uniform_real_distribution<double> d(-jitter_, jitter_);
      wait *= 1 + d(gen_);
    }
    return Millis{static_cast<int64_t>(std::max(0.0, std::round(wait)))};
  }
  std::string describe() const override {
    return fmt::format(
        "ExponentialDelayRestartBackoffTimeStrategy(initialBackoff={} ms, maxBackoff={} ms, "
        "backoffMultiplier={}, resetBackoffThreshold={} ms, jitterFactor={}, attempts={})",
        initial_.count(), max_.count(), multiplier_, resetThreshold_.count(), jitter_, attempts_);
  }

 private:
  Millis initial_, max_;
  double multiplier_;
  Millis resetThreshold_;
  double jitter_;
  int64_t attempts_;
  Millis current_{0};
  int64_t done_ = 0;
  std::optional<TimePoint> last_;
  std::mt19937 gen_;
};

Millis nonNegative(const Configuration& config,
                   const ConfigOption<std::chrono::milliseconds>& option) {
  Millis v = config.get(option);
  if (v.count() < 0) {
    throw SluiceException(fmt::format("{} must not be negative, got {} ms", option.key, v.count()));
  }
  return v;
}

}  // namespace

std::unique_ptr<RestartStrategy> createRestartStrategy(const Configuration& config,
                                                       bool checkpointingEnabled) {
  namespace o = options;
  std::string type = config.get(o::kRestartStrategyType);
  for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const bool unset = type.empty();
  if (unset) type = checkpointingEnabled ? "fixed-delay" : "none";
  if (type == "none" || type == "off" || type == "disable") return std::make_unique<NoRestart>();
  if (type == "fixed-delay" || type == "fixeddelay") {
    // Flink: with checkpointing and no strategy configured, restart forever.
    int64_t attempts =
        unset ? int64_t{2147483647} : config.get(o::kRestartStrategyFixedDelayAttempts);
    if (attempts < 0) {
      throw SluiceException(fmt::format("{} must not be negative, got {}",
                                        o::kRestartStrategyFixedDelayAttempts.key, attempts));
    }
    return std::make_unique<FixedDelayRestart>(
        attempts, nonNegative(config, o::kRestartStrategyFixedDelayDelay));
  }
  if (type == "failure-rate" || type == "failurerate") {
    int maxFailures = config.get(o::kRestartStrategyFailureRateMaxFailuresPerInterval);
    if (maxFailures < 1) {
      throw SluiceException(fmt::format("{} must be at least 1, got {}",
                                        o::kRestartStrategyFailureRateMaxFailuresPerInterval.key,
                                        maxFailures));
    }
    return std::make_unique<FailureRateRestart>(
        maxFailures, nonNegative(config, o::kRestartStrategyFailureRateFailureRateInterval),
        nonNegative(config, o::kRestartStrategyFailureRateDelay));
  }
  if (type == "exponential-delay" || type == "exponentialdelay") {
    double multiplier = config.get(o::kRestartStrategyExponentialDelayBackoffMultiplier);
    if (!(multiplier >= 1)) {
      throw SluiceException(fmt::format("{} must be at least 1, got {}",
                                        o::kRestartStrategyExponentialDelayBackoffMultiplier.key,
                                        multiplier));
    }
    double jitter = config.get(o::kRestartStrategyExponentialDelayJitterFactor);
    if (!(jitter >= 0 && jitter <= 1)) {
      throw SluiceException(fmt::format("{} must be in [0, 1], got {}",
                                        o::kRestartStrategyExponentialDelayJitterFactor.key,
                                        jitter));
    }
    int64_t attempts = config.get(o::kRestartStrategyExponentialDelayAttemptsBeforeResetBackoff);
    if (attempts < 0) {
      throw SluiceException(
          fmt::format("{} must not be negative, got {}",
                      o::kRestartStrategyExponentialDelayAttemptsBeforeResetBackoff.key, attempts));
    }
    return std::make_unique<ExponentialDelayRestart>(
        nonNegative(config, o::kRestartStrategyExponentialDelayInitialBackoff),
        nonNegative(config, o::kRestartStrategyExponentialDelayMaxBackoff), multiplier,
        nonNegative(config, o::kRestartStrategyExponentialDelayResetBackoffThreshold), jitter,
        attempts);
  }
  throw SluiceException(
      fmt::format("restart-strategy.type: unknown strategy '{}'; use fixed-delay, failure-rate, "
                  "exponential-delay or none",
                  config.get(o::kRestartStrategyType)));
}

}  // namespace sluice::runtime
