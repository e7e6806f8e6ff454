// The user-facing metric types of include/sluice/core/metrics.h that hold
// state of their own: histogram statistics and the sliding-window histogram.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>

#include <sluice/core/metrics.h>
#include <sluice/core/status.h>

namespace sluice {

// Apache Commons Math's Percentile in its default (LEGACY) estimation, which
// Flink's DescriptiveStatisticsHistogram uses: position p * (n + 1) in the
// sorted sample (1-based), linear interpolation between the two neighbours,
// clamped to the minimum below the first value and the maximum past the last.
double HistogramStatistics::getQuantile(double q) const {
  if (values.empty()) return 0;
  if (!(q > 0)) return static_cast<double>(values.front());  // also NaN
  if (q >= 1) return static_cast<double>(values.back());
  const double n = static_cast<double>(values.size());
  const double pos = q * (n + 1);
  if (pos < 1) return static_cast<double>(values.front());
  if (pos >= n) return static_cast<double>(values.back());
  const double floorPos = std::floor(pos);
  const auto index = static_cast<size_t>(floorPos);  // 1-based position of the lower neighbour
  const double lower = static_cast<double>(values[index - 1]);
  const double upper = static_cast<double>(values[index]);
  return lower + (pos - floorPos) * (upper - lower);
}

// A ring of the last `window` values under a mutex: update() is one store,
// getStatistics() copies the ring and sorts the copy outside the lock.
struct DescriptiveStatisticsHistogram::State {
  explicit State(size_t window) : ring(window) {}
  mutable std::mutex mu;
  std::vector<int64_t> ring;
  size_t next = 0;    // slot the next value goes to
  size_t filled = 0;  // slots holding a value (<= ring.size())
  int64_t count = 0;  // values recorded in all
};

DescriptiveStatisticsHistogram::DescriptiveStatisticsHistogram(int windowSize) {
  if (windowSize <= 0) {
    throw SluiceException("DescriptiveStatisticsHistogram: the window size must be positive, got " +
                          std::to_string(windowSize));
  }
  state_ = std::make_unique<State>(static_cast<size_t>(windowSize));
}

DescriptiveStatisticsHistogram::~DescriptiveStatisticsHistogram() = default;

void DescriptiveStatisticsHistogram::update(int64_t value) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->ring[state_->next] = value;
  state_->next = (state_->next + 1) % state_->ring.size();
  state_->filled = std::min(state_->filled + 1, state_->ring.size());
  ++state_->count;
}

int64_t DescriptiveStatisticsHistogram::getCount() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->count;
}

HistogramStatistics DescriptiveStatisticsHistogram::getStatistics() const {
  HistogramStatistics stats;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    stats.values.assign(state_->ring.begin(),
                        state_->ring.begin() + static_cast<std::ptrdiff_t>(state_->filled));
  }
  std::sort(stats.values.begin(), stats.values.end());
  stats.size = static_cast<int64_t>(stats.values.size());
  if (stats.values.empty()) return stats;
  stats.min = stats.values.front();
  stats.max = stats.values.back();
  // Mean and the sample (n - 1) standard deviation, as Commons Math's
  // StandardDeviation; Welford's update keeps them exact for large values.
  double mean = 0;
  double m2 = 0;
  int64_t n = 0;
  for (int64_t v : stats.values) {
    ++n;
    const double x = static_cast<double>(v);
    const double delta = x - mean;
    mean += delta / static_cast<double>(n);
    m2 += delta * (x - mean);
  }
  stats.mean = mean;
  stats.stdDev = n > 1 ? std::sqrt(m2 / static_cast<double>(n - 1)) : 0.0;
  return stats;
}

}  // namespace sluice
