#include "nexmark/queries.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace sluice::nexmark {

// Keyed-state and window-accumulator types; in the namespace so that
// SLUICE_STRUCT can name them.
struct AuctionState {  // q4: an auction's bounds and its highest bid within them so far
  int64_t dateTime = 0;
  int64_t expires = 0;
  int64_t category = 0;
  int64_t best = -1;  // -1: no bid within [dateTime, expires] yet
};
SLUICE_STRUCT(AuctionState, dateTime, expires, category, best)

// q4's inputs as Flink's plan has them: the planner prunes each side of the
// join to the columns the query reads, so only those cross the exchange.
struct Q4Auction {
  int64_t id = 0;
  int64_t dateTime = 0;
  int64_t expires = 0;
  int64_t category = 0;
};
SLUICE_STRUCT(Q4Auction, id, dateTime, expires, category)

struct Q4Bid {
  int64_t auction = 0;
  int64_t price = 0;
  int64_t dateTime = 0;
};
SLUICE_STRUCT(Q4Bid, auction, price, dateTime)

struct Q4Update {  // q4: an auction's final price changed from `before` to `after`
  int64_t category = 0;
  int64_t before = -1;  // -1: the auction had none (it joins its category's average)
  int64_t after = 0;
};
SLUICE_STRUCT(Q4Update, category, before, after)

struct MaxBids {  // q7: the bids with the highest price seen (ties kept)
  int64_t price = -1;
  std::vector<BidRow> bids;
};
SLUICE_STRUCT(MaxBids, price, bids)

// q7, stage 2 input, keyed by `windowEnd`: either the highest bids of one
// auction in the window ending there, or (boundary) a bid made at exactly
// that time, which lies in the next window but matches this one's highest
// price too (Flink's q7 joins on W.end - 10 s <= dateTime <= W.end).
struct Q7Part {
  int64_t windowEnd = 0;
  bool boundary = false;
  MaxBids bids;
};
SLUICE_STRUCT(Q7Part, windowEnd, boundary, bids)

struct MaxCount {  // q5: the keys with the highest count seen (ties kept)
  int64_t count = -1;
  std::vector<int64_t> keys;
};
SLUICE_STRUCT(MaxCount, count, keys)

