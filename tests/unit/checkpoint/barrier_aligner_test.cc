// The barrier aligner on its own: exactly-once alignment (blocking and
// releasing channels), at-least-once counting, overtaking barriers, end of
// partition and aborts from the coordinator; then a randomized run of
// interleaved channels checked against the exactly-once invariant.
#include "checkpoint/barrier_aligner.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace sluice::checkpoint {
namespace barrier_aligner_test {
namespace {

struct Recorder final : BarrierAligner::Actions {
  std::vector<int64_t> triggered;
  std::vector<int64_t> declined;
  std::vector<std::string> reasons;
  std::function<void(int64_t)> onTrigger;
  void triggerCheckpointOnBarrier(const CheckpointBarrier& b, const CheckpointOptions&) override {
    triggered.push_back(b.id);
    if (onTrigger) onTrigger(b.id);
  }
  void declineCheckpointOnBarrier(int64_t id, const std::string& reason) override {
    declined.push_back(id);
    reasons.push_back(reason);
  }
};

CheckpointBarrier barrier(int64_t id) { return CheckpointBarrier{id, 1000 + id}; }

std::vector<int> drainResumable(BarrierAligner& a) {
  std::vector<int> out;
  while (a.hasResumable()) out.push_back(a.takeResumable());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(BarrierAlignerTest, ExactlyOnceBlocksEachChannelUntilAllDeliveredTheBarrier) {
  Recorder r;
  BarrierAligner a(3, CheckpointingMode::kExactlyOnce, r);
  EXPECT_TRUE(a.processBarrier(0, barrier(1), {}));
  EXPECT_TRUE(a.isBlocked(0));
  EXPECT_FALSE(a.isBlocked(1));
  EXPECT_EQ(a.currentCheckpoint(), 1);
  EXPECT_TRUE(a.processBarrier(2, barrier(1), {}));
  EXPECT_TRUE(r.triggered.empty());
  EXPECT_FALSE(a.processBarrier(1, barrier(1), {}));  // the last one completes it
  EXPECT_EQ(r.triggered, std::vector<int64_t>{1});
  for (int c = 0; c < 3; ++c) EXPECT_FALSE(a.isBlocked(c));
  // Every channel that was blocked resumes (the last one is resumed too; it
  // was blocked for the instant before the alignment completed).
  EXPECT_EQ(drainResumable(a), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(a.currentCheckpoint(), -1);
  EXPECT_TRUE(r.declined.empty());
}

TEST(BarrierAlignerTest, AtLeastOnceCountsWithoutBlocking) {
  Recorder r;
  BarrierAligner a(2, CheckpointingMode::kAtLeastOnce, r);
  EXPECT_FALSE(a.processBarrier(0, barrier(1), {}));
  EXPECT_FALSE(a.isBlocked(0));
  EXPECT_TRUE(r.triggered.empty());
  EXPECT_FALSE(a.processBarrier(1, barrier(1), {}));
  EXPECT_EQ(r.triggered, std::vector<int64_t>{1});
  EXPECT_FALSE(a.hasResumable());
}

TEST(BarrierAlignerTest, AnEndedChannelCountsAsAligned) {
  Recorder r;
  BarrierAligner a(3, CheckpointingMode::kExactlyOnce, r);
  a.processEndOfPartition(2);
  a.processBarrier(0, barrier(1), {});
  EXPECT_TRUE(r.triggered.empty());
  // The last open channel ends instead of delivering the barrier.
  a.processEndOfPartition(1);
  EXPECT_EQ(r.triggered, std::vector<int64_t>{1});
  EXPECT_EQ(drainResumable(a), std::vector<int>{0});
  // A later checkpoint with one channel left completes on its barrier alone.
  a.processBarrier(0, barrier(2), {});
  EXPECT_EQ(r.triggered, (std::vector<int64_t>{1, 2}));
}

TEST(BarrierAlignerTest, ANewerBarrierOvertakesAndDeclinesTheOlderCheckpoint) {
  Recorder r;
  BarrierAligner a(2, CheckpointingMode::kAtLeastOnce, r);
  a.processBarrier(0, barrier(1), {});
  a.processBarrier(0, barrier(2), {});
  EXPECT_EQ(r.declined, std::vector<int64_t>{1});
  EXPECT_NE(r.reasons[0].find("barrier 2 arrived before checkpoint 1 was aligned"),
            std::string::npos);
  // The straggler's barrier 1 is ignored; its barrier 2 completes 2.
  a.processBarrier(1, barrier(1), {});
  EXPECT_TRUE(r.triggered.empty());
  a.processBarrier(1, barrier(2), {});
  EXPECT_EQ(r.triggered, std::vector<int64_t>{2});
}

TEST(BarrierAlignerTest, AnAbortReleasesTheAlignmentAndItsLaterBarriersAreIgnored) {
  Recorder r;
  BarrierAligner a(2, CheckpointingMode::kExactlyOnce, r);
  a.processBarrier(0, barrier(1), {});
  EXPECT_TRUE(a.isBlocked(0));
  a.abortCheckpoint(1);
  EXPECT_FALSE(a.isBlocked(0));
  EXPECT_EQ(drainResumable(a), std::vector<int>{0});
  EXPECT_FALSE(a.processBarrier(1, barrier(1), {}));
  EXPECT_TRUE(r.triggered.empty());
  EXPECT_TRUE(r.declined.empty()) << "the coordinator aborted it; nothing to decline";
  // An abort of a checkpoint not seen yet: its barriers never block.
  a.abortCheckpoint(3);
  a.processBarrier(0, barrier(2), {});
  a.processBarrier(1, barrier(2), {});
  EXPECT_EQ(r.triggered, std::vector<int64_t>{2});
  drainResumable(a);
  EXPECT_FALSE(a.processBarrier(0, barrier(3), {}));
  EXPECT_FALSE(a.isBlocked(0));
  a.processBarrier(0, barrier(4), {});
  a.processBarrier(1, barrier(3), {});
  a.processBarrier(1, barrier(4), {});
  EXPECT_EQ(r.triggered, (std::vector<int64_t>{2, 4}));
  drainResumable(a);
  // Aborting what already completed changes nothing.
  a.abortCheckpoint(4);
  EXPECT_FALSE(a.hasResumable());
}

TEST(BarrierAlignerTest, OneChannelTriggersOnEveryBarrier) {
  Recorder r;
  BarrierAligner a(1, CheckpointingMode::kExactlyOnce, r);
  for (int64_t id = 1; id <= 3; ++id) EXPECT_FALSE(a.processBarrier(0, barrier(id), {}));
  EXPECT_EQ(r.triggered, (std::vector<int64_t>{1, 2, 3}));
}

// ---- randomized --------------------------------------------------------------
//
// Channels deliver records and the barriers of checkpoints 1..K in order;
// some end early. The driver delivers from a random channel that is not
// blocked, and now and then the coordinator aborts a random checkpoint.
// Exactly-once: when checkpoint n triggers, every record delivered so far
// came before barrier n on its channel, and every open channel delivered
// barrier n; nothing deadlocks; every checkpoint is triggered, aborted, or
// was never reached. At-least-once: nothing blocks, and every checkpoint is
// triggered, declined (overtaken), aborted or never reached.

struct Event {
  enum Kind { kRecord, kBarrier, kEnd } kind;
  int64_t value = 0;  // barrier id
};

struct RandomRun {
  std::vector<std::vector<Event>> channels;
  std::vector<size_t> next;
  std::vector<int64_t> barriersDelivered;
  std::vector<int64_t> maxRecordEpoch;  // barriers before the newest delivered record
  std::vector<bool> ended;
  std::set<int64_t> reached;  // checkpoints whose barrier arrived somewhere
  std::map<int64_t, bool> abortedBeforeTrigger;
};

void runRandomized(uint32_t seed, CheckpointingMode mode) {
  std::mt19937 rng(seed);
  const int n = 1 + static_cast<int>(rng() % 5);
  const int64_t checkpoints = 1 + static_cast<int64_t>(rng() % 8);
  RandomRun run;
  run.channels.resize(static_cast<size_t>(n));
  for (auto& ch : run.channels) {
    // A channel ends after barrier `endAfter` (checkpoints: it delivers all).
    const int64_t endAfter = static_cast<int64_t>(rng() % static_cast<uint32_t>(checkpoints + 2));
    for (int64_t id = 1; id <= checkpoints; ++id) {
      for (uint32_t i = rng() % 4; i > 0; --i) ch.push_back({Event::kRecord});
      if (id > endAfter) break;
      ch.push_back({Event::kBarrier, id});
    }
    for (uint32_t i = rng() % 3; i > 0; --i) ch.push_back({Event::kRecord});
    ch.push_back({Event::kEnd});
  }
  run.next.assign(static_cast<size_t>(n), 0);
  run.barriersDelivered.assign(static_cast<size_t>(n), 0);
  run.maxRecordEpoch.assign(static_cast<size_t>(n), -1);
  run.ended.assign(static_cast<size_t>(n), false);

  Recorder r;
  BarrierAligner a(n, mode, r);
  std::set<int64_t> aborted;
  r.onTrigger = [&](int64_t id) {
    ASSERT_EQ(aborted.count(id), 0u)
        << "seed " << seed << ": aborted checkpoint " << id << " triggered";
    for (int c = 0; c < n; ++c) {
      if (!run.ended[c]) {
        ASSERT_GE(run.barriersDelivered[c], id) << "seed " << seed << ": channel " << c;
      }
      if (mode == CheckpointingMode::kExactlyOnce) {
        ASSERT_LT(run.maxRecordEpoch[c], id)
            << "seed " << seed << ": channel " << c << " delivered a record after barrier " << id
            << " before the checkpoint";
        ASSERT_LE(run.barriersDelivered[c], id) << "seed " << seed;
      }
    }
  };
  for (int step = 0;; ++step) {
    ASSERT_LT(step, 10000) << "seed " << seed;
    if (rng() % 10 == 0) {
      const int64_t id = 1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(checkpoints));
      if (std::find(r.triggered.begin(), r.triggered.end(), id) == r.triggered.end() &&
          std::find(r.declined.begin(), r.declined.end(), id) == r.declined.end()) {
        aborted.insert(id);
      }
      a.abortCheckpoint(id);
    }
    std::vector<int> ready;
    bool anyLeft = false;
    for (int c = 0; c < n; ++c) {
      if (run.next[c] >= run.channels[c].size()) continue;
      anyLeft = true;
      if (!a.isBlocked(c)) ready.push_back(c);
    }
    while (a.hasResumable()) a.takeResumable();
    if (!anyLeft) break;
    ASSERT_FALSE(ready.empty()) << "seed " << seed << ": every channel with input is blocked";
    const int c = ready[rng() % ready.size()];
    const Event e = run.channels[c][run.next[c]++];
    switch (e.kind) {
      case Event::kRecord: run.maxRecordEpoch[c] = run.barriersDelivered[c]; break;
      case Event::kBarrier:
        run.barriersDelivered[c] = e.value;
        run.reached.insert(e.value);
        a.processBarrier(c, barrier(e.value), {});
        if (mode == CheckpointingMode::kAtLeastOnce) {
          ASSERT_FALSE(a.isBlocked(c));
        }
        break;
      case Event::kEnd:
        run.ended[c] = true;
        a.processEndOfPartition(c);
        break;
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
  ASSERT_TRUE(std::is_sorted(r.triggered.begin(), r.triggered.end())) << "seed " << seed;
  std::set<int64_t> triggered(r.triggered.begin(), r.triggered.end());
  ASSERT_EQ(triggered.size(), r.triggered.size()) << "seed " << seed << ": triggered twice";
  std::set<int64_t> declined(r.declined.begin(), r.declined.end());
  if (mode == CheckpointingMode::kExactlyOnce) {
    EXPECT_TRUE(declined.empty()) << "seed " << seed << ": alignment blocks overtaking";
  }
  for (int64_t id = 1; id <= checkpoints; ++id) {
    const int outcomes = static_cast<int>(triggered.count(id) + declined.count(id) +
                                          (triggered.count(id) == 0 && aborted.count(id) != 0));
    if (run.reached.count(id) == 0) {
      EXPECT_EQ(triggered.count(id) + declined.count(id), 0u) << "seed " << seed;
      continue;
    }
    EXPECT_EQ(outcomes, 1) << "seed " << seed << ": checkpoint " << id << " triggered "
                           << triggered.count(id) << ", declined " << declined.count(id)
                           << ", aborted " << aborted.count(id);
  }
}

TEST(BarrierAlignerTest, RandomInterleavingsKeepTheExactlyOnceInvariant) {
  for (uint32_t seed = 1; seed <= 2000; ++seed) {
    runRandomized(seed, CheckpointingMode::kExactlyOnce);
    if (HasFailure()) return;
  }
}

TEST(BarrierAlignerTest, RandomInterleavingsAtLeastOnceNeverBlockAndAccountForEveryCheckpoint) {
  for (uint32_t seed = 1; seed <= 2000; ++seed) {
    runRandomized(seed, CheckpointingMode::kAtLeastOnce);
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace barrier_aligner_test
}  // namespace sluice::checkpoint
