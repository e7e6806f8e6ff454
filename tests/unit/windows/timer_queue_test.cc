// window::TimerQueue against a reference model: an ordered set of (timestamp,
// bytes) per domain. Random adds (duplicates included), removals, watermark
// advances and processing-time moves, with short timers (stored inline) and
// long ones (over 32 bytes, stored on the heap), timers registered and
// removed while firing, and a snapshot restored into a fresh queue halfway:
// every timer fires exactly once, in (timestamp, bytes) order, and sizes and
// snapshots agree with the model throughout. Snapshots written later
// (snapshotLater) hold the timers of the moment they were taken.
#include <cstdint>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/testing.h>
#include <sluice/window/timer_queue.h>

namespace timer_queue_test {
namespace {

using namespace sluice;
using Model = std::set<std::pair<int64_t, std::string>>;

int32_t keyGroupOfFirstByte(const void* context) {
  const auto* bytes = static_cast<const std::string*>(context);
  return bytes->empty() ? 0 : static_cast<uint8_t>((*bytes)[0]) % 128;
}

// A queue with its own context (processing-time timers are armed there),
// and the model.
struct Harness {
  explicit Harness(int64_t now) {
    context.setProcessingTime(now);
    queue.init(
        context, [this](int64_t ts, std::string_view b) { fired(event, ts, b); },
        [this](int64_t ts, std::string_view b) { fired(processing, ts, b); });
  }
  // A fired timer must be the model's first; while firing, sometimes add a
  // due timer or remove another.
  void fired(Model& model, int64_t ts, std::string_view bytes) {
    ASSERT_FALSE(model.empty()) << "a timer fired that the model does not have";
    const auto first = *model.begin();
    ASSERT_EQ(first, std::make_pair(ts, std::string(bytes))) << "fired out of order";
    model.erase(model.begin());
    firedCount++;
    if (&model == &event && onFire) onFire(ts);
  }
  void add(TimeDomain d, int64_t ts, const std::string& bytes) {
    Model& m = d == TimeDomain::EVENT_TIME ? event : processing;
    const bool added = queue.add(d, ts, bytes, keyGroupOfFirstByte, &bytes);
    EXPECT_EQ(added, m.emplace(ts, bytes).second) << "add() must say whether the timer is new";
  }
  void remove(TimeDomain d, int64_t ts, const std::string& bytes) {
    Model& m = d == TimeDomain::EVENT_TIME ? event : processing;
    queue.remove(d, ts, bytes);
    m.erase({ts, bytes});
  }
  void expectSameAsModel() {
    ASSERT_EQ(queue.size(TimeDomain::EVENT_TIME), event.size());
    ASSERT_EQ(queue.size(TimeDomain::PROCESSING_TIME), processing.size());
    Model seen;
    queue.forEach(TimeDomain::EVENT_TIME, [&](int64_t ts, std::string_view b) {
      EXPECT_TRUE(seen.empty() || *seen.rbegin() < std::make_pair(ts, std::string(b)))
          << "forEach visits in firing order";
      seen.emplace(ts, std::string(b));
    });
    EXPECT_EQ(seen, event);
  }

