// The Nexmark queries and the Yahoo Streaming Benchmark as Sluice jobs, and
// for each a single-threaded hand-written baseline that computes the same
// rows from the same generator (plain loops and std containers, no Sluice).
//
// The queries are those of Flink's Nexmark benchmark (nexmark/nexmark,
// nexmark-flink/src/main/resources/queries/q*.sql), written with the
// DataStream API: the same filters, join conditions, grouping, windows and
// output columns. Both the job and the baseline fold their output rows into a
// Checksum (checksum.h), so a job is correct when its checksum equals the
// baseline's. Results are bounded-input results: event-time windows and
// timers all fire at the end of the input.
//
//   q0   pass-through: every bid as (auction, bidder, price, dateTime, extra)
//   q1   every bid as (auction, bidder, 0.908 * price, dateTime, extra); the
//        price is Flink's DECIMAL(23, 3), kept as exact thousandths
//   q2   (auction, price) of the bids whose auction id % 123 == 0
//   q3   (name, city, state, auction id) for every person in OR, ID or CA
//        and every auction of category 10 they sell: a regular inner join of
//        two append-only streams, so append-only, keyed by person id, in
//        keyed state (either side may come first)
//   q4   (category, average final price): an auction's final price is its
//        highest bid made within [dateTime, expires] (inclusive; no reserve
//        condition), averaged per category (BIGINT AVG: integer division)
//        over the auctions with such a bid. Regular join and two unwindowed
//        aggregations, so an updating result: the job emits a row whenever a
//        category's average changes, and its sink keeps the latest row per
//        category (UpsertSink); the checksum covers those final rows.
//   q5   hot items: bids per auction in sliding 10 s / 2 s event-time
//        windows; per window, (auction, count) of every auction whose count
//        is the window's highest
//   q7   highest bid: every bid B and 10 s tumbling window W with B.price =
//        the highest price in W and W.end - 10 s <= B.dateTime <= W.end
//        (inclusive: a bid at exactly W.end, which lies in the next window,
//        also matches W), as (auction, bidder, price, dateTime, extra)
//   q8   new users: (person id, name, window start) of every person who
//        registered and created an auction in the same 10 s tumbling window
//   q11  user sessions: (bidder, bids, session start, session end) of event-
//        time session windows per bidder with a 10 s gap
//   q12  (bidder, bids, window start, window end) per 10 s processing-time
//        tumbling window. Processing time makes the windows differ from run
//        to run, so q12 is checked on the total bid count per bidder (the
//        sum over its windows); its job fires the windows still open at the
//        end of the input (Flink would drop them) so that totals add up.
//   ysb  Yahoo Streaming Benchmark: ad events -> keep "view" -> campaign of
//        the ad from an in-memory table (100 campaigns x 10 ads) -> (campaign,
//        window start, views) per 10 s tumbling event-time window
//
// Watermarks: the Nexmark source has Flink's Nexmark watermark, a bounded
// out-of-orderness of 4 s (its DDL: WATERMARK FOR dateTime AS dateTime -
// INTERVAL '4' SECOND). The generator's events are in order per source
// subtask, so no event is ever late and the bound only delays when windows
// and timers fire, never what they compute. ysb keeps a 1 ms bound.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sluice/sluice.h>

#include "nexmark/checksum.h"
#include "nexmark/generator.h"

namespace sluice::nexmark {

enum class Query { kQ0, kQ1, kQ2, kQ3, kQ4, kQ5, kQ7, kQ8, kQ11, kQ12, kYsb };

// Every query, in the order above.
const std::vector<Query>& allQueries();
// "nexmark-q0" ... "nexmark-q12", "ysb".
std::string queryName(Query q);
std::optional<Query> parseQuery(const std::string& name);
// Whether the query reads ad events (ysb) rather than Nexmark events.
inline bool isYsb(Query q) { return q == Query::kYsb; }

// Nexmark's watermark bound (see above).
inline constexpr std::chrono::milliseconds kNexmarkOutOfOrderness{4000};

struct JobOptions {
  GeneratorConfig generator;
  // The Nexmark source's bounded out-of-orderness (not ysb's).
  // Default: Nexmark's 4 s.
  std::chrono::milliseconds outOfOrderness = kNexmarkOutOfOrderness;
  // Tests: when set, the Nexmark source emits these events (`events` must be
  // their number), split across subtasks as generated events are, instead
  // of the generator's.
  std::shared_ptr<const std::vector<Event>> input;
  // Events the source emits in all (bounded).
  int64_t events = 1'000'000;
  // Parallelism of every operator, the source included (its splits are
  // interleaved for this parallelism, see interleavedIndex).
  int parallelism = 1;
  // Wall-clock rate limit of the source over all subtasks, events/s; 0: none.
  double wallRatePerSecond = 0;
  // Latency mode: set by the source (system clock, us) when it generates its
  // first event, if not set yet. See LatencyOrigin.
  std::shared_ptr<std::atomic<int64_t>> sourceStartMicros;
};

// Adds the query's job to `env` (source to sink); the sink folds the rows
// into `out`. Sets nothing on `env` itself; run it with env.execute().
void buildQuery(sluice::StreamExecutionEnvironment& env, Query q, const JobOptions& options,
                std::shared_ptr<ResultCollector> out);

// Builds and runs the job on a fresh environment with options.parallelism
// and returns its checksum. For tests.
Checksum runQuery(Query q, const JobOptions& options);

// The hand-written single-threaded baseline: the same rows as the job, from
// events 0..events-1 in index order. q12: the per-bidder totals.
Checksum runBaseline(Query q, const GeneratorConfig& generator, int64_t events);
// The same over the given events, in their order (not ysb: throws
// std::invalid_argument).
Checksum runBaseline(Query q, const std::vector<Event>& events);

// q0, q1 and q2 keep no state: each event gives at most one row.
bool isStateless(Query q);
// The hash of the row a stateless query outputs for `e`, or none.
std::optional<uint64_t> statelessRowHash(Query q, const Event& e);

// The latency floor of this machine for a stateless query: its hand-written
// loop on one thread, paced as the engine's rate-limited source is (event i
// is due i / generator.eventsPerSecond seconds after the start; the loop
// sleeps until then), with each row's latency measured as the latency-mode
// sink measures it (from the start of its event's millisecond of event time,
// mapped to the wall clock). Event time runs at the wall rate, as in latency
// mode.
struct BaselineLatency {
  LatencyHistogram latencies;
  Checksum checksum;
};
BaselineLatency runBaselineLatency(Query q, const GeneratorConfig& generator, int64_t events);

}  // namespace sluice::nexmark
