// Every Nexmark query and the Yahoo Streaming Benchmark, run as Sluice jobs on
// a small bounded input at parallelism 1 and 2, must produce the same rows
// (order-independent checksum and row count) as the hand-written
// single-threaded baseline computed from the same generator.
//
// The event-time rate is low (500 events per second of event time, 100 s of
// event time in all) so that the windowed queries see ten 10 s windows and
// many sessions and auction expiries. The stateful queries also run with the
// RocksDB state backend. q12 uses processing-time windows, which differ from
// run to run: it is checked on the total bid count per bidder.
//
// Small hand-made inputs check the corner cases of Flink's SQL that the
// generator rarely produces (q4's inclusive bounds and its bids that come
// before their auction, q7's bids at exactly a window's end), with results
// worked out by hand.
#include <chrono>
#include <memory>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "nexmark/generator.h"
#include "nexmark/queries.h"

namespace sluice::nexmark {
namespace nexmark_test {
namespace {

constexpr int64_t kEvents = 50'000;

GeneratorConfig smallConfig() {
  GeneratorConfig c;
  c.seed = 7;
  c.eventsPerSecond = 500;
  return c;
}

struct Case {
  Query query;
  int parallelism;
  std::string stateBackend;  // empty: the default (hashmap)
  // The watermark bound; Nexmark's 4 s unless a case says otherwise.
  std::chrono::milliseconds outOfOrderness = kNexmarkOutOfOrderness;
};

// Readable test parameters in test listings (and ctest names).
void PrintTo(const Case& c, std::ostream* os) {
  *os << queryName(c.query) << " p=" << c.parallelism;
  if (!c.stateBackend.empty()) *os << " " << c.stateBackend;
  if (c.outOfOrderness != kNexmarkOutOfOrderness) *os << " bound " << c.outOfOrderness.count();
}

Checksum runWith(const Case& c, const JobOptions& options) {
  if (c.stateBackend.empty()) return runQuery(c.query, options);
  StreamExecutionEnvironment env;
  env.setParallelism(options.parallelism);
  env.setStateBackend(c.stateBackend);
  auto out = std::make_shared<ResultCollector>();
  buildQuery(env, c.query, options, out);
  env.execute(queryName(c.query));
  return out->result();
}

class NexmarkQueryTest : public ::testing::TestWithParam<Case> {};

TEST_P(NexmarkQueryTest, MatchesBaseline) {
  const Case c = GetParam();
  JobOptions options;
  options.generator = smallConfig();
  options.events = kEvents;
  options.parallelism = c.parallelism;
  options.outOfOrderness = c.outOfOrderness;
  const Checksum expected = runBaseline(c.query, options.generator, options.events);
  // A query that outputs nothing would compare empty with empty.
  ASSERT_GT(expected.rows, 0) << queryName(c.query);
  RecordProperty("baseline_rows", std::to_string(expected.rows));
  const Checksum actual = runWith(c, options);
  EXPECT_EQ(actual.rows, expected.rows) << queryName(c.query);
  EXPECT_EQ(actual.sum, expected.sum) << queryName(c.query) << ": engine " << actual.toString()
                                      << ", baseline " << expected.toString();
}

std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (Query q : allQueries()) {
    for (int p : {1, 2}) cases.push_back({q, p, ""});
    const bool stateless = q == Query::kQ0 || q == Query::kQ1 || q == Query::kQ2;
    if (!stateless && q != Query::kQ12) cases.push_back({q, 2, "rocksdb"});
  }
  // No event is late whatever the bound (each source subtask is in order), so
  // the event-time queries give the same rows with none and with a long one.
  using std::chrono::milliseconds;
  for (Query q : {Query::kQ7, Query::kQ11}) cases.push_back({q, 2, "", milliseconds(0)});
  cases.push_back({Query::kQ5, 2, "", milliseconds(15'000)});
  return cases;
}

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  std::string name = queryName(info.param.query);
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  name += "_p" + std::to_string(info.param.parallelism);
  if (!info.param.stateBackend.empty()) name += "_" + info.param.stateBackend;
  if (info.param.outOfOrderness != kNexmarkOutOfOrderness) {
    name += "_bound" + std::to_string(info.param.outOfOrderness.count()) + "ms";
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(AllQueries, NexmarkQueryTest, ::testing::ValuesIn(allCases()), caseName);

// --- Hand-made inputs --------------------------------------------------------

constexpr int64_t kT0 = 1'700'000'000'000;  // a multiple of the 10 s windows

Event auctionEvent(int64_t id, int64_t category, int64_t dateTime, int64_t expires) {
  Event e;
  e.type = EventType::kAuction;
  e.auction.id = id;
  e.auction.itemName = "item " + std::to_string(id);
  e.auction.category = category;
  e.auction.dateTime = dateTime;
  e.auction.expires = expires;
  e.auction.initialBid = 1;
  // Above every bid below: Beam's q4 (bids must reach the reserve) would
  // find no final price at all.
  e.auction.reserve = 1'000'000;
  e.auction.seller = 1000;
  return e;
}

Event bidEvent(int64_t auction, int64_t price, int64_t dateTime) {
  Event e;
  e.type = EventType::kBid;
  e.bid.auction = auction;
  e.bid.bidder = 2000 + auction;
  e.bid.price = price;
  e.bid.dateTime = dateTime;
  e.bid.channel = "Google";
  e.bid.extra = "bid " + std::to_string(auction) + "/" + std::to_string(dateTime);
  return e;
}

// Copies and moves carry the payload; the member that stops being the
// payload goes back to default, as the model promises.
TEST(NexmarkEventTest, CopiesAndMovesCarryThePayloadOnly) {
  const Event bid = bidEvent(7, 120, kT0);
  const Event auction = auctionEvent(3, 10, kT0, kT0 + 5);
  Event e = bid;
  EXPECT_EQ(e.type, EventType::kBid);
  EXPECT_EQ(rowHash(e), rowHash(bid));
  e = auction;
  EXPECT_EQ(e.type, EventType::kAuction);
  EXPECT_EQ(e.auction.itemName, "item 3");
  EXPECT_EQ(rowHash(e.bid), rowHash(Bid{}));
  Event moved = std::move(e);
  EXPECT_EQ(rowHash(moved), rowHash(auction));
  EXPECT_EQ(rowHash(moved.bid), rowHash(Bid{}));
  Event target = bidEvent(9, 130, kT0 + 1);
  target = std::move(moved);
  EXPECT_EQ(rowHash(target), rowHash(auction));
  EXPECT_EQ(rowHash(target.bid), rowHash(Bid{}));
  target = bidEvent(7, 120, kT0);
  EXPECT_EQ(rowHash(target), rowHash(bid));
  EXPECT_EQ(rowHash(target.auction), rowHash(Auction{}));
  EXPECT_EQ(target.auction.itemName, "");
}

Checksum checksumOf(const std::vector<uint64_t>& rowHashes) {
  Checksum c;
  for (uint64_t h : rowHashes) c.add(h);
  return c;
}

// The job on `events` at parallelism 1 and 2, and the baseline on them, all
// equal `expected`.
void expectRows(Query q, const std::vector<Event>& events, const Checksum& expected) {
  EXPECT_EQ(runBaseline(q, events), expected) << queryName(q) << " baseline";
  for (int p : {1, 2}) {
    JobOptions options;
    options.events = static_cast<int64_t>(events.size());
    options.parallelism = p;
    options.input = std::make_shared<const std::vector<Event>>(events);
    EXPECT_EQ(runQuery(q, options), expected) << queryName(q) << " p=" << p;
  }
}

// q4 is Flink's: the highest bid within [dateTime, expires], both ends
// included, whatever the reserve; an integer average per category.
TEST(NexmarkQ4, AveragesTheHighestBidWithinEachAuctionsLifetime) {
  const std::vector<Event> events = {
      bidEvent(1000, 500, kT0 + 999),  // before its auction, and before its start: no
      auctionEvent(1000, 10, kT0 + 1000, kT0 + 5000),
      bidEvent(1000, 10, kT0 + 1000),  // at the start: counts
      bidEvent(1000, 30, kT0 + 3000),  // the highest
      bidEvent(1000, 20, kT0 + 5000),  // at the expiry: counts, lower
      bidEvent(1000, 99, kT0 + 5001),  // after the expiry: no
      bidEvent(1001, 7, kT0 + 2000),   // before its auction, in its first ms: counts
      auctionEvent(1001, 10, kT0 + 2000, kT0 + 2500),
      bidEvent(1001, 1000, kT0 + 2600),                 // after the expiry: no
      auctionEvent(1002, 10, kT0 + 2000, kT0 + 9000),   // no bid: not averaged
      auctionEvent(1003, 11, kT0 + 100, kT0 + 10'000),  //
      bidEvent(1003, 5, kT0 + 200),
      bidEvent(1003, 6, kT0 + 300),
      bidEvent(1004, 8, kT0 + 300),  // its auction never comes
  };
  // Category 10: (30 + 7) / 2 = 18 (BIGINT AVG truncates); category 11: 6.
  const Checksum expected = checksumOf(
      {rowHash(std::pair<int64_t, int64_t>(10, 18)), rowHash(std::pair<int64_t, int64_t>(11, 6))});
  expectRows(Query::kQ4, events, expected);
}

// q7 is Flink's: a bid matches window W when its price is W's highest and
// W.end - 10 s <= dateTime <= W.end, so a bid at exactly W.end (the first
// millisecond of the next window) matches W as well as its own window.
TEST(NexmarkQ7, BidsAtAWindowsEndAlsoMatchThatWindow) {
  const std::vector<Event> events = {
      bidEvent(1, 100, kT0 + 1000),    // W0's highest (tied)
      bidEvent(2, 50, kT0 + 2000),     //
      bidEvent(65, 100, kT0 + 3000),   // W0's highest (tied; pre-aggregated with auction 1)
      bidEvent(129, 60, kT0 + 4000),   // lower, in the same group as auctions 1 and 65
      bidEvent(3, 100, kT0 + 9999),    // W0's highest (tied)
      bidEvent(4, 100, kT0 + 10'000),  // W0's end with W0's price: matches W0
      bidEvent(5, 200, kT0 + 15'000),  // W1's highest
      bidEvent(6, 200, kT0 + 20'000),  // W1's end with W1's price, and W2's highest
      bidEvent(7, 10, kT0 + 20'000),   // W1's end, another price: no
      bidEvent(8, 100, kT0 + 40'000),  // W4's highest; W3 had no bids
      bidEvent(9, 300, kT0 + 50'000),  // W4's end, but a higher price: W5's only
  };
  std::vector<uint64_t> rows;
  for (size_t i : {0, 2, 4, 5, 6, 7, 7, 9, 10}) rows.push_back(rowHash(toBidRow(events[i].bid)));
  expectRows(Query::kQ7, events, checksumOf(rows));
}

// An updating result's sink keeps one row per key; a key from two sink
// subtasks means rows went astray.
TEST(NexmarkResultCollector, KeepsTheLatestRowPerKeyOnce) {
  ResultCollector out;
  out.addLatestRows({{1, 11}, {2, 22}});
  out.addLatestRows({{3, 33}});
  EXPECT_EQ(out.result(), checksumOf({11, 22, 33}));
  EXPECT_THROW(out.addLatestRows({{2, 23}}), std::logic_error);
}

// The baseline checksum depends on the rows: a different seed gives different
// rows (so a test comparing two empty or constant results would notice).
TEST(NexmarkBaseline, DependsOnTheInput) {
  GeneratorConfig other = smallConfig();
  other.seed = 8;
  for (Query q : {Query::kQ0, Query::kQ5, Query::kQ11, Query::kYsb}) {
    EXPECT_NE(runBaseline(q, smallConfig(), 5000), runBaseline(q, other, 5000)) << queryName(q);
  }
}

TEST(NexmarkGenerator, IsDeterministicAndFollowsTheProportions) {
  const GeneratorConfig config = smallConfig();
  int64_t persons = 0, auctions = 0, bids = 0;
  for (int64_t i = 0; i < 5000; ++i) {
    const Event e = generateEvent(config, i);
    EXPECT_EQ(rowHash(e), rowHash(generateEvent(config, i)));
    EXPECT_EQ(e.dateTime(), eventTimestamp(config, i));
    switch (e.type) {
      case EventType::kPerson: ++persons; break;
      case EventType::kAuction:
        ++auctions;
        EXPECT_GT(e.auction.expires, e.auction.dateTime);
        EXPECT_GE(e.auction.reserve, e.auction.initialBid);
        break;
      case EventType::kBid: ++bids; break;
    }
  }
  EXPECT_EQ(persons, 100);
  EXPECT_EQ(auctions, 300);
  EXPECT_EQ(bids, 4600);
  // 500 events per second of event time.
  EXPECT_EQ(eventTimestamp(config, 500) - eventTimestamp(config, 0), 1000);
  EXPECT_EQ(eventTimestamp(config, 1) - eventTimestamp(config, 0), 2);
}

// Padding brings events to Nexmark's average sizes, counted as Nexmark
// counts them: a person 200 bytes, an auction 500, a bid 100 (its channel
// and url not counted).
TEST(NexmarkGenerator, PadsEventsToNexmarksAverageSizes) {
  const GeneratorConfig config = smallConfig();
  double persons = 0, auctions = 0, bids = 0;
  double personBytes = 0, auctionBytes = 0, bidBytes = 0;
  for (int64_t i = 0; i < 20000; ++i) {
    const Event e = generateEvent(config, i);
    switch (e.type) {
      case EventType::kPerson: {
        const Person& p = e.person;
        persons += 1;
        personBytes +=
            static_cast<double>(8 + p.name.size() + p.emailAddress.size() + p.creditCard.size() +
                                p.city.size() + p.state.size() + p.extra.size());
        break;
      }
      case EventType::kAuction: {
        const Auction& a = e.auction;
        auctions += 1;
        auctionBytes += static_cast<double>(8 + a.itemName.size() + a.description.size() + 8 * 5 +
                                            a.extra.size());
        break;
      }
      case EventType::kBid:
        bids += 1;
        bidBytes += static_cast<double>(8 * 4 + e.bid.extra.size());
        break;
    }
  }
  EXPECT_NEAR(personBytes / persons, 200, 4);
  EXPECT_NEAR(auctionBytes / auctions, 500, 10);
  EXPECT_NEAR(bidBytes / bids, 100, 2);
}

// Prices are round(10^(6u) * 100) cents: from 1 to 1M dollars, log-uniform,
// so half of them lie below 1000 dollars.
TEST(NexmarkGenerator, PricesAreLogUniformBetweenOneAndAMillionDollars) {
  const GeneratorConfig config = smallConfig();
  int64_t bids = 0, belowThousand = 0;
  for (int64_t i = 0; i < 20000; ++i) {
    const Event e = generateEvent(config, i);
    if (e.type != EventType::kBid) continue;
    ++bids;
    EXPECT_GE(e.bid.price, 100);
    EXPECT_LE(e.bid.price, 100'000'000);
    if (e.bid.price < 100'000) ++belowThousand;
  }
  EXPECT_NEAR(static_cast<double>(belowThousand) / static_cast<double>(bids), 0.5, 0.03);
}

// The latency baseline computes the same rows as the plain baseline, and
// measures each of them.
TEST(NexmarkBaseline, PacedLatencyLoopComputesTheSameRows) {
  GeneratorConfig config = smallConfig();
  config.eventsPerSecond = 200'000;  // 20000 events: 0.1 s
  for (Query q : {Query::kQ0, Query::kQ1, Query::kQ2}) {
    const BaselineLatency got = runBaselineLatency(q, config, 20000);
    const Checksum expected = runBaseline(q, config, 20000);
    EXPECT_EQ(got.checksum, expected) << queryName(q);
    EXPECT_EQ(got.latencies.count(), expected.rows) << queryName(q);
  }
  EXPECT_THROW(runBaselineLatency(Query::kQ5, config, 10), std::invalid_argument);
}

TEST(NexmarkGenerator, InterleavedIndexIsAPermutation) {
  for (int64_t count : {0, 1, 7, 100, 101}) {
    for (int p : {1, 2, 3, 4}) {
      std::set<int64_t> seen;
      for (int64_t i = 0; i < count; ++i) {
        const int64_t idx = interleavedIndex(i, count, p);
        EXPECT_GE(idx, 0);
        EXPECT_LT(idx, count);
        seen.insert(idx);
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), count) << "count " << count << " p " << p;
    }
  }
  // Split k (of 2) of 5 positions reads indices k, k + 2, ...
  EXPECT_EQ(interleavedIndex(0, 5, 2), 0);
  EXPECT_EQ(interleavedIndex(1, 5, 2), 2);
  EXPECT_EQ(interleavedIndex(2, 5, 2), 4);
  EXPECT_EQ(interleavedIndex(3, 5, 2), 1);
  EXPECT_EQ(interleavedIndex(4, 5, 2), 3);
}

TEST(YsbGenerator, CampaignTableHasTenAdsPerCampaign) {
  const std::vector<int64_t> table = ysbCampaignOfAd(smallConfig());
  ASSERT_EQ(table.size(), static_cast<size_t>(kYsbCampaigns * kYsbAdsPerCampaign));
  std::vector<int> ads(kYsbCampaigns, 0);
  for (int64_t c : table) {
    ASSERT_GE(c, 0);
    ASSERT_LT(c, kYsbCampaigns);
    ++ads[static_cast<size_t>(c)];
  }
  for (int n : ads) EXPECT_EQ(n, kYsbAdsPerCampaign);
}

}  // namespace
}  // namespace nexmark_test
}  // namespace sluice::nexmark
