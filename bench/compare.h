// sluice-bench --compare: this build against another, alternately, in one
// invocation (see README.md).
#pragma once

#include <string>
#include <vector>

namespace sluice::bench {

// Runs `other` and this binary (/proc/self/exe) `rounds` times each with
// `args` (sluice-bench's own arguments, without --compare and --rounds),
// in ABBA order, and prints per row the median records per CPU-second of
// each and the median of the paired ratios. Returns the exit code.
int runCompare(const std::string& other, int rounds, const std::vector<std::string>& args);

}  // namespace sluice::bench
