// What the sliced and the session window tests share: the functions their
// jobs use, a step-by-step player of one operator through
// test::OperatorRunner (straight, restored or rescaled every few steps), the
// comparison of a fast operator with the general one on the same steps, and
// a group of subtasks fed and snapshotted together for restores across
// operators and parallelisms.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/sluice.h>
#include <sluice/testing.h>

#include "harness/operator_runner.h"

namespace sluice::window_differential {

using Ev = std::pair<std::string, int64_t>;
using Out = std::tuple<std::string, int64_t, std::string>;  // key, value, window

inline const OutputTag<Ev> kLateTag("late");
inline const OutputTag<Out> kClearedTag("cleared");

inline std::string describe(const TimeWindow& w) {
  return "[" + std::to_string(w.getStart()) + "," + std::to_string(w.getEnd()) + ")";
}

class SumAggregate final : public AggregateFunction<Ev, Ev, Ev> {
 public:
  Ev createAccumulator() override { return {"", 0}; }
  Ev add(const Ev& value, Ev acc) override { return {value.first, acc.second + value.second}; }
  Ev getResult(const Ev& acc) override { return acc; }
  Ev merge(Ev a, Ev b) override {
    return {a.first.empty() ? b.first : a.first, a.second + b.second};
  }
};

// Sums, counting firings per window (window state) and per key (global
// state), and with `withWatermark` the watermark it fired at; clear()
// reports the window and its count on a side output.
class CountingProcess final : public ProcessWindowFunction<Ev, Out, std::string, TimeWindow> {
 public:
  explicit CountingProcess(bool withWatermark = false) : withWatermark_(withWatermark) {}
  void process(const std::string& key, Context& ctx, const std::vector<Ev>& elements,
               Collector<Out>& out) override {
    ValueState<int64_t>& w = ctx.windowState().getState(windowFires_);
    ValueState<int64_t>& g = ctx.globalState().getState(keyFires_);
    const int64_t wn = w.value().value_or(0) + 1;
    const int64_t gn = g.value().value_or(0) + 1;
    w.update(wn);
    g.update(gn);
    int64_t sum = 0;
    for (const Ev& e : elements) sum += e.second;
    std::string label = key + ":" + std::to_string(wn) + ":" + std::to_string(gn);
    if (withWatermark_) label += ":" + std::to_string(ctx.currentWatermark());
    out.collect(Out{std::move(label), sum, describe(ctx.window())});
  }
  void clear(Context& ctx) override {
    ValueState<int64_t>& w = ctx.windowState().getState(windowFires_);
    ctx.output(kClearedTag, Out{"cleared", w.value().value_or(0), describe(ctx.window())});
    w.clear();
  }

 private:
  bool withWatermark_;
  ValueStateDescriptor<int64_t> windowFires_{"window-fires"};
  ValueStateDescriptor<int64_t> keyFires_{"key-fires"};
};

struct Step {
  enum Kind { kElement, kWatermark, kTime, kEnd } kind = kElement;
  Ev element;
  int64_t ts = 0;  // kTime: the manual clock's new time
};

inline std::string render(const StreamRecord<Ev>& r) {
  return r.value.first + " " + std::to_string(r.value.second) +
         " ts=" + std::to_string(r.timestamp);
}
inline std::string render(const StreamRecord<Out>& r) {
  const auto& [key, value, window] = r.value;
  return key + " " + std::to_string(value) + " " + window + " ts=" + std::to_string(r.timestamp);
}

struct Run {
  std::vector<std::vector<std::string>> steps;  // per step, sorted
  int64_t dropped = 0;
  std::string error;  // what a step threw (a merge into a cleaned-up session)
};

// What the operator of `factory` emits after each step (results, late
// elements, clear() reports), run as `config` says; a step that throws ends
// the run with its error.
template <class OUT>
Run play(std::shared_ptr<const OperatorFactory> factory, test::RunConfig config,
         const std::vector<Step>& steps, int restoreEvery = 1) {
  typename test::OperatorRunner<OUT>::Options options;
  options.restoreEvery = restoreEvery;
  test::OperatorRunner<OUT> runner(std::move(factory), config, options);
  testing::CollectingOutput<Ev>& late = runner.sideOutput(kLateTag);
  testing::CollectingOutput<Out>& cleared = runner.sideOutput(kClearedTag);
  runner.open();
  Run run;
  for (const Step& s : steps) {
    try {
      switch (s.kind) {
        case Step::kElement:
          runner.element(0, s.element, s.ts, runner.keyGroupOf(s.element.first));
          break;
        case Step::kWatermark: runner.watermark(0, s.ts); break;
        case Step::kTime: runner.processingTime(s.ts); break;
        case Step::kEnd: runner.endOfInput(); break;
      }
    } catch (const SluiceException& e) {
      run.error = e.what();
      return run;
    }
    std::vector<std::string> lines;
    for (const auto& r : runner.endStep()) lines.push_back(render(r));
    for (const auto& r : late.records) lines.push_back("late " + render(r));
    for (const auto& r : cleared.records) lines.push_back(render(r));
    late.records.clear();
    cleared.records.clear();
    std::sort(lines.begin(), lines.end());
    run.steps.push_back(std::move(lines));
  }
  run.dropped = runner.counter("numLateRecordsDropped");
  runner.close();
  return run;
}

// The `fast` operator straight, and restored and rescaled after every
// `restoreEvery` steps for each of those given, against `general` straight
// through: the same lines after every step, the same numLateRecordsDropped.
template <class OUT>
void compare(const std::shared_ptr<const OperatorFactory>& general,
             const std::shared_ptr<const OperatorFactory>& fast, const std::vector<Step>& steps,
             std::initializer_list<int> restoreEvery = {1}) {
  const Run expected = play<OUT>(general, test::RunConfig::kStraight, steps);
  ASSERT_TRUE(expected.error.empty()) << expected.error;
  auto check = [&](test::RunConfig config, int every) {
    SCOPED_TRACE(every == 1 ? std::string(test::runConfigName(config))
                            : std::string(test::runConfigName(config)) + " (here: every " +
                                  std::to_string(every) + " steps)");
    const Run actual = play<OUT>(fast, config, steps, every);
    ASSERT_TRUE(actual.error.empty()) << actual.error;
    ASSERT_EQ(actual.steps.size(), expected.steps.size());
    for (size_t i = 0; i < steps.size(); ++i) {
      ASSERT_EQ(actual.steps[i], expected.steps[i])
          << "after step " << i + 1 << " of " << steps.size();
    }
    EXPECT_EQ(actual.dropped, expected.dropped) << "numLateRecordsDropped";
  };
  check(test::RunConfig::kStraight, 1);
  for (int every : restoreEvery) {
    check(test::RunConfig::kRestore, every);
    check(test::RunConfig::kRescale, every);
  }
}

template <class OUT>
using Harness = testing::OperatorHarness<OUT>;

// Subtasks of one operator at a parallelism, on hashmap, fed and
// snapshotted together.
template <class OUT>
struct Subtasks {
  std::vector<std::unique_ptr<Harness<OUT>>> harnesses;

