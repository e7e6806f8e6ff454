// The Nexmark queries and the Yahoo Streaming Benchmark as Sluice jobs, and
// for each a single-threaded hand-written baseline that computes the same
// rows from the same generator (plain loops and std containers, no Sluice).
//
// Both fold their output rows into a Checksum (checksum.h), so a job is
// correct when its checksum equals the baseline's. Results are bounded-input
// results: event-time windows and timers all fire at the end of the input.
//
//   q0   pass-through: every event
//   q1   every bid with its price in euro (price * 0.908)
//   q2   (auction, price) of the bids whose auction id % 123 == 0
//   q3   (name, city, state, auction id) for every person in OR, ID or CA
//        and every auction of category 10 they sell: an incremental join,
//        keyed by person id, in keyed state (either side may come first)
//   q4   (category, average closing price): an auction's closing price is
//        its highest bid at or above the reserve made within [dateTime,
//        expires]; averaged per category over all auctions that close with
//        one (one row per category, at the end of the input)
//   q5   hot items: bids per auction in sliding 10 s / 2 s event-time
//        windows; per window, (window end, auction, count) of every auction
//        with the highest count
//   q7   highest bid: per 10 s tumbling event-time window, every bid with
//        the window's highest price
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
#pragma once

#include <atomic>
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

struct JobOptions {
  GeneratorConfig generator;
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
