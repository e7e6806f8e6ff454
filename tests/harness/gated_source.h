// A generator source that a test opens step by step, so that checkpoints
// fall where the test says instead of where a wall-clock interval happens
// to put them.
//
//   auto gate = std::make_shared<SourceGate>();
//   env.fromSource(GatedGeneratorSource(gate, input, count), "Generator Source")
//   ...
//   JobClient client = env.executeAsync("job");
//   for (int step = 1; step <= steps; ++step) {
//     gate->open(step * chunk);        // each split may emit `chunk` more
//     client.triggerCheckpoint();      // a checkpoint inside that chunk
//   }
//   gate->openFully();                 // let the bounded job finish
//
// The gate counts per split, from the split's first index: open(n) lets
// every split emit its first n records. A reader at its gate never sleeps:
// it asks for a wakeup 1 ms later and returns, so barriers, timers and
// cancellation reach the task as usual. After a restore the split carries
// its position, so a restarted reader re-emits only what came after the
// checkpoint, up to the same gate.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <thread>
#include <type_traits>

#include <sluice/environment.h>
#include <sluice/sources.h>

#include "harness/wait.h"

namespace sluice::test {

class SourceGate {
 public:
  static constexpr int64_t kOpen = std::numeric_limits<int64_t>::max();

  // Lets every split emit its first `perSplit` records (never closes again).
  void open(int64_t perSplit) {
    int64_t cur = allowed_.load();
    while (perSplit > cur && !allowed_.compare_exchange_weak(cur, perSplit)) {
    }
  }
  void openFully() { allowed_.store(kOpen); }
  int64_t allowed() const { return allowed_.load(std::memory_order_acquire); }

  // Records emitted through the gate so far, over all readers and attempts.
  int64_t emitted() const { return emitted_.load(); }
  void countEmitted(int64_t n) { emitted_.fetch_add(n); }

 private:
  std::atomic<int64_t> allowed_{0};
  std::atomic<int64_t> emitted_{0};
};

// generator(index) for index 0..count-1, cut over the subtasks like
// GeneratorSource, each split held at its gate. Bounded.
template <class T, class F>
class GatedGeneratorSource final : public Source<T, NumberSequenceSplit> {
 public:
  GatedGeneratorSource(std::shared_ptr<SourceGate> gate, F generator, int64_t count)
      : gate_(std::move(gate)), generator_(std::move(generator)), count_(count) {}

  Boundedness getBoundedness() const override { return Boundedness::kBounded; }

  std::unique_ptr<SplitEnumerator<NumberSequenceSplit>> createEnumerator(
      SplitEnumeratorContext<NumberSequenceSplit>& context) const override {
    return internal::indexRangeEnumerator(context, count_);
  }
  std::unique_ptr<SourceReader<T, NumberSequenceSplit>> createReader(
      SourceReaderContext& context) const override {
    return internal::makeOwned<Reader>(context, gate_, generator_);
  }
  std::unique_ptr<SplitEnumerator<NumberSequenceSplit>> restoreEnumerator(
      SplitEnumeratorContext<NumberSequenceSplit>& context,
      std::vector<NumberSequenceSplit> unassigned) const override {
    return internal::makeOwned<internal::QueueSplitEnumerator<NumberSequenceSplit>>(
        context, std::move(unassigned));
  }

 private:
  class Reader final : public internal::QueuedSplitReader<T, NumberSequenceSplit> {
    using Base = internal::QueuedSplitReader<T, NumberSequenceSplit>;
    using Step = typename Base::Step;

   public:
    Reader(SourceReaderContext& context, std::shared_ptr<SourceGate> gate, F generator)
        : Base(context), gate_(std::move(gate)), generator_(std::move(generator)) {}

   private:
    Step readSplit(NumberSequenceSplit& split, ReaderOutput<T>& output, int& budget) override {
      const int64_t allowed = gate_->allowed();
      const int64_t done = split.next - split.from;
      if (done >= allowed) {
        this->context_.requestWakeupAt(std::chrono::steady_clock::now() +
                                       std::chrono::milliseconds(1));
        return Step::kBlocked;
      }
      int quota = static_cast<int>(std::min<int64_t>(budget, allowed - done));
      const int before = quota;
      const bool finished = internal::emitSequence(
          split, quota, [&](int64_t index) { output.collect(generator_(index)); });
      budget -= before - quota;
      gate_->countEmitted(before - quota);
      return finished ? Step::kFinished : Step::kContinues;
    }

    std::shared_ptr<SourceGate> gate_;
    F generator_;
  };

  std::shared_ptr<SourceGate> gate_;
  F generator_;
  int64_t count_;
};

template <class F>
GatedGeneratorSource(std::shared_ptr<SourceGate>, F, int64_t)
    -> GatedGeneratorSource<std::decay_t<std::invoke_result_t<F&, int64_t>>, F>;

// The records all splits together emit with the gate at `perSplit`, for a
// source of `count` records cut over `parallelism` splits.
inline int64_t recordsThroughGate(int64_t count, int parallelism, int64_t perSplit) {
  if (count == 0) return 0;
  int64_t total = 0;
  for (const NumberSequenceSplit& s : internal::splitNumberRange(0, count - 1, parallelism)) {
    total += std::min(perSplit, s.to - s.from + 1);
  }
  return total;
}

// Opens `gate` to `perSplit`, waits until the sources have emitted
// `expected` records in all (recordsThroughGate; re-emitted records after a
// restore count too) and takes a checkpoint, trying again while a restart is
// under way or a fault declined it. Returns the checkpoint's id, or -1 when
// the job ended first.
inline int64_t checkpointAtGate(JobClient& client, SourceGate& gate, int64_t perSplit,
                                int64_t expected) {
  gate.open(perSplit);
  waitUntil([&] { return gate.emitted() >= expected || isTerminal(client.getJobStatus()); });
  int64_t id = -1;
  waitUntil([&] {
    if (isTerminal(client.getJobStatus())) return true;
    try {
      id = client.triggerCheckpoint();
      return true;
    } catch (const SluiceException&) {
      return false;  // declined by a fault, or the job is restarting
    }
  });
  return id;
}

}  // namespace sluice::test