  sluice::testing::HarnessOperatorContext context{"timers", 0, 1, 128};
  window::TimerQueue queue;
  Model event;
  Model processing;
  int64_t firedCount = 0;
  std::function<void(int64_t)> onFire;
};

std::string randomBytes(std::mt19937& rng) {
  // Mostly short (inline), some long (heap), some sharing a 16-byte prefix
  // so that order falls to the remaining bytes.
  const uint32_t kind = rng() % 10;
  size_t n = kind < 6 ? 8 + rng() % 17 : kind < 8 ? 33 + rng() % 40 : 20;
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(rng() % 4);
  if (kind >= 8) s.replace(0, 16, std::string(16, 'p'));
  return s;
}

TEST(TimerQueueTest, MatchesAnOrderedSetUnderRandomAddsRemovesAndFiring) {
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto h = std::make_unique<Harness>(0);
    std::mt19937 rng(seed);
    std::vector<std::pair<int64_t, std::string>> known;
    int64_t watermark = 0;
    int64_t now = 0;
    h->onFire = [&](int64_t ts) {
      // Timers registered while firing that are due fire in the same pass;
      // removals of other timers take effect at once.
      if (rng() % 5 == 0) h->add(TimeDomain::EVENT_TIME, ts, randomBytes(rng));
      if (rng() % 5 == 0 && !known.empty()) {
        const auto& k = known[rng() % known.size()];
        h->remove(TimeDomain::EVENT_TIME, k.first, k.second);
      }
    };
    for (int step = 0; step < 6000; ++step) {
      const uint32_t op = rng() % 100;
      const TimeDomain d = rng() % 4 == 0 ? TimeDomain::PROCESSING_TIME : TimeDomain::EVENT_TIME;
      const int64_t base = d == TimeDomain::EVENT_TIME ? watermark : now;
      if (op < 55) {
        const int64_t ts = base + 1 + static_cast<int64_t>(rng() % 50);
        std::string bytes = randomBytes(rng);
        h->add(d, ts, bytes);
        known.emplace_back(ts, std::move(bytes));
      } else if (op < 65 && !known.empty()) {
        const auto& k = known[rng() % known.size()];
        h->add(d, k.first, k.second);  // most likely a duplicate
      } else if (op < 80 && !known.empty()) {
        const auto& k = known[rng() % known.size()];
        h->remove(d, k.first, k.second);
      } else if (op < 90) {
        watermark += static_cast<int64_t>(rng() % 20);
        h->queue.advanceWatermark(watermark);
        ASSERT_TRUE(h->event.empty() || h->event.begin()->first > watermark);
      } else if (op < 97) {
        now += static_cast<int64_t>(rng() % 20);
        h->context.setProcessingTime(now);
        ASSERT_TRUE(h->processing.empty() || h->processing.begin()->first > now);
      } else {
        // Restore a snapshot into a fresh queue and carry on with it.
        const std::string snap = h->queue.snapshot();
        auto fresh = std::make_unique<Harness>(now);
        fresh->event = h->event;
        fresh->processing = h->processing;
        fresh->firedCount = h->firedCount;
        fresh->onFire = h->onFire;
        fresh->queue.restore(snap, KeyGroupRange{0, 127});
        ASSERT_EQ(fresh->queue.snapshot(), snap) << "a restored queue snapshots the same";
        h = std::move(fresh);
        // Timers re-registered in the past fire at the next watermark.
        h->queue.advanceWatermark(watermark);
      }
      if (step % 500 == 0) h->expectSameAsModel();
    }
    h->queue.advanceWatermark(kMaxTimestamp);
    EXPECT_TRUE(h->event.empty());
    EXPECT_GT(h->firedCount, 1000);
    h->expectSameAsModel();
  }
}

// A job that keeps moving a timer (delete the old, register a later one, the
// inactivity-timeout pattern) and removes most of what it registered: the
// removed timers never fire, the rest fire in order, and what is left after
// each phase is exactly what the model holds.
TEST(TimerQueueTest, ManyRemovalsThenFiringKeepOrderAndCount) {
  Harness h(0);
  std::mt19937 rng(9);
  for (int round = 0; round < 5; ++round) {
    std::string key = "moving-" + std::to_string(round);
    for (int64_t t = 1000; t < 5000; ++t) {
      h.add(TimeDomain::EVENT_TIME, t + 100000, key);
      h.remove(TimeDomain::EVENT_TIME, t + 100000, key);
    }
    h.add(TimeDomain::EVENT_TIME, 200000 + round, key);
    std::vector<std::pair<int64_t, std::string>> added;
    for (int i = 0; i < 2000; ++i) {
      std::string bytes = randomBytes(rng);
      const int64_t ts = 1 + static_cast<int64_t>(rng() % 5000);
      h.add(TimeDomain::EVENT_TIME, ts, bytes);
      added.emplace_back(ts, bytes);
    }
    for (size_t i = 0; i < added.size(); ++i) {
      if (i % 10 != 0) h.remove(TimeDomain::EVENT_TIME, added[i].first, added[i].second);
    }
    h.expectSameAsModel();
  }
  h.queue.advanceWatermark(kMaxTimestamp);
  EXPECT_TRUE(h.event.empty());
  EXPECT_EQ(h.queue.size(TimeDomain::EVENT_TIME), 0u);
}

// A restore keeps exactly the timers of its key-group range.
TEST(TimerQueueTest, RestoreKeepsTheTimersOfItsKeyGroups) {
  sluice::testing::HarnessOperatorContext context("timers", 0, 1, 128);
  window::TimerQueue all;
  all.init(
      context, [](int64_t, std::string_view) {}, [](int64_t, std::string_view) {});
  Model low, high;
  for (int i = 0; i < 200; ++i) {
    std::string bytes(1 + i % 40, static_cast<char>(i));
    all.add(TimeDomain::EVENT_TIME, i, bytes, keyGroupOfFirstByte, &bytes);
    (keyGroupOfFirstByte(&bytes) < 64 ? low : high).emplace(i, bytes);
  }
  window::TimerQueue part;
  Model fired;
  part.init(
      context, [&](int64_t ts, std::string_view b) { fired.emplace(ts, std::string(b)); },
      [](int64_t, std::string_view) {});
  part.restore(all.snapshot(), KeyGroupRange{0, 63});
  EXPECT_EQ(part.size(TimeDomain::EVENT_TIME), low.size());
  part.advanceWatermark(kMaxTimestamp);
  EXPECT_EQ(fired, low);
}

// Snapshots taken with snapshotLater() and written later, some on another
// thread while the queue goes on (timers fire, are removed, re-registered
// into the slots those leave), some after the queue is gone, one never:
// each writes exactly what snapshot() said when it was taken.
TEST(TimerQueueTest, ASnapshotWrittenLaterHoldsTheTimersOfItsMoment) {
  std::mt19937 rng(7);
  auto h = std::make_unique<Harness>(0);
  struct Taken {
    std::function<std::string()> write;
    std::string expected;
  };
  std::vector<Taken> pending;
  std::vector<std::pair<int64_t, std::string>> known;
  int64_t watermark = 0;
  int written = 0;
  auto writeOne = [&](bool onAnotherThread) {
    Taken t = std::move(pending.front());
    pending.erase(pending.begin());
    std::string bytes;
    if (onAnotherThread) {
      std::thread writer([&] { bytes = t.write(); });
      // The queue goes on while the snapshot is written: timers are added,
      // removed and fired.
      for (int i = 0; i < 200; ++i) {
        std::string b = randomBytes(rng);
        const int64_t ts = watermark + 1 + static_cast<int64_t>(rng() % 30);
        h->add(TimeDomain::EVENT_TIME, ts, b);
        if (i % 3 == 0 && !known.empty()) {
          const auto& k = known[rng() % known.size()];
          h->remove(TimeDomain::EVENT_TIME, k.first, k.second);
        }
        if (i % 20 == 0) h->queue.advanceWatermark(++watermark);
      }
      writer.join();
    } else {
      bytes = t.write();
    }
    EXPECT_EQ(bytes, t.expected) << "snapshot " << written;
    ++written;
  };
  for (int step = 0; step < 4000; ++step) {
    const uint32_t op = rng() % 100;
    const TimeDomain d = rng() % 4 == 0 ? TimeDomain::PROCESSING_TIME : TimeDomain::EVENT_TIME;
    if (op < 55) {
      const int64_t ts = watermark + 1 + static_cast<int64_t>(rng() % 40);
      std::string bytes = randomBytes(rng);
      h->add(d, ts, bytes);
      known.emplace_back(ts, std::move(bytes));
    } else if (op < 75 && !known.empty()) {
      const auto& k = known[rng() % known.size()];
      h->remove(d, k.first, k.second);
    } else if (op < 90) {
      watermark += static_cast<int64_t>(rng() % 10);
      h->queue.advanceWatermark(watermark);
    } else if (op < 95) {
      pending.push_back({h->queue.snapshotLater(), h->queue.snapshot()});
    } else if (!pending.empty()) {
      writeOne(rng() % 2 == 0);
    }
  }
  ASSERT_GT(written, 50);
  // One snapshot is dropped unwritten, the rest are written after the queue
  // is destroyed.
  if (!pending.empty()) pending.pop_back();
  h.reset();
  while (!pending.empty()) writeOne(false);
}

// Timers that fire while snapshots overlap are reused once every snapshot
// that may read them has finished, even while a later one still runs.
TEST(TimerQueueTest, TimersHeldForAFinishedSnapshotAreReusedWhileALaterOneRuns) {
  Harness h(0);
  std::vector<std::string> first, second;
  for (int i = 0; i < 1000; ++i) {
    first.push_back("first-" + std::to_string(i));
    h.add(TimeDomain::EVENT_TIME, 10, first.back());
  }
  ASSERT_EQ(h.queue.allocatedTimers(), 1000u);
  std::function<std::string()> a = h.queue.snapshotLater();
  const std::string expectedA = h.queue.snapshot();
  h.queue.advanceWatermark(10);                              // all fire: held for snapshot a
  std::function<std::string()> b = h.queue.snapshotLater();  // of an empty queue
  EXPECT_EQ(a(), expectedA);
  for (int i = 0; i < 1000; ++i) {
    second.push_back("second-" + std::to_string(i));
    h.add(TimeDomain::EVENT_TIME, 20, second.back());
  }
  EXPECT_EQ(h.queue.allocatedTimers(), 1000u) << "the timers snapshot a held were not reused";
  EXPECT_EQ(b(), std::string(4, '\0'));  // no timers
  h.queue.advanceWatermark(20);
  EXPECT_EQ(h.firedCount, 2000);
}

}  // namespace
}  // namespace timer_queue_test
