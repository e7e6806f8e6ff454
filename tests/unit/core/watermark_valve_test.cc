// WatermarkValve: one input's watermark and idleness from its channels, with
// the semantics of Flink's StatusWatermarkValve (see watermark_valve.h).
//
// Hand-written scenarios first, each output spelled out; then a randomized
// run against a reference model written from the rules rather than from the
// implementation. The model uses one observation instead of an "aligned"
// flag per channel: a channel counts towards the minimum exactly when it is
// active, not ended, and its watermark has reached the last output (the
// output only rises, and it is the minimum of the counted channels, so a
// counted channel can never fall behind it).
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/core/stream_element.h>
#include <sluice/core/watermark_valve.h>

namespace watermark_valve_test {
namespace {

using namespace sluice;

constexpr auto kIdle = WatermarkStatus::kIdle;
constexpr auto kActive = WatermarkStatus::kActive;

// "" for nothing, else "wm=N", "IDLE", "ACTIVE" or "wm=N,IDLE" (watermark
// first: the task applies it before the status).
std::string show(const WatermarkValve::Emit& e) {
  std::string s;
  if (e.watermark) s = "wm=" + std::to_string(e.watermarkValue);
  if (e.status) {
    if (!s.empty()) s += ",";
    s += e.statusValue == kIdle ? "IDLE" : "ACTIVE";
  }
  return s;
}

struct Valve {
  explicit Valve(int n) : v(n) {}
  std::string wm(int c, int64_t ts) { return show(v.onWatermark(c, ts)); }
  std::string idle(int c) { return show(v.onStatus(c, kIdle)); }
  std::string active(int c) { return show(v.onStatus(c, kActive)); }
  std::string end(int c) { return show(v.onEndOfPartition(c)); }
  WatermarkValve v;
};

TEST(WatermarkValveTest, ForwardsTheMinimumOverAllChannels) {
  Valve v(3);
  EXPECT_EQ(v.wm(0, 5), "") << "channels 1 and 2 have sent nothing";
  EXPECT_EQ(v.wm(1, 3), "");
  EXPECT_EQ(v.wm(2, 4), "wm=3");
  EXPECT_EQ(v.wm(1, 7), "wm=4");
  EXPECT_EQ(v.wm(2, 10), "wm=5");
  EXPECT_EQ(v.wm(0, 6), "wm=6");
  EXPECT_EQ(v.wm(0, 8), "wm=7");
  EXPECT_EQ(v.wm(0, 9), "") << "the minimum is still channel 1's 7";
}

TEST(WatermarkValveTest, SingleChannelForwardsOnlyIncreases) {
  Valve v(1);
  EXPECT_EQ(v.wm(0, 5), "wm=5");
  EXPECT_EQ(v.wm(0, 3), "");
  EXPECT_EQ(v.wm(0, 5), "");
  EXPECT_EQ(v.wm(0, 6), "wm=6");
  EXPECT_EQ(v.wm(0, kMaxTimestamp), "wm=" + std::to_string(kMaxTimestamp));
}

TEST(WatermarkValveTest, OutputIsMonotonicWhenAChannelGoesBack) {
  Valve v(2);
  EXPECT_EQ(v.wm(0, 10), "");
  EXPECT_EQ(v.wm(1, 10), "wm=10");
  EXPECT_EQ(v.wm(0, 9), "") << "lower than what channel 0 sent before: ignored";
  EXPECT_EQ(v.wm(0, 10), "");
  EXPECT_EQ(v.wm(1, 20), "");
  EXPECT_EQ(v.wm(0, 15), "wm=15") << "channel 0's 9 was not kept";
}

TEST(WatermarkValveTest, IdleChannelIsLeftOutOfTheMinimum) {
  Valve v(3);
  EXPECT_EQ(v.wm(0, 5), "");
  EXPECT_EQ(v.wm(1, 7), "");
  EXPECT_EQ(v.wm(2, 9), "wm=5");
  EXPECT_EQ(v.idle(0), "wm=7") << "the minimum moves to the remaining channels at once";
  EXPECT_EQ(v.idle(1), "wm=9");
  EXPECT_EQ(v.wm(2, 12), "wm=12");
  EXPECT_EQ(v.wm(0, 100), "") << "watermarks of an idle channel are ignored";
  EXPECT_EQ(v.wm(2, 13), "wm=13");
}

TEST(WatermarkValveTest, IdleChannelThatNeverSentAWatermarkIsLeftOut) {
  Valve v(2);
  EXPECT_EQ(v.idle(1), "");
  EXPECT_EQ(v.wm(0, 4), "wm=4");
}

TEST(WatermarkValveTest, AllIdleEmitsTheHighestWatermarkThenIdle) {
  Valve v(2);
  EXPECT_EQ(v.wm(0, 9), "");
  EXPECT_EQ(v.wm(1, 5), "wm=5");
  EXPECT_EQ(v.idle(0), "") << "channel 1 still holds the minimum at 5";
  EXPECT_EQ(v.idle(1), "wm=9,IDLE");
  EXPECT_EQ(v.wm(0, 20), "");
  EXPECT_EQ(v.idle(1), "") << "already idle";
  EXPECT_EQ(v.idle(0), "");
}

TEST(WatermarkValveTest, AllIdleWithNothingHigherEmitsOnlyIdle) {
  Valve v(2);
  EXPECT_EQ(v.wm(0, 5), "");
  EXPECT_EQ(v.wm(1, 5), "wm=5");
  EXPECT_EQ(v.idle(0), "");
  EXPECT_EQ(v.idle(1), "IDLE");
  Valve fresh(2);
  EXPECT_EQ(fresh.idle(0), "");
  EXPECT_EQ(fresh.idle(1), "IDLE") << "no watermark at all: only the status";
}

TEST(WatermarkValveTest, ReactivationAfterAllIdleEmitsActiveAndNeverGoesBack) {
  Valve v(2);
  EXPECT_EQ(v.wm(0, 9), "");
  EXPECT_EQ(v.wm(1, 5), "wm=5");
  EXPECT_EQ(v.idle(0), "");
  EXPECT_EQ(v.idle(1), "wm=9,IDLE");
  EXPECT_EQ(v.active(1), "ACTIVE") << "the watermark stays at 9";
  EXPECT_EQ(v.active(1), "") << "already active";
  EXPECT_EQ(v.wm(1, 7), "") << "behind the output: channel 1 does not count yet";
  EXPECT_EQ(v.wm(1, 11), "wm=11") << "caught up";
  EXPECT_EQ(v.active(0), "") << "the output is active already; channel 0 is at 9 < 11";
  EXPECT_EQ(v.wm(1, 15), "wm=15") << "channel 0 does not hold the output back";
  EXPECT_EQ(v.wm(0, 12), "");
  EXPECT_EQ(v.wm(0, 16), "") << "channel 0 counts again, the minimum is 15";
  EXPECT_EQ(v.wm(1, 20), "wm=16") << "now channel 0 holds it";
}

TEST(WatermarkValveTest, ReactivatedChannelCountsOnlyOnceCaughtUp) {
  Valve v(2);
  EXPECT_EQ(v.wm(0, 10), "");
  EXPECT_EQ(v.wm(1, 10), "wm=10");
  EXPECT_EQ(v.idle(1), "");
  EXPECT_EQ(v.wm(0, 20), "wm=20");
  EXPECT_EQ(v.active(1), "") << "no status change: the output never went idle";
  EXPECT_EQ(v.wm(0, 25), "wm=25") << "channel 1 (at 10) is behind and not counted";
  EXPECT_EQ(v.wm(1, 22), "");
  EXPECT_EQ(v.wm(1, 30), "") << "counted from now on; minimum 25";
  EXPECT_EQ(v.wm(0, 40), "wm=30");
}

TEST(WatermarkValveTest, ReactivatedChannelAheadOfTheOutputCountsAtOnce) {
  Valve v(2);
  EXPECT_EQ(v.wm(0, 10), "");
  EXPECT_EQ(v.wm(1, 30), "wm=10");
  EXPECT_EQ(v.idle(1), "");
  EXPECT_EQ(v.wm(0, 20), "wm=20");
  EXPECT_EQ(v.active(1), "");
  EXPECT_EQ(v.wm(0, 40), "wm=30") << "channel 1 at 30 holds the output back again";
}

TEST(WatermarkValveTest, EndedChannelsDoNotHoldTheMinimumBack) {
  Valve v(3);
  EXPECT_EQ(v.wm(0, 5), "");
  EXPECT_EQ(v.wm(1, 100), "");
  EXPECT_EQ(v.wm(2, 50), "wm=5");
  EXPECT_EQ(v.end(0), "wm=50");
  EXPECT_EQ(v.wm(0, 200), "") << "an ended channel sends nothing more";
  EXPECT_EQ(v.idle(0), "");
  EXPECT_EQ(v.active(0), "");
  EXPECT_EQ(v.end(2), "wm=100");
  EXPECT_EQ(v.end(1), "") << "nothing left to take a minimum of";
}

// Flink flushes the highest watermark only when the channel that went idle
// last was holding the output watermark; here it was behind (reactivated, not
// caught up), so the output stays where it was.
TEST(WatermarkValveTest, AllIdleFlushesOnlyWhenTheLastChannelHeldTheOutput) {
  Valve v(3);
  EXPECT_EQ(v.wm(0, 10), "");
  EXPECT_EQ(v.wm(1, 5), "");
  EXPECT_EQ(v.wm(2, 12), "wm=5");
  EXPECT_EQ(v.idle(2), "");
  EXPECT_EQ(v.idle(1), "wm=10");
  EXPECT_EQ(v.active(1), "");
  EXPECT_EQ(v.idle(0), "") << "channel 1 is active but behind: it holds nothing";
  EXPECT_EQ(v.idle(1), "IDLE") << "channel 1 (at 5) did not hold the output (10): no flush to 12";
}

TEST(WatermarkValveTest, EndedChannelIsLeftOutWhenAllOthersGoIdle) {
  Valve v(3);
  EXPECT_EQ(v.wm(0, 5), "");
  EXPECT_EQ(v.wm(1, 8), "");
  EXPECT_EQ(v.wm(2, 9), "wm=5");
  EXPECT_EQ(v.end(0), "wm=8");
  EXPECT_EQ(v.idle(1), "wm=9");
  EXPECT_EQ(v.idle(2), "IDLE") << "every channel that has not ended is idle";
  EXPECT_EQ(v.active(1), "ACTIVE");
}

// --- randomized, against a reference model --------------------------------------

class Model {
 public:
  explicit Model(int n) : ch_(n) {}

