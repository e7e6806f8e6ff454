// The restart strategies (restart-strategy.*): when a failed job restarts
// and after which delay, computed at given times without waiting.
#include "runtime/restart_strategy.h"

#include <gtest/gtest.h>

#include <sluice/core/config.h>

namespace sluice::runtime {
namespace restart_strategy_test {
namespace {

using std::chrono::milliseconds;
using TP = std::chrono::steady_clock::time_point;

TEST(RestartStrategyTest, DefaultIsNoneWithoutCheckpointingAndEndlessFixedDelayWith) {
  Configuration config;
  auto none = createRestartStrategy(config, false);
  EXPECT_FALSE(none->onFailure(TP{}).has_value());
  auto fixed = createRestartStrategy(config, true);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(fixed->onFailure(TP{}), milliseconds(1000));
  EXPECT_NE(fixed->describe().find("2147483647"), std::string::npos);
}

TEST(RestartStrategyTest, FixedDelayAllowsExactlyItsAttempts) {
  Configuration config;
  config.setString("restart-strategy.type", "fixed-delay");
  config.setString("restart-strategy.fixed-delay.attempts", "3");
  config.setString("restart-strategy.fixed-delay.delay", "25 ms");
  auto s = createRestartStrategy(config, false);
  EXPECT_EQ(s->onFailure(TP{}), milliseconds(25));
  EXPECT_EQ(s->onFailure(TP{}), milliseconds(25));
  EXPECT_EQ(s->onFailure(TP{}), milliseconds(25));
  EXPECT_FALSE(s->onFailure(TP{}).has_value());
}

TEST(RestartStrategyTest, FailureRateCountsFailuresInTheInterval) {
  Configuration config;
  config.setString("restart-strategy.type", "failure-rate");
  config.setString("restart-strategy.failure-rate.max-failures-per-interval", "2");
  config.setString("restart-strategy.failure-rate.failure-rate-interval", "10 s");
  config.setString("restart-strategy.failure-rate.delay", "0 ms");
  auto s = createRestartStrategy(config, true);
  TP t0{};
  EXPECT_TRUE(s->onFailure(t0).has_value());
  EXPECT_TRUE(s->onFailure(t0 + std::chrono::seconds(1)).has_value());
  // A third failure within 10 s of the first two: give up.
  EXPECT_FALSE(s->onFailure(t0 + std::chrono::seconds(2)).has_value());
  auto s2 = createRestartStrategy(config, true);
  EXPECT_TRUE(s2->onFailure(t0).has_value());
  EXPECT_TRUE(s2->onFailure(t0 + std::chrono::seconds(5)).has_value());
  // The first one left the window.
  EXPECT_TRUE(s2->onFailure(t0 + std::chrono::seconds(12)).has_value());
}

TEST(RestartStrategyTest, ExponentialDelayGrowsCapsAndResets) {
  Configuration config;
  config.setString("restart-strategy.type", "exponential-delay");
  config.setString("restart-strategy.exponential-delay.initial-backoff", "100 ms");
  config.setString("restart-strategy.exponential-delay.max-backoff", "1 s");
  config.setString("restart-strategy.exponential-delay.backoff-multiplier", "2.0");
  config.setString("restart-strategy.exponential-delay.reset-backoff-threshold", "1 min");
  config.setString("restart-strategy.exponential-delay.jitter-factor", "0");
  auto s = createRestartStrategy(config, false);
  TP t{};
  std::vector<int64_t> waits;
  for (int i = 0; i < 6; ++i) waits.push_back(s->onFailure(t += std::chrono::seconds(1))->count());
  EXPECT_EQ(waits, (std::vector<int64_t>{100, 200, 400, 800, 1000, 1000}));
  // Quiet for longer than the threshold: back to the initial backoff.
  EXPECT_EQ(s->onFailure(t + std::chrono::minutes(2)), milliseconds(100));
}

TEST(RestartStrategyTest, JitterStaysWithinItsFactor) {
  Configuration config;
  config.setString("restart-strategy.type", "exponential-delay");
  config.setString("restart-strategy.exponential-delay.initial-backoff", "1000 ms");
  config.setString("restart-strategy.exponential-delay.backoff-multiplier", "1.0");
  config.setString("restart-strategy.exponential-delay.jitter-factor", "0.1");
  auto s = createRestartStrategy(config, false);
  for (int i = 0; i < 50; ++i) {
    auto w = s->onFailure(TP{} + std::chrono::seconds(i))->count();
    EXPECT_GE(w, 900);
    EXPECT_LE(w, 1100);
  }
}

TEST(RestartStrategyTest, BadSettingsNameTheKey) {
  Configuration config;
  config.setString("restart-strategy.type", "sometimes");
  try {
    createRestartStrategy(config, false);
    FAIL();
  } catch (const SluiceException& e) {
    EXPECT_NE(std::string(e.what()).find("restart-strategy.type"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("sometimes"), std::string::npos);
  }
  Configuration c2;
  c2.setString("restart-strategy.type", "fixed-delay");
  c2.setString("restart-strategy.fixed-delay.attempts", "-1");
  try {
    createRestartStrategy(c2, false);
    FAIL();
  } catch (const SluiceException& e) {
    EXPECT_NE(std::string(e.what()).find("restart-strategy.fixed-delay.attempts"),
              std::string::npos);
  }
  Configuration c3;
  c3.setString("restart-strategy.type", "exponential-delay");
  c3.setString("restart-strategy.exponential-delay.backoff-multiplier", "0.5");
  EXPECT_THROW(createRestartStrategy(c3, false), SluiceException);
}

}  // namespace
}  // namespace restart_strategy_test
}  // namespace sluice::runtime