  Subtasks(const std::shared_ptr<const OperatorFactory>& factory, int parallelism,
           const std::vector<OperatorStateRestore>* restores) {
    for (int i = 0; i < parallelism; ++i) {
      auto h = std::make_unique<Harness<OUT>>(factory->createOperator(), i, parallelism);
      h->context().config().set(options::kStateBackendType, std::string("hashmap"));
      h->open(restores ? &(*restores)[static_cast<size_t>(i)] : nullptr);
      harnesses.push_back(std::move(h));
    }
  }
  void element(const Ev& e, int64_t ts) {
    const int32_t group = assignToKeyGroup(e.first, 128);
    for (size_t i = 0; i < harnesses.size(); ++i) {
      if (computeKeyGroupRangeForOperatorIndex(128, static_cast<int32_t>(harnesses.size()),
                                               static_cast<int32_t>(i))
              .contains(group)) {
        harnesses[i]->template processElement<Ev>(0, e, ts);
      }
    }
  }
  void watermark(int64_t ts) {
    for (auto& h : harnesses) h->processWatermark(0, ts);
  }
  // An element or a watermark (the end: the last watermark).
  void step(const Step& s) {
    if (s.kind == Step::kElement) {
      element(s.element, s.ts);
    } else {
      watermark(s.kind == Step::kEnd ? kMaxTimestamp : s.ts);
    }
  }
  std::vector<std::string> take() {
    std::vector<std::string> lines;
    for (auto& h : harnesses) {
      for (const auto& r : h->output().records) lines.push_back(render(r));
      h->output().records.clear();
    }
    std::sort(lines.begin(), lines.end());
    return lines;
  }
  std::vector<testing::CapturedSnapshot> snapshot() {
    std::vector<testing::CapturedSnapshot> out;
    for (auto& h : harnesses) out.push_back(h->snapshot(1));
    return out;
  }
};

// Restores `snapshots` into `factory`'s operator at parallelism 1 and at 2
// and expects `run(restored subtasks)` to give `expected` at each.
template <class OUT, class Run, class Expected>
void expectRestoredAtOneAndTwo(const std::shared_ptr<const OperatorFactory>& factory,
                               const std::vector<testing::CapturedSnapshot>& snapshots, Run&& run,
                               const Expected& expected) {
  for (int parallelism : {1, 2}) {
    SCOPED_TRACE("restored at parallelism " + std::to_string(parallelism));
    const auto restores = testing::redistribute(snapshots, parallelism);
    Subtasks<OUT> restored(factory, parallelism, &restores);
    EXPECT_EQ(run(restored), expected);
  }
}

// What `f` threw, or "(no error)".
template <class F>
std::string errorOf(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace sluice::window_differential
