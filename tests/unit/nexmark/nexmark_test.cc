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
#include <memory>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string>
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
};

// Readable test parameters in test listings (and ctest names).
void PrintTo(const Case& c, std::ostream* os) {
  *os << queryName(c.query) << " p=" << c.parallelism;
  if (!c.stateBackend.empty()) *os << " " << c.stateBackend;
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
  return cases;
}

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  std::string name = queryName(info.param.query);
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  name += "_p" + std::to_string(info.param.parallelism);
  if (!info.param.stateBackend.empty()) name += "_" + info.param.stateBackend;
  return name;
}

INSTANTIATE_TEST_SUITE_P(AllQueries, NexmarkQueryTest, ::testing::ValuesIn(allCases()), caseName);

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
