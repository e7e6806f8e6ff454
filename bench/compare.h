// sluice-bench --compare and --compare-workload: two builds, or two
// workloads of this build, run alternately in one invocation (see
// README.md).
#pragma once

#include <string>
#include <vector>

namespace sluice::bench {

// Runs `other` and this binary (/proc/self/exe) `rounds` times each with
// `args` (sluice-bench's own arguments, without --compare and --rounds),
// in ABBA order, and prints per row the median records per CPU-second of
// each and the median of the paired ratios. Returns the exit code.
int runCompare(const std::string& other, int rounds, const std::vector<std::string>& args);

// Runs this binary `rounds` times with `args` plus `--workload otherWorkload`
// (A) and with `args` plus `workloadArgs` (B), in ABBA order, and prints per
// B row the median records per CPU-second of it and of the A row of the
// same parallelism (or of A's parallelism-1 row when A has no such row, as
// the hand-written baselines run at 1 only), and the median of the paired
// ratios. Returns the exit code.
int runCompareWorkloads(const std::string& otherWorkload, int rounds,
                        const std::vector<std::string>& args,
                        const std::vector<std::string>& workloadArgs);

}  // namespace sluice::bench
