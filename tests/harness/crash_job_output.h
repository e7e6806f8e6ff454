// What the committed output of tests/e2e/programs/crash_job.cc must be: the
// check the kill tests of embedded mode (tests/e2e) and of the cluster
// (tests/cluster) share.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "harness/checkpoint_jobs.h"

namespace sluice::test {

// Checks the committed output against the failure-free run of
// programs/crash_job.cc over `records` records: key k shows every count
// 1..n_k exactly once, and the step from one count's sum to the next is the
// index of the record that made that count: over a key, the steps (the first
// sum included) are exactly that key's record indices, each once. Which
// index comes when depends on how the two source subtasks interleave, so
// only the set is compared; key 0 holds record 0, whose step is 0, so a sum
// need not grow. Returns what is wrong, or "".
inline std::string checkCrashJobOutput(const std::filesystem::path& out, int64_t records) {
  constexpr int64_t kKeys = 97;  // as in programs/crash_job.cc: record i is (i % 97, 1, i)
  std::map<int64_t, std::pair<int64_t, int64_t>> totals;  // key -> count, sum
  for (int64_t i = 0; i < records; ++i) {
    auto& [n, s] = totals[i % kKeys];
    ++n;
    s += i;
  }
  std::ostringstream errors;
  int reported = 0;
  auto error = [&](const std::string& e) {
    if (++reported <= 20) errors << e << "\n";
  };

  const std::vector<std::string> lines = sluice::checkpointing::readFinishedLines(out);
  std::map<int64_t, std::map<int64_t, int64_t>> seen;  // key -> count -> sum
  for (const auto& line : lines) {
    int64_t k = 0, c = 0, s = 0;
    char comma1 = 0, comma2 = 0;
    std::istringstream in(line);
    if (!(in >> k >> comma1 >> c >> comma2 >> s) || comma1 != ',' || comma2 != ',' ||
        !(in >> std::ws).eof() || k < 0 || k >= kKeys) {
      error("unparsable line '" + line + "'");
      continue;
    }
    if (!seen[k].emplace(c, s).second) {
      error("duplicate count " + std::to_string(c) + " of key " + std::to_string(k) + " (line '" +
            line + "')");
    }
  }
  for (const auto& [k, total] : totals) {
    const auto& counts = seen[k];
    int64_t expect = 1;
    int64_t previousSum = 0;
    std::set<int64_t> steps;  // the record index each count added
    for (const auto& [c, s] : counts) {
      if (c != expect) {
        error("key " + std::to_string(k) + ": count " + std::to_string(expect) +
              " missing or out of range (next committed count is " + std::to_string(c) + ")");
        expect = c;
      } else {
        const int64_t step = s - previousSum;
        if (step < 0 || step >= records || step % kKeys != k || !steps.insert(step).second) {
          error("key " + std::to_string(k) + ": sum " + std::to_string(s) + " at count " +
                std::to_string(c) + " adds " + std::to_string(step) + " to the sum before it, " +
                std::to_string(previousSum) + ", which is no record of the key not yet counted");
        }
      }
      previousSum = s;
      ++expect;
    }
    if (counts.empty() || counts.rbegin()->first != total.first) {
      error("key " + std::to_string(k) + ": last committed count is " +
            (counts.empty() ? std::string("none") : std::to_string(counts.rbegin()->first)) +
            ", expected " + std::to_string(total.first));
    } else if (counts.rbegin()->second != total.second) {
      error("key " + std::to_string(k) + ": final sum " + std::to_string(counts.rbegin()->second) +
            ", expected " + std::to_string(total.second));
    }
  }
  if (static_cast<int64_t>(lines.size()) != records) {
    error(std::to_string(lines.size()) + " committed lines, expected " + std::to_string(records));
  }
  if (reported > 20) errors << "(" << reported - 20 << " more)\n";
  return errors.str();
}

}  // namespace sluice::test