  std::string watermark(int c, int64_t ts) {
    Ch& x = ch_[c];
    if (x.ended || x.idle || ts <= x.wm) return "";
    x.wm = ts;
    return advanceMin();
  }
  std::string idle(int c) {
    Ch& x = ch_[c];
    if (x.ended || x.idle) return "";
    x.idle = true;
    bool anyActive =
        std::any_of(ch_.begin(), ch_.end(), [](const Ch& y) { return !y.ended && !y.idle; });
    if (anyActive) return advanceMin();
    std::string s;
    int64_t max = kMinTimestamp;
    for (const Ch& y : ch_)
      if (!y.ended) max = std::max(max, y.wm);
    if (x.wm == out_ && max > out_) {
      out_ = max;
      s = "wm=" + std::to_string(max);
    }
    if (!outIdle_) {
      outIdle_ = true;
      s += s.empty() ? "IDLE" : ",IDLE";
    }
    return s;
  }
  std::string active(int c) {
    Ch& x = ch_[c];
    if (x.ended || !x.idle) return "";
    x.idle = false;
    if (!outIdle_) return "";
    outIdle_ = false;
    return "ACTIVE";
  }
  std::string end(int c) {
    ch_[c].ended = true;
    return advanceMin();
  }

 private:
  struct Ch {
    int64_t wm = kMinTimestamp;
    bool idle = false;
    bool ended = false;
  };
  std::string advanceMin() {
    bool any = false;
    int64_t min = kMaxTimestamp;
    for (const Ch& y : ch_) {
      if (y.ended || y.idle || y.wm < out_) continue;
      any = true;
      min = std::min(min, y.wm);
    }
    if (!any || min <= out_) return "";
    out_ = min;
    return "wm=" + std::to_string(min);
  }