namespace {

using WindowCount = std::tuple<int64_t, int64_t, int64_t>;              // window end, key, count
using Q4Row = std::pair<int64_t, int64_t>;                              // category, average
using Q5Row = std::pair<int64_t, int64_t>;                              // auction, count
using KeyCountWindow = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // key, count, start, end
using Q8Row = std::tuple<int64_t, std::string, int64_t>;  // person id, name, window start
using YsbRow = std::tuple<int64_t, int64_t, int64_t>;     // campaign, window start, views

constexpr int64_t kWindowMs = 10'000;  // q5 size, q7 / q8 / q12 / ysb size, q11 gap
constexpr int64_t kSlideMs = 2'000;    // q5 slide
// ysb's watermark bound: any bound works (its source is in order per subtask,
// see generatorWatermarks); 1 ms keeps its window results prompt.
constexpr std::chrono::milliseconds kYsbOutOfOrderness{1};

// 0.908 * price in thousandths: Flink's DECIMAL(23, 3) result, exactly.
int64_t toEuroThousandths(int64_t price) { return price * 908; }
Q1Row toQ1Row(const Bid& b) {
  return Q1Row{b.auction, b.bidder, toEuroThousandths(b.price), b.dateTime, b.extra};
}
bool isQ3Person(const Person& p) { return p.state == "OR" || p.state == "ID" || p.state == "CA"; }
int64_t tumblingStart(int64_t ts) { return TimeWindow::getWindowStartWithOffset(ts, 0, kWindowMs); }

// ---------------------------------------------------------------------------
// Jobs

// Every source subtask emits its events in event-time order, and all
// subtasks advance together (interleavedIndex). So with any bound >= 0 no
// element is late: a window or timer at time t fires only once every channel
// has passed t, and an element exactly one session gap after a session (or a
// q7 bid at exactly a window's end) has reached its operator before then, as
// the baseline, which sees all events in order, has it. The bound only
// delays the firing: Nexmark's 4 s for the Nexmark queries; ysb keeps 1 ms.
template <class T>
WatermarkStrategy<T> generatorWatermarks(int64_t (*eventTime)(const T&),
                                         std::chrono::milliseconds bound) {
  return WatermarkStrategy<T>::forBoundedOutOfOrderness(bound).withTimestampAssigner(eventTime);
}

// Latency mode: the first generated event marks the source's start.
void noteSourceStart(std::atomic<int64_t>& started) {
  if (started.load(std::memory_order_relaxed) != 0) return;
  int64_t expected = 0;
  started.compare_exchange_strong(expected, wallMicrosNow());
}

int64_t eventTimeOf(const Event& e) { return e.dateTime(); }
int64_t eventTimeOfAd(const AdEvent& e) { return e.eventTime; }

DataStream<Event> nexmarkSource(StreamExecutionEnvironment& env, const JobOptions& o) {
  const int64_t n = o.events;
  const int p = o.parallelism;
  auto watermarks = generatorWatermarks<Event>(&eventTimeOf, o.outOfOrderness);
  if (o.input) {
    if (static_cast<int64_t>(o.input->size()) != n) {
      throw std::invalid_argument("nexmark: JobOptions::input holds " +
                                  std::to_string(o.input->size()) + " events, events is " +
                                  std::to_string(n));
    }
    auto input = o.input;
    auto read = [input, n, p](int64_t i) {
      return (*input)[static_cast<size_t>(interleavedIndex(i, n, p))];
    };
    return env.fromSource(GeneratorSource(read, n, o.wallRatePerSecond), watermarks,
                          "Nexmark Source");
  }
  const GeneratorConfig gen = o.generator;
  auto started = o.sourceStartMicros;
  auto generate = [gen, n, p, started](int64_t i) {
    if (started) noteSourceStart(*started);
    return generateEvent(gen, interleavedIndex(i, n, p));
  };
  return env.fromSource(GeneratorSource(generate, n, o.wallRatePerSecond), watermarks,
                        "Nexmark Source");
}

// The projections return a reference: the map operator then copies the
// member into its reused output record (keeping the record's string
// capacity) instead of building a new object per event.
auto personsOf(DataStream<Event> events) {
  return events.filter([](const Event& e) { return e.type == EventType::kPerson; })
      .name("Persons")
      .map([](const Event& e) -> const Person& { return e.person; })
      .name("Person");
}

auto auctionsOf(DataStream<Event> events) {
  return events.filter([](const Event& e) { return e.type == EventType::kAuction; })
      .name("Auctions")
      .map([](const Event& e) -> const Auction& { return e.auction; })
      .name("Auction");
}

auto bidsOf(DataStream<Event> events) {
  return events.filter([](const Event& e) { return e.type == EventType::kBid; })
      .name("Bids")
      .map([](const Event& e) -> const Bid& { return e.bid; })
      .name("Bid");
}

// One column of the bids, as Flink's planner prunes a query's input to the
// columns it reads (q5: auction, q11 and q12: bidder); the records keep the
// source's timestamps.
template <class F>
auto bidColumn(DataStream<Event> events, F column, const char* name) {
  return events.filter([](const Event& e) { return e.type == EventType::kBid; })
      .name("Bids")
      .map([column](const Event& e) -> int64_t { return column(e.bid); })
      .name(name);
}

int64_t identity(const int64_t& v) { return v; }

template <class T>
class CountAggregate final : public AggregateFunction<T, int64_t, int64_t> {
 public:
  int64_t createAccumulator() override { return 0; }
  int64_t add(const T&, int64_t acc) override { return acc + 1; }
  int64_t getResult(const int64_t& acc) override { return acc; }
  int64_t merge(int64_t a, int64_t b) override { return a + b; }
};

// (window end, key, count)
class WithWindowEnd final
    : public ProcessWindowFunction<int64_t, WindowCount, int64_t, TimeWindow> {
 public:
  void process(const int64_t& key, Context& ctx, const std::vector<int64_t>& counts,
               Collector<WindowCount>& out) override {
    out.collect(WindowCount{ctx.window().getEnd(), key, counts.front()});
  }
};

// (key, count, window start, window end)
class WithWindowBounds final
    : public ProcessWindowFunction<int64_t, KeyCountWindow, int64_t, TimeWindow> {
 public:
  void process(const int64_t& key, Context& ctx, const std::vector<int64_t>& counts,
               Collector<KeyCountWindow>& out) override {
    out.collect(
        KeyCountWindow{key, counts.front(), ctx.window().getStart(), ctx.window().getEnd()});
  }
};

// q3: persons keyed by id connected to auctions keyed by seller; a
// person's auctions that came before the person wait in list state.
class LocalSellerJoin final : public KeyedCoProcessFunction<int64_t, Person, Auction, Q3Row> {
 public:
  void open() override {
    person_ = &getRuntimeContext().getState(ValueStateDescriptor<Q3Row>("person"));
    waiting_ = &getRuntimeContext().getListState(ListStateDescriptor<int64_t>("auctions"));
  }
  void processElement1(const Person& p, Context&, Collector<Q3Row>& out) override {
    Q3Row row{p.name, p.city, p.state, 0};
    for (int64_t auction : waiting_->get()) {
      row.auctionId = auction;
      out.collect(row);
    }
    waiting_->clear();
    person_->update(row);
  }
  void processElement2(const Auction& a, Context&, Collector<Q3Row>& out) override {
    std::optional<Q3Row> person = person_->value();
    if (!person) {
      waiting_->add(a.id);
      return;
    }
    person->auctionId = a.id;
    out.collect(*person);
  }

