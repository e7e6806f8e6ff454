// sluice-bench --cluster: the same job (bench/programs/bench_job.cc) embedded
// at parallelism 2 and on a standalone cluster of a JobManager and two
// TaskManagers with one slot each, in one invocation, compared by records
// per CPU-second. See bench/README.md, "Cluster mode".
//
// It starts every process itself (the `sluice` binary, the job executable,
// `sluice run` with the job library) on 127.0.0.1 with ephemeral ports and a
// temporary directory, and stops by pid (SIGTERM) only the processes it
// started. Embedded and cluster runs alternate, so both see the same machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::bench {

struct ClusterBenchOptions {
  // "keyed-sum" and/or "wordcount". Default: both.
  std::vector<std::string> workloads;
  // Records per run (wordcount: words); 0 takes the workload's default
  // (keyed-sum 20M, wordcount 5M).
  int64_t records = 0;
  // Runs per mode and workload; the median is reported. Default: 3.
  int repeat = 3;
};

// Runs the comparison and prints its table to stdout (progress to stderr).
// Returns the process exit code: 0 when every run finished with the
// expected output, 1 otherwise (the message says which run and why).
int runClusterBench(const ClusterBenchOptions& options);

}  // namespace sluice::bench