  std::vector<Ch> ch_;
  int64_t out_ = kMinTimestamp;
  bool outIdle_ = false;
};

TEST(WatermarkValveTest, RandomizedAgainstReferenceModel) {
  for (int channels : {1, 2, 3, 4, 7}) {
    for (uint32_t seed = 1; seed <= 5; ++seed) {
      SCOPED_TRACE("channels " + std::to_string(channels) + " seed " + std::to_string(seed));
      std::mt19937 rng(seed * 100 + channels);
      WatermarkValve valve(channels);
      Model model(channels);
      int64_t clock = 0;
      int64_t lastOut = kMinTimestamp;
      bool outIdle = false;
      int ended = 0;
      std::vector<bool> endedFlag(channels, false);
      int watermarksOut = 0, statusesOut = 0;
      for (int step = 0; step < 3000; ++step) {
        clock += rng() % 4;
        int c = static_cast<int>(rng() % channels);
        unsigned kind = rng() % 100;
        std::string what;
        WatermarkValve::Emit got;
        std::string want;
        if (kind < 60) {
          int64_t ts = clock - 20 + static_cast<int64_t>(rng() % 26);
          what = "wm(" + std::to_string(c) + "," + std::to_string(ts) + ")";
          got = valve.onWatermark(c, ts);
          want = model.watermark(c, ts);
        } else if (kind < 80) {
          what = "idle(" + std::to_string(c) + ")";
          got = valve.onStatus(c, kIdle);
          want = model.idle(c);
        } else if (kind < 99 || ended + 1 >= channels) {
          what = "active(" + std::to_string(c) + ")";
          got = valve.onStatus(c, kActive);
          want = model.active(c);
        } else {
          // End of partition, at most once per channel and never the last one.
          if (endedFlag[c]) continue;
          endedFlag[c] = true;
          ++ended;
          what = "end(" + std::to_string(c) + ")";
          got = valve.onEndOfPartition(c);
          want = model.end(c);
        }
        ASSERT_EQ(show(got), want) << "step " << step << ": " << what;
        // Properties that hold whatever the model says.
        if (got.watermark) {
          ASSERT_FALSE(outIdle) << "watermark while the output is idle, step " << step;
          ASSERT_GT(got.watermarkValue, lastOut) << "step " << step;
          lastOut = got.watermarkValue;
          ++watermarksOut;
        }
        if (got.status) {
          ASSERT_NE(got.statusValue == kIdle, outIdle) << "status repeated, step " << step;
          outIdle = got.statusValue == kIdle;
          ++statusesOut;
        }
      }
      EXPECT_GT(watermarksOut, 10) << "the run exercised too little";
      if (channels <= 3) {
        EXPECT_GT(statusesOut, 2) << "the run never went idle";
      }
    }
  }
}

}  // namespace
}  // namespace watermark_valve_test