 private:
  ValueState<Q3Row>* person_ = nullptr;
  ListState<int64_t>* waiting_ = nullptr;
};

// Folds a bid into its auction; whether the auction's final price rose.
bool considerBid(AuctionState& a, int64_t dateTime, int64_t price) {
  if (dateTime < a.dateTime || dateTime > a.expires || price <= a.best) return false;
  a.best = price;
  return true;
}

// q4, stage 1: Flink's `auction A, bid B WHERE A.id = B.auction AND
// B.dateTime BETWEEN A.dateTime AND A.expires GROUP BY A.id, A.category` with
// MAX(B.price): auctions connected to bids, both keyed by auction id; emits
// an update whenever an auction's highest matching bid rises. Bids that come
// before their auction (from another source subtask, or naming an auction
// not created yet) wait in list state. As Flink's regular join keeps its
// inputs, the auction's state is kept for the whole run (no expiry timer).
class FinalPrice final : public KeyedCoProcessFunction<int64_t, Q4Auction, Q4Bid, Q4Update> {
 public:
  void open() override {
    auction_ = &getRuntimeContext().getState(ValueStateDescriptor<AuctionState>("auction"));
    early_ = &getRuntimeContext().getListState(
        ListStateDescriptor<std::pair<int64_t, int64_t>>("early-bids"));
  }
  void processElement1(const Q4Auction& auction, Context&, Collector<Q4Update>& out) override {
    AuctionState a{auction.dateTime, auction.expires, auction.category, -1};
    for (const auto& [dateTime, price] : early_->get()) considerBid(a, dateTime, price);
    early_->clear();
    auction_->update(a);
    if (a.best >= 0) out.collect(Q4Update{a.category, -1, a.best});
  }
  void processElement2(const Q4Bid& bid, Context&, Collector<Q4Update>& out) override {
    std::optional<AuctionState> state = auction_->value();
    if (!state) {
      early_->add({bid.dateTime, bid.price});
      return;
    }
    const int64_t before = state->best;
    if (!considerBid(*state, bid.dateTime, bid.price)) return;
    auction_->update(*state);
    out.collect(Q4Update{state->category, before, state->best});
  }

 private:
  ValueState<AuctionState>* auction_ = nullptr;
  ListState<std::pair<int64_t, int64_t>>* early_ = nullptr;
};

// Flink's AVG over BIGINT: a BIGINT, sum / count with integer division.
int64_t averageOf(const std::pair<int64_t, int64_t>& sumCount) {
  return sumCount.first / sumCount.second;
}

// q4, stage 2: keyed by category; AVG(final) over the category's auctions,
// retracting an auction's previous final price when it rises. Emits the new
// average whenever it changes (Flink's group aggregation emits an update
// only when the result differs), each row replacing the category's previous
// one at the sink.
class AveragePrice final : public KeyedProcessFunction<int64_t, Q4Update, Q4Row> {
 public:
  void open() override {
    sumCount_ = &getRuntimeContext().getState(
        ValueStateDescriptor<std::pair<int64_t, int64_t>>("sum-count"));
  }
  void processElement(const Q4Update& u, Context&, Collector<Q4Row>& out) override {
    const std::optional<std::pair<int64_t, int64_t>> old = sumCount_->value();
    std::pair<int64_t, int64_t> sc = old.value_or(std::pair<int64_t, int64_t>{0, 0});
    if (u.before < 0) {
      sc.first += u.after;
      sc.second += 1;
    } else {
      sc.first += u.after - u.before;
    }
    sumCount_->update(sc);
    const int64_t average = averageOf(sc);
    if (!old || averageOf(*old) != average) out.collect(Q4Row{u.category, average});
  }

 private:
  ValueState<std::pair<int64_t, int64_t>>* sumCount_ = nullptr;
};

// q5, stage 2: keyed by window end; every (auction, count) with the window's
// highest count, once the watermark has passed the window.
class MaxCountPerWindow final : public KeyedProcessFunction<int64_t, WindowCount, Q5Row> {
 public:
  void open() override {
    max_ = &getRuntimeContext().getState(ValueStateDescriptor<MaxCount>("max"));
  }
  void processElement(const WindowCount& c, Context& ctx, Collector<Q5Row>&) override {
    MaxCount m = max_->value().value_or(MaxCount{});
    const int64_t count = std::get<2>(c);
    if (count > m.count) {
      m.count = count;
      m.keys.assign(1, std::get<1>(c));
    } else if (count == m.count) {
      m.keys.push_back(std::get<1>(c));
    } else {
      return;
    }
    max_->update(m);
    ctx.timerService().registerEventTimeTimer(std::get<0>(c) - 1);
  }
  void onTimer(int64_t, OnTimerContext&, Collector<Q5Row>& out) override {
    std::optional<MaxCount> m = max_->value();
    if (!m) return;
    for (int64_t key : m->keys) out.collect(Q5Row{key, m->count});
    max_->clear();
  }

