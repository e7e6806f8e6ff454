// Deterministic event generators for the Nexmark and Yahoo Streaming
// Benchmark workloads.
//
// Event `index` is a pure function of (config, index): every event draws its
// random fields from its own generator seeded by (seed, index), the way
// Nexmark seeds one Random per event id. So the engine's parallel source and
// the single-threaded baseline produce the same events without sharing
// anything, in any order.
//
// Nexmark semantics followed (Flink's Nexmark generator, nexmark/nexmark,
// with its default GeneratorConfig / NexmarkConfiguration):
//   - per 50 events: 1 person, 3 auctions, 46 bids (index % 50: 0 person,
//     1-3 auctions, 4-49 bids); person and auction ids are dense, starting
//     at 1000, and grow with the index;
//   - an auction's seller is a "hot" seller (the latest person id rounded
//     down to a multiple of 100) 3 times in 4, otherwise one of the ~1000
//     most recent people (up to 10 ids ahead of the newest);
//   - a bid's auction is a hot auction (latest auction id rounded down to a
//     multiple of 100) half of the time, otherwise one of the 100 auctions
//     in flight (up to 10 ids ahead); its bidder is a hot bidder 3 times in 4;
//   - prices are round(10^(6u) * 100) cents, u uniform in [0, 1); reserve =
//     initial bid + another such price; 5 categories starting at 10; an
//     auction lasts 1 ms up to twice the time 1666 events take;
//   - strings are random lower-case text of 3 to max - 1 characters;
//     `extra` pads a person to ~200 bytes, an auction to ~500 and a bid to
//     ~100 (+/- 20 %), counted as Nexmark counts them (a bid's channel and
//     url come on top).
// Event time: baseTime + index * 1000 / eventsPerSecond (milliseconds), so
// the clock advances deterministically with the index and events are in
// event-time order (Nexmark's default outOfOrderGroupSize of 1).
//
// Deliberately different: Flink's generator draws from an unseeded Random,
// and at parallelism p runs p generators, each on its own event-time
// timeline from baseTime at rate / p over its own block of event ids. Here
// there is one timeline whatever the parallelism (see interleavedIndex), so
// every run and the baseline see the same events.
#pragma once

#include <cstdint>
#include <vector>

#include "nexmark/model.h"

namespace sluice::nexmark {

struct GeneratorConfig {
  // Seed of every event's random draws.
  uint64_t seed = 42;
  // Event-time rate: events per second of event time (not a wall-clock rate);
  // must be > 0.
  // Default: 10000 (Nexmark's default first event rate).
  int64_t eventsPerSecond = 10'000;
  // Event time of event 0, ms. Default: 2023-11-14T22:13:20Z.
  int64_t baseTime = 1'700'000'000'000;
};

inline constexpr int64_t kFirstPersonId = 1000;
inline constexpr int64_t kFirstAuctionId = 1000;
inline constexpr int64_t kFirstCategoryId = 10;
inline constexpr int64_t kNumCategories = 5;

// Event time of event `index`.
int64_t eventTimestamp(const GeneratorConfig& config, int64_t index);

// Nexmark event `index` (>= 0).
Event generateEvent(const GeneratorConfig& config, int64_t index);

// The event index that position `position` of a parallel source reads, so
// that with the index range [0, count) cut into `parallelism` contiguous
// splits (sizes differing by at most one, larger ones first, as
// GeneratorSource cuts them) split k reads indices k, k + parallelism,
// k + 2 parallelism, ...: every subtask's events are in event-time order and
// all subtasks advance through event time together. A permutation of
// [0, count) for any parallelism >= 1.
int64_t interleavedIndex(int64_t position, int64_t count, int parallelism);

// --- Yahoo Streaming Benchmark ----------------------------------------------

inline constexpr int64_t kYsbCampaigns = 100;
inline constexpr int64_t kYsbAdsPerCampaign = 10;

// Ad event `index`: user and page uniform over 100000, ad uniform over the
// 1000 ads, ad type uniform over 5, event type uniform over view / click /
// purchase; event time as for Nexmark.
AdEvent generateAdEvent(const GeneratorConfig& config, int64_t index);

// The campaign of each ad: element `adId` is its campaign id in
// [0, kYsbCampaigns), kYsbAdsPerCampaign ads each, shuffled by the seed.
std::vector<int64_t> ysbCampaignOfAd(const GeneratorConfig& config);

}  // namespace sluice::nexmark