 private:
  ValueState<MaxCount>* max_ = nullptr;
};

void keepMax(MaxBids& acc, const BidRow& b) {
  if (b.price > acc.price) {
    acc.price = b.price;
    acc.bids.assign(1, b);
  } else if (b.price == acc.price) {
    acc.bids.push_back(b);
  }
}

// q7, stage 1: per group of auctions and window, the highest bids. The
// window's maximum needs no state per auction (Flink's plan aggregates the
// maximum per window, locally in each source subtask and then globally);
// the groups only spread the pre-aggregation over the parallel subtasks.
// Keyed by auction, 2M events kept 121K accumulators for 20 windows, each
// copying about three bids, where the loop keeps one per window.
constexpr int64_t kQ7Groups = 64;
int64_t q7Group(const BidRow& b) { return b.auction % kQ7Groups; }

// q7, stage 1: per key and window, the highest bids.
class MaxBidAggregate final : public AggregateFunction<BidRow, MaxBids, MaxBids> {
 public:
  MaxBids createAccumulator() override { return {}; }
  MaxBids add(const BidRow& b, MaxBids acc) override {
    if (b.price >= acc.price) keepMax(acc, b);
    return acc;
  }
  MaxBids getResult(const MaxBids& acc) override { return acc; }
  MaxBids merge(MaxBids a, MaxBids b) override {
    for (const BidRow& bid : b.bids) keepMax(a, bid);
    return a;
  }
};

class MaxBidsWithWindowEnd final
    : public ProcessWindowFunction<MaxBids, Q7Part, int64_t, TimeWindow> {
 public:
  void process(const int64_t&, Context& ctx, const std::vector<MaxBids>& maxima,
               Collector<Q7Part>& out) override {
    out.collect(Q7Part{ctx.window().getEnd(), false, maxima.front()});
  }
};

bool onWindowBoundary(const BidRow& b) { return b.dateTime == tumblingStart(b.dateTime); }

// q7, stage 2: keyed by window end; once the watermark has passed the window,
// the bids with its highest price: its own, and those made at exactly its
// end time with that price.
class MaxBidPerWindow final : public KeyedProcessFunction<int64_t, Q7Part, BidRow> {
 public:
  void open() override {
    max_ = &getRuntimeContext().getState(ValueStateDescriptor<MaxBids>("max"));
    boundary_ = &getRuntimeContext().getListState(ListStateDescriptor<BidRow>("at-window-end"));
  }
  void processElement(const Q7Part& part, Context& ctx, Collector<BidRow>&) override {
    if (part.boundary) {
      for (const BidRow& b : part.bids.bids) boundary_->add(b);
    } else {
      MaxBids m = max_->value().value_or(MaxBids{});
      if (part.bids.price < m.price) return;
      for (const BidRow& b : part.bids.bids) keepMax(m, b);
      max_->update(m);
    }
    ctx.timerService().registerEventTimeTimer(part.windowEnd - 1);
  }
  void onTimer(int64_t, OnTimerContext&, Collector<BidRow>& out) override {
    if (std::optional<MaxBids> m = max_->value()) {
      for (const BidRow& b : m->bids) out.collect(b);
      for (const BidRow& b : boundary_->get()) {
        if (b.price == m->price) out.collect(b);
      }
    }
    max_->clear();
    boundary_->clear();
  }

 private:
  ValueState<MaxBids>* max_ = nullptr;
  ListState<BidRow>* boundary_ = nullptr;
};

// q12: processing-time windows, plus one firing at the end of the input for
// the windows still open then (the final watermark is the input's end), so
// that every bid is counted in some window.
class ProcessingTimeOrEndOfInput final : public Trigger<int64_t, TimeWindow> {
 public:
  TriggerResult onElement(const int64_t&, int64_t, const TimeWindow& window,
                          TriggerContext<TimeWindow>& ctx) override {
    ctx.registerProcessingTimeTimer(window.maxTimestamp());
    ctx.registerEventTimeTimer(kMaxTimestamp);
    return TriggerResult::CONTINUE;
  }
  TriggerResult onProcessingTime(int64_t, const TimeWindow&, TriggerContext<TimeWindow>&) override {
    return TriggerResult::FIRE_AND_PURGE;
  }
  TriggerResult onEventTime(int64_t time, const TimeWindow&, TriggerContext<TimeWindow>&) override {
    return time == kMaxTimestamp ? TriggerResult::FIRE_AND_PURGE : TriggerResult::CONTINUE;
  }
  void clear(const TimeWindow& window, TriggerContext<TimeWindow>& ctx) override {
    ctx.deleteProcessingTimeTimer(window.maxTimestamp());
    ctx.deleteEventTimeTimer(kMaxTimestamp);
  }
  std::string toString() const override { return "ProcessingTimeOrEndOfInput()"; }
};

template <class T>
void sinkChecksum(DataStream<T> rows, std::shared_ptr<ResultCollector> out) {
  rows.sinkTo(ChecksumSink<T>(std::move(out)), "Checksum");
}

void buildYsb(StreamExecutionEnvironment& env, const JobOptions& o,
              std::shared_ptr<ResultCollector> out) {
  const GeneratorConfig gen = o.generator;
  const int64_t n = o.events;
  const int p = o.parallelism;
  auto started = o.sourceStartMicros;
  auto generate = [gen, n, p, started](int64_t i) {
    if (started) noteSourceStart(*started);
    return generateAdEvent(gen, interleavedIndex(i, n, p));
  };
  // The campaign table, as the original loads it from Redis.
  auto campaigns = std::make_shared<std::unordered_map<int64_t, int64_t>>();
  const std::vector<int64_t> table = ysbCampaignOfAd(gen);
  for (size_t ad = 0; ad < table.size(); ++ad) (*campaigns)[static_cast<int64_t>(ad)] = table[ad];
  std::shared_ptr<const std::unordered_map<int64_t, int64_t>> lookup = campaigns;

  auto views =
      env.fromSource(GeneratorSource(generate, n, o.wallRatePerSecond),
                     generatorWatermarks<AdEvent>(&eventTimeOfAd, kYsbOutOfOrderness), "YSB Source")
          .filter([](const AdEvent& e) { return e.eventType == "view"; })
          .name("Views");
  auto campaignViews = views
                           .map([lookup](const AdEvent& e) {
                             return std::pair<int64_t, int64_t>(lookup->at(e.adId), e.eventTime);
                           })
                           .name("Campaign join");
  auto counts = campaignViews.keyBy([](const std::pair<int64_t, int64_t>& v) { return v.first; })
                    .window(TumblingEventTimeWindows::of(std::chrono::milliseconds(kWindowMs)))
                    .aggregate(CountAggregate<std::pair<int64_t, int64_t>>(), WithWindowBounds())
                    .name("Views per campaign")
                    .map([](const KeyCountWindow& r) {
                      return YsbRow{std::get<0>(r), std::get<2>(r), std::get<1>(r)};
                    });
  sinkChecksum<YsbRow>(counts, std::move(out));
}

// ---------------------------------------------------------------------------
// Baselines: events in index order, one thread, std containers. Each takes
// `each`, callable as each(f) to call f(const Event&) on every event in order.

// The generator's events 0..n-1.
struct GeneratedEvents {
  const GeneratorConfig& gen;
  int64_t n;
  template <class F>
  void operator()(F&& f) const {
    for (int64_t i = 0; i < n; ++i) f(generateEvent(gen, i));
  }
};

template <class Each>
Checksum baselineQ3(Each&& each) {
  Checksum c;
  std::unordered_map<int64_t, Q3Row> persons;
  std::unordered_map<int64_t, std::vector<int64_t>> waiting;  // seller -> auctions
  each([&](const Event& e) {
    if (e.type == EventType::kPerson && isQ3Person(e.person)) {
      Q3Row row{e.person.name, e.person.city, e.person.state, 0};
      if (auto it = waiting.find(e.person.id); it != waiting.end()) {
        for (int64_t auction : it->second) {
          row.auctionId = auction;
          c.add(rowHash(row));
        }
        waiting.erase(it);
      }
      persons[e.person.id] = row;
    } else if (e.type == EventType::kAuction && e.auction.category == 10) {
      if (auto it = persons.find(e.auction.seller); it != persons.end()) {
        Q3Row row = it->second;
        row.auctionId = e.auction.id;
        c.add(rowHash(row));
      } else {
        waiting[e.auction.seller].push_back(e.auction.id);
      }
    }
  });
  return c;
}

template <class Each>
Checksum baselineQ4(Each&& each) {
  // A bid may name an auction not created yet (Nexmark's id lead); at event-
  // time rates above 10K/s it can share the auction's millisecond and so
  // fall within [dateTime, expires]. Such bids wait for their auction.
  std::unordered_map<int64_t, AuctionState> auctions;
  std::unordered_map<int64_t, std::vector<std::pair<int64_t, int64_t>>> early;
  each([&](const Event& e) {
    if (e.type == EventType::kAuction) {
      AuctionState a{e.auction.dateTime, e.auction.expires, e.auction.category, -1};
      if (auto it = early.find(e.auction.id); it != early.end()) {
        for (const auto& [dateTime, price] : it->second) considerBid(a, dateTime, price);
        early.erase(it);
      }
      auctions[e.auction.id] = a;
    } else if (e.type == EventType::kBid) {
      if (auto it = auctions.find(e.bid.auction); it != auctions.end()) {
        considerBid(it->second, e.bid.dateTime, e.bid.price);
      } else {
        early[e.bid.auction].emplace_back(e.bid.dateTime, e.bid.price);
      }
    }
  });
  std::map<int64_t, std::pair<int64_t, int64_t>> perCategory;  // sum, count
  for (const auto& [id, a] : auctions) {
    if (a.best < 0) continue;
    auto& sc = perCategory[a.category];
    sc.first += a.best;
    sc.second += 1;
  }
  Checksum c;
  for (const auto& [category, sc] : perCategory) c.add(rowHash(Q4Row{category, averageOf(sc)}));
  return c;
}

template <class Each>
Checksum baselineQ5(Each&& each) {
  Checksum c;
  std::map<int64_t, std::unordered_map<int64_t, int64_t>> windows;  // start -> auction -> count
  auto closeUpTo = [&](int64_t ts) {
    while (!windows.empty() && windows.begin()->first + kWindowMs <= ts) {
      const auto& counts = windows.begin()->second;
      int64_t max = 0;
      for (const auto& [auction, count] : counts) max = std::max(max, count);
      for (const auto& [auction, count] : counts) {
        if (count == max) c.add(rowHash(Q5Row{auction, count}));
      }
      windows.erase(windows.begin());
    }
  };
  each([&](const Event& e) {
    if (e.type != EventType::kBid) return;
    const int64_t ts = e.bid.dateTime;
    closeUpTo(ts);
    const int64_t last = TimeWindow::getWindowStartWithOffset(ts, 0, kSlideMs);
    for (int64_t start = last; start > ts - kWindowMs; start -= kSlideMs) {
      ++windows[start][e.bid.auction];
    }
  });
  closeUpTo(kMaxTimestamp);
  return c;
}

template <class Each>
Checksum baselineQ7(Each&& each) {
  Checksum c;
  int64_t windowStart = kMinTimestamp;
  MaxBids max;
  // The last closed window's end and highest price: a bid made at exactly
  // that time (in the next window) with that price matches it too.
  int64_t closedEnd = kMinTimestamp;
  int64_t closedPrice = -1;
  auto close = [&] {
    for (const BidRow& b : max.bids) c.add(rowHash(b));
    closedEnd = max.bids.empty() ? kMinTimestamp : windowStart + kWindowMs;
    closedPrice = max.price;
    max = MaxBids{};
  };
  each([&](const Event& e) {
    if (e.type != EventType::kBid) return;
    const int64_t start = tumblingStart(e.bid.dateTime);
    if (start != windowStart) {
      close();
      windowStart = start;
    }
    if (e.bid.dateTime == closedEnd && e.bid.price == closedPrice) c.add(rowHash(toBidRow(e.bid)));
    if (e.bid.price >= max.price) keepMax(max, toBidRow(e.bid));
  });
  close();
  return c;
}

template <class Each>
Checksum baselineQ8(Each&& each) {
  Checksum c;
  int64_t windowStart = kMinTimestamp;
  std::vector<std::pair<int64_t, std::string>> persons;
  std::unordered_set<int64_t> sellers;
  auto close = [&] {
    for (const auto& [id, name] : persons) {
      if (sellers.count(id) != 0) c.add(rowHash(Q8Row{id, name, windowStart}));
    }
    persons.clear();
    sellers.clear();
  };
  each([&](const Event& e) {
    if (e.type == EventType::kBid) return;
    const int64_t start = tumblingStart(e.dateTime());
    if (start != windowStart) {
      close();
      windowStart = start;
    }
    if (e.type == EventType::kPerson) {
      persons.emplace_back(e.person.id, e.person.name);
    } else {
      sellers.insert(e.auction.seller);
    }
  });
  close();
  return c;
}

template <class Each>
Checksum baselineQ11(Each&& each) {
  struct Session {
    int64_t start;
    int64_t last;
    int64_t count;
  };
  Checksum c;
  std::unordered_map<int64_t, Session> sessions;
  auto emit = [&](int64_t bidder, const Session& s) {
    c.add(rowHash(KeyCountWindow{bidder, s.count, s.start, s.last + kWindowMs}));
  };
  each([&](const Event& e) {
    if (e.type != EventType::kBid) return;
    const int64_t ts = e.bid.dateTime;
    auto [it, fresh] = sessions.try_emplace(e.bid.bidder, Session{ts, ts, 0});
    Session& s = it->second;
    if (!fresh && ts > s.last + kWindowMs) {  // a gap: the session ended
      emit(e.bid.bidder, s);
      s = Session{ts, ts, 0};
    }
    s.last = ts;
    ++s.count;
  });
  for (const auto& [bidder, s] : sessions) emit(bidder, s);
  return c;
}

template <class Each>
Checksum baselineQ12(Each&& each) {
  std::map<int64_t, int64_t> perBidder;
  each([&](const Event& e) {
    if (e.type == EventType::kBid) ++perBidder[e.bid.bidder];
  });
  return keyCountChecksum(perBidder);
}

template <class Each>
Checksum nexmarkBaseline(Query q, Each&& each) {
  switch (q) {
    case Query::kQ0:
    case Query::kQ1:
    case Query::kQ2: {
      Checksum c;
      each([&](const Event& e) {
        if (auto h = statelessRowHash(q, e)) c.add(*h);
      });
      return c;
    }
    case Query::kQ3: return baselineQ3(each);
    case Query::kQ4: return baselineQ4(each);
    case Query::kQ5: return baselineQ5(each);
    case Query::kQ7: return baselineQ7(each);
    case Query::kQ8: return baselineQ8(each);
    case Query::kQ11: return baselineQ11(each);
    case Query::kQ12: return baselineQ12(each);
    case Query::kYsb: break;
  }
  throw std::invalid_argument("nexmark baseline: " + queryName(q) + " reads ad events");
}

Checksum baselineYsb(const GeneratorConfig& gen, int64_t n) {
  std::unordered_map<int64_t, int64_t> campaigns;
  const std::vector<int64_t> table = ysbCampaignOfAd(gen);
  for (size_t ad = 0; ad < table.size(); ++ad) campaigns[static_cast<int64_t>(ad)] = table[ad];
  Checksum c;
  int64_t windowStart = kMinTimestamp;
  std::unordered_map<int64_t, int64_t> views;  // campaign -> views in the current window
  auto close = [&] {
    for (const auto& [campaign, count] : views)
      c.add(rowHash(YsbRow{campaign, windowStart, count}));
    views.clear();
  };
  for (int64_t i = 0; i < n; ++i) {
    const AdEvent e = generateAdEvent(gen, i);
    if (e.eventType != "view") continue;
    const int64_t start = tumblingStart(e.eventTime);
    if (start != windowStart) {
      close();
      windowStart = start;
    }
    ++views[campaigns.at(e.adId)];
  }
  close();
  return c;
}

}  // namespace

const std::vector<Query>& allQueries() {
  static const std::vector<Query> all = {Query::kQ0,  Query::kQ1,  Query::kQ2, Query::kQ3,
                                         Query::kQ4,  Query::kQ5,  Query::kQ7, Query::kQ8,
                                         Query::kQ11, Query::kQ12, Query::kYsb};
  return all;
}

std::string queryName(Query q) {
  switch (q) {
    case Query::kQ0: return "nexmark-q0";
    case Query::kQ1: return "nexmark-q1";
    case Query::kQ2: return "nexmark-q2";
    case Query::kQ3: return "nexmark-q3";
    case Query::kQ4: return "nexmark-q4";
    case Query::kQ5: return "nexmark-q5";
    case Query::kQ7: return "nexmark-q7";
    case Query::kQ8: return "nexmark-q8";
    case Query::kQ11: return "nexmark-q11";
    case Query::kQ12: return "nexmark-q12";
    case Query::kYsb: break;
  }
  return "ysb";
}

std::optional<Query> parseQuery(const std::string& name) {
  for (Query q : allQueries()) {
    if (queryName(q) == name) return q;
  }
  return std::nullopt;
}

void buildQuery(StreamExecutionEnvironment& env, Query q, const JobOptions& o,
                std::shared_ptr<ResultCollector> out) {
  if (q == Query::kYsb) {
    buildYsb(env, o, std::move(out));
    return;
  }
  const auto window = std::chrono::milliseconds(kWindowMs);
  auto events = nexmarkSource(env, o);
  switch (q) {
    case Query::kQ0: {
      auto bids = events.filter([](const Event& e) { return e.type == EventType::kBid; })
                      .name("Bids")
                      .map([](const Event& e) { return toBidRow(e.bid); })
                      .name("Bid columns");
      sinkChecksum<BidRow>(bids, std::move(out));
      return;
    }
    case Query::kQ1: {
      auto euro = events.filter([](const Event& e) { return e.type == EventType::kBid; })
                      .name("Bids")
                      .map([](const Event& e) { return toQ1Row(e.bid); })
                      .name("Price in euro");
      sinkChecksum<Q1Row>(euro, std::move(out));
      return;
    }
    case Query::kQ2: {
      auto selected =
          bidsOf(events)
              .filter([](const Bid& b) { return b.auction % 123 == 0; })
              .map([](const Bid& b) { return std::pair<int64_t, int64_t>(b.auction, b.price); });
      sinkChecksum<std::pair<int64_t, int64_t>>(selected, std::move(out));
      return;
    }
    case Query::kQ3: {
      auto persons = personsOf(events).filter(isQ3Person).name("Persons in OR, ID, CA");
      auto auctions = auctionsOf(events)
                          .filter([](const Auction& a) { return a.category == 10; })
                          .name("Auctions of category 10");
      auto joined = persons.keyBy(&Person::id)
                        .connect(auctions.keyBy(&Auction::seller))
                        .process(LocalSellerJoin())
                        .name("Local seller join");
      sinkChecksum<Q3Row>(joined, std::move(out));
      return;
    }
    case Query::kQ4: {
      auto auctions = events.filter([](const Event& e) { return e.type == EventType::kAuction; })
                          .name("Auctions")
                          .map([](const Event& e) {
                            const Auction& a = e.auction;
                            return Q4Auction{a.id, a.dateTime, a.expires, a.category};
                          })
                          .name("Auction columns");
      auto bids = events.filter([](const Event& e) { return e.type == EventType::kBid; })
                      .name("Bids")
                      .map([](const Event& e) {
                        return Q4Bid{e.bid.auction, e.bid.price, e.bid.dateTime};
                      })
                      .name("Bid columns");
      auto averages = auctions.keyBy(&Q4Auction::id)
                          .connect(bids.keyBy(&Q4Bid::auction))
                          .process(FinalPrice())
                          .name("Final price per auction")
                          .keyBy(&Q4Update::category)
                          .process(AveragePrice())
                          .name("Average per category");
      averages.sinkTo(UpsertSink<Q4Row>(std::move(out)), "Latest average per category");
      return;
    }
    case Query::kQ5: {
      auto hot =
          bidColumn(
              events, [](const Bid& b) { return b.auction; }, "Bid auctions")
              .keyBy(&identity)
              .window(SlidingEventTimeWindows::of(window, std::chrono::milliseconds(kSlideMs)))
              .aggregate(CountAggregate<int64_t>(), WithWindowEnd())
              .name("Bids per auction")
              .keyBy([](const WindowCount& c) { return std::get<0>(c); })
              .process(MaxCountPerWindow())
              .name("Hottest auctions");
      sinkChecksum<Q5Row>(hot, std::move(out));
      return;
    }
    case Query::kQ7: {
      // The columns q7 selects (not channel and url).
      auto bids = events.filter([](const Event& e) { return e.type == EventType::kBid; })
                      .name("Bids")
                      .map([](const Event& e) { return toBidRow(e.bid); })
                      .name("Bid columns");
      auto perGroup = bids.keyBy(&q7Group)
                          .window(TumblingEventTimeWindows::of(window))
                          .aggregate(MaxBidAggregate(), MaxBidsWithWindowEnd())
                          .name("Highest bids per auction group");
      auto atWindowEnd = bids.filter(onWindowBoundary)
                             .name("Bids at a window end")
                             .map([](const BidRow& b) {
                               return Q7Part{b.dateTime, true, MaxBids{b.price, {b}}};
                             })
                             .name("As the previous window's candidates");
      auto highest = perGroup.unionWith(atWindowEnd)
                         .keyBy(&Q7Part::windowEnd)
                         .process(MaxBidPerWindow())
                         .name("Highest bids");
      sinkChecksum<BidRow>(highest, std::move(out));
      return;
    }
    case Query::kQ8: {
      using NewPerson = std::tuple<int64_t, std::string, int64_t>;  // id, name, dateTime
      auto persons = events.filter([](const Event& e) { return e.type == EventType::kPerson; })
                         .map([](const Event& e) {
                           return NewPerson{e.person.id, e.person.name, e.person.dateTime};
                         });
      auto sellers = events.filter([](const Event& e) { return e.type == EventType::kAuction; })
                         .map([](const Event& e) { return e.auction.seller; });
      auto newSellers = persons.coGroup(sellers)
                            .where([](const NewPerson& p) { return std::get<0>(p); })
                            .equalTo([](const int64_t& seller) { return seller; })
                            .window(TumblingEventTimeWindows::of(window))
                            .apply([](const std::vector<NewPerson>& ps,
                                      const std::vector<int64_t>& ss, Collector<Q8Row>& rows) {
                              if (ss.empty()) return;
                              for (const NewPerson& p : ps) {
                                rows.collect(Q8Row{std::get<0>(p), std::get<1>(p),
                                                   tumblingStart(std::get<2>(p))});
                              }
                            });
      sinkChecksum<Q8Row>(newSellers, std::move(out));
      return;
    }
    case Query::kQ11: {
      auto sessions = bidColumn(
                          events, [](const Bid& b) { return b.bidder; }, "Bidders")
                          .keyBy(&identity)
                          .window(EventTimeSessionWindows::withGap(window))
                          .aggregate(CountAggregate<int64_t>(), WithWindowBounds())
                          .name("Bid sessions");
      sinkChecksum<KeyCountWindow>(sessions, std::move(out));
      return;
    }
    case Query::kQ12: {
      auto perWindow = bidColumn(
                           events, [](const Bid& b) { return b.bidder; }, "Bidders")
                           .keyBy(&identity)
                           .window(TumblingProcessingTimeWindows::of(window))
                           .trigger(ProcessingTimeOrEndOfInput())
                           .aggregate(CountAggregate<int64_t>(), WithWindowBounds())
                           .name("Bids per processing-time window");
      perWindow.sinkTo(KeyCountSink<KeyCountWindow>(std::move(out)), "Per-bidder totals");
      return;
    }
    case Query::kYsb: break;
  }
}

Checksum runQuery(Query q, const JobOptions& options) {
  StreamExecutionEnvironment env;
  env.setParallelism(options.parallelism);
  auto out = std::make_shared<ResultCollector>();
  buildQuery(env, q, options, out);
  env.execute(queryName(q));
  return out->result();
}

bool isStateless(Query q) { return q == Query::kQ0 || q == Query::kQ1 || q == Query::kQ2; }

std::optional<uint64_t> statelessRowHash(Query q, const Event& e) {
  switch (q) {
    case Query::kQ0:
      if (e.type != EventType::kBid) return std::nullopt;
      return rowHash(toBidRow(e.bid));
    case Query::kQ1:
      if (e.type != EventType::kBid) return std::nullopt;
      return rowHash(toQ1Row(e.bid));
    case Query::kQ2:
      if (e.type != EventType::kBid || e.bid.auction % 123 != 0) return std::nullopt;
      return rowHash(std::pair<int64_t, int64_t>(e.bid.auction, e.bid.price));
    default: break;
  }
  throw std::invalid_argument("statelessRowHash: " + queryName(q) + " keeps state");
}

BaselineLatency runBaselineLatency(Query q, const GeneratorConfig& gen, int64_t n) {
  using Clock = std::chrono::steady_clock;
  if (!isStateless(q)) {
    throw std::invalid_argument("runBaselineLatency: " + queryName(q) + " keeps state");
  }
  BaselineLatency result;
  const double intervalNs = 1e9 / static_cast<double>(gen.eventsPerSecond);
  const Clock::time_point epoch = Clock::now();
  const int64_t startMicros = wallMicrosNow();
  for (int64_t i = 0; i < n; ++i) {
    const auto due = epoch + std::chrono::nanoseconds(static_cast<int64_t>(intervalNs * i));
    if (due > Clock::now()) std::this_thread::sleep_until(due);
    const Event e = generateEvent(gen, i);
    const std::optional<uint64_t> h = statelessRowHash(q, e);
    if (!h) continue;
    result.checksum.add(*h);
    result.latencies.record(wallMicrosNow() - (startMicros + (e.dateTime() - gen.baseTime) * 1000));
  }
  return result;
}

Checksum runBaseline(Query q, const GeneratorConfig& gen, int64_t n) {
  if (q == Query::kYsb) return baselineYsb(gen, n);
  return nexmarkBaseline(q, GeneratedEvents{gen, n});
}

Checksum runBaseline(Query q, const std::vector<Event>& events) {
  return nexmarkBaseline(q, [&](auto&& f) {
    for (const Event& e : events) f(e);
  });
}

}  // namespace sluice::nexmark
