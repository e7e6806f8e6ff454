// Event time: where records get their timestamps and how watermarks are made.
//
//   auto strategy = WatermarkStrategy<Event>::forBoundedOutOfOrderness(std::chrono::seconds(5))
//                       .withTimestampAssigner([](const Event& e, int64_t) { return e.time; })
//                       .withIdleness(std::chrono::minutes(1));
//   stream.assignTimestampsAndWatermarks(strategy)   // or env.fromSource(src, strategy, name)
//
// As in Flink: a WatermarkGenerator sees every event (onEvent) and is asked
// for a watermark every `pipeline.auto-watermark-interval` (onPeriodicEmit,
// default 200 ms; 0 disables periodic emission). Emitted watermarks never go
// backwards. Bounded out-of-orderness emits maxTimestamp - delay - 1. The
// end of a bounded input still emits the maximum watermark, so every
// event-time window and timer fires before the job finishes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include <sluice/core/clock.h>
#include <sluice/core/config_options.h>
#include <sluice/core/owned.h>
#include <sluice/core/status.h>
#include <sluice/core/stream_element.h>
#include <sluice/graph/operator.h>

namespace sluice {

// Where a generator emits watermarks and idleness.
class WatermarkOutput {
 public:
  virtual ~WatermarkOutput() = default;
  virtual void emitWatermark(Watermark watermark) = 0;
  // No more events for now: downstream stops waiting for this input's
  // watermark until the next event or watermark.
  virtual void markIdle() = 0;
  virtual void markActive() = 0;
};

template <class T>
class WatermarkGenerator {
 public:
  virtual ~WatermarkGenerator() = default;
  // Every event, with the timestamp the assigner gave it. Punctuated
  // generators emit here.
  virtual void onEvent(const T& event, int64_t eventTimestamp, WatermarkOutput& output) = 0;
  // Every auto-watermark interval. Periodic generators emit here.
  virtual void onPeriodicEmit(WatermarkOutput& output) = 0;
  // True when onEvent() never emits (a periodic generator): a source that
  // generates watermarks may then show the generator an event before it
  // hands the event on, which lets it move the event instead of copying it.
  // False by default, so a punctuated watermark always follows its event.
  virtual bool emitsOnlyPeriodically() const { return false; }
};

// What a generator factory may use: processing time (the job's clock).
class WatermarkGeneratorContext {
 public:
  virtual ~WatermarkGeneratorContext() = default;
  virtual const Clock& clock() const = 0;
};

// Flink's BoundedOutOfOrdernessWatermarks: the watermark trails the highest
// timestamp seen by the bound, minus 1 ms.
template <class T>
class BoundedOutOfOrdernessWatermarks : public WatermarkGenerator<T> {
 public:
  explicit BoundedOutOfOrdernessWatermarks(std::chrono::milliseconds maxOutOfOrderness)
      : delay_(maxOutOfOrderness.count()) {
    if (delay_ < 0) {
      throw SluiceException("forBoundedOutOfOrderness: the bound must not be negative, got " +
                            std::to_string(delay_) + " ms");
    }
    // Start where maxTimestamp - delay - 1 does not overflow.
    maxTimestamp_ = kMinTimestamp + delay_ + 1;
  }
  void onEvent(const T&, int64_t eventTimestamp, WatermarkOutput&) override {
    if (eventTimestamp > maxTimestamp_) maxTimestamp_ = eventTimestamp;
  }
  void onPeriodicEmit(WatermarkOutput& output) override {
    output.emitWatermark(Watermark{maxTimestamp_ - delay_ - 1});
  }
  // Not for subclasses, which may emit in onEvent.
  bool emitsOnlyPeriodically() const override {
    return typeid(*this) == typeid(BoundedOutOfOrdernessWatermarks);
  }

 private:
  int64_t delay_;
  int64_t maxTimestamp_;
};

// Ascending timestamps: bounded out-of-orderness with a bound of 0.
template <class T>
class AscendingTimestampsWatermarks final : public BoundedOutOfOrdernessWatermarks<T> {
 public:
  AscendingTimestampsWatermarks()
      : BoundedOutOfOrdernessWatermarks<T>(std::chrono::milliseconds(0)) {}
  bool emitsOnlyPeriodically() const override { return true; }
};

template <class T>
class NoWatermarksGenerator final : public WatermarkGenerator<T> {
 public:
  void onEvent(const T&, int64_t, WatermarkOutput&) override {}
  void onPeriodicEmit(WatermarkOutput&) override {}
  bool emitsOnlyPeriodically() const override { return true; }
};

// Marks the output idle when no event came for `idleTimeout` of processing
// time (Flink's WatermarksWithIdleness and IdlenessTimer: inactivity is
// measured from the first periodic check that saw no new event, and must
// exceed the timeout); the next event ends it.
template <class T>
class WatermarksWithIdleness final : public WatermarkGenerator<T> {
 public:
  WatermarksWithIdleness(std::unique_ptr<WatermarkGenerator<T>> inner,
                         std::chrono::milliseconds idleTimeout, const Clock& clock)
      : inner_(std::move(inner)), timeout_(idleTimeout.count()), clock_(&clock) {
    if (timeout_ <= 0) {
      throw SluiceException("withIdleness: the timeout must be positive, got " +
                            std::to_string(timeout_) + " ms");
    }
  }
  void onEvent(const T& event, int64_t ts, WatermarkOutput& output) override {
    inner_->onEvent(event, ts, output);
    ++events_;
    idleNow_ = false;
  }
  void onPeriodicEmit(WatermarkOutput& output) override {
    if (checkIfIdle()) {
      if (!idleNow_) {
        output.markIdle();
        idleNow_ = true;
      }
    } else {
      inner_->onPeriodicEmit(output);
    }
  }
  bool emitsOnlyPeriodically() const override { return inner_->emitsOnlyPeriodically(); }

 private:
  bool checkIfIdle() {
    if (events_ != eventsAtLastCheck_) {
      eventsAtLastCheck_ = events_;
      inactiveSince_.reset();
      return false;
    }
    const int64_t now = clock_->currentTimeMillis();
    if (!inactiveSince_) {
      inactiveSince_ = now;
      return false;
    }
    return now - *inactiveSince_ > timeout_;
  }

  std::unique_ptr<WatermarkGenerator<T>> inner_;
  int64_t timeout_;
  const Clock* clock_;
  uint64_t events_ = 0;
  uint64_t eventsAtLastCheck_ = 0;
  std::optional<int64_t> inactiveSince_;
  bool idleNow_ = false;
};

// How a stream gets timestamps and watermarks. Copyable; each parallel
// instance creates its own generator.
template <class T>
class WatermarkStrategy {
 public:
  using GeneratorFactory =
      std::function<std::unique_ptr<WatermarkGenerator<T>>(const WatermarkGeneratorContext&)>;
  // (event, timestamp the record already has or kMinTimestamp) -> timestamp.
  using TimestampAssigner = std::function<int64_t(const T&, int64_t)>;

  static WatermarkStrategy forBoundedOutOfOrderness(std::chrono::milliseconds maxOutOfOrderness) {
    BoundedOutOfOrdernessWatermarks<T> check(maxOutOfOrderness);  // validates now
    (void)check;
    return WatermarkStrategy([maxOutOfOrderness](const WatermarkGeneratorContext&) {
      return internal::makeOwned<BoundedOutOfOrdernessWatermarks<T>>(maxOutOfOrderness);
    });
  }
  static WatermarkStrategy forMonotonousTimestamps() {
    return WatermarkStrategy([](const WatermarkGeneratorContext&) {
      return internal::makeOwned<AscendingTimestampsWatermarks<T>>();
    });
  }
  // Ingestion time: each record gets the processing time at which it passes
  // this point (Flink's IngestionTimeAssigner), and watermarks follow it as
  // with monotonous timestamps.
  static WatermarkStrategy forIngestionTime() {
    WatermarkStrategy s = forMonotonousTimestamps();
    s.ingestionTime_ = true;
    return s;
  }
  static WatermarkStrategy noWatermarks() {
    return WatermarkStrategy([](const WatermarkGeneratorContext&) {
      return internal::makeOwned<NoWatermarksGenerator<T>>();
    });
  }
  // `factory`: std::unique_ptr<WatermarkGenerator<T>>(const WatermarkGeneratorContext&),
  // or a callable with no argument.
  template <class F>
  static WatermarkStrategy forGenerator(F factory) {
    if constexpr (std::is_invocable_v<F&, const WatermarkGeneratorContext&>) {
      return WatermarkStrategy([factory](const WatermarkGeneratorContext& c) mutable
                               -> std::unique_ptr<WatermarkGenerator<T>> { return factory(c); });
    } else {
      static_assert(std::is_invocable_v<F&>,
                    "WatermarkStrategy::forGenerator(f): f must be callable as "
                    "f(const WatermarkGeneratorContext&) or f() and return "
                    "std::unique_ptr<WatermarkGenerator<T>>");
      return WatermarkStrategy([factory](const WatermarkGeneratorContext&) mutable
                               -> std::unique_ptr<WatermarkGenerator<T>> { return factory(); });
    }
  }

  // f: int64_t(const T& event, int64_t recordTimestamp) or int64_t(const T&).
  template <class F>
  WatermarkStrategy withTimestampAssigner(F f) const {
    WatermarkStrategy copy = *this;
    if constexpr (std::is_invocable_r_v<int64_t, F&, const T&, int64_t>) {
      copy.assigner_ = [f](const T& e, int64_t ts) mutable -> int64_t { return f(e, ts); };
    } else {
      static_assert(std::is_invocable_r_v<int64_t, F&, const T&>,
                    "withTimestampAssigner(f): f must be int64_t(const T& event, int64_t "
                    "recordTimestamp) or int64_t(const T& event)");
      copy.assigner_ = [f](const T& e, int64_t) mutable -> int64_t { return f(e); };
    }
    return copy;
  }

  template <class Rep, class Period>
  WatermarkStrategy withIdleness(std::chrono::duration<Rep, Period> idleTimeout) const {
    auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(idleTimeout);
    if (timeout.count() <= 0) {
      throw SluiceException("withIdleness: the timeout must be positive, got " +
                            std::to_string(timeout.count()) + " ms");
    }
    WatermarkStrategy copy = *this;
    GeneratorFactory inner = factory_;
    copy.factory_ = [inner, timeout](const WatermarkGeneratorContext& c) {
      return internal::makeOwned<WatermarksWithIdleness<T>>(inner(c), timeout, c.clock());
    };
    return copy;
  }

  std::unique_ptr<WatermarkGenerator<T>> createWatermarkGenerator(
      const WatermarkGeneratorContext& context) const {
    return factory_(context);
  }
  // Null when records keep the timestamp they have.
  const TimestampAssigner& timestampAssigner() const { return assigner_; }
  // Whether records are stamped with processing time (forIngestionTime).
  bool isIngestionTime() const { return ingestionTime_; }

 private:
  explicit WatermarkStrategy(GeneratorFactory f) : factory_(std::move(f)) {}
  GeneratorFactory factory_;
  TimestampAssigner assigner_;
  bool ingestionTime_ = false;
};

namespace internal {

// The timestamp assigner and the watermark generator of one subtask, with
// the watermarks and watermark status they produce going to `out`: what
// Flink's TimestampsAndWatermarksOperator and its SourceOperator with a
// WatermarkStrategy have in common. Emitted watermarks never go back.
template <class T>
class WatermarkStamper final : private WatermarkOutput, private WatermarkGeneratorContext {
 public:
  explicit WatermarkStamper(WatermarkStrategy<T> strategy) : strategy_(std::move(strategy)) {}
  WatermarkStamper(const WatermarkStamper&) = delete;
  WatermarkStamper& operator=(const WatermarkStamper&) = delete;

  // From the operator's open(): creates the generator and starts the
  // periodic emission (pipeline.auto-watermark-interval).
  void open(OperatorContext& context, Output<T>& out) {
    context_ = &context;
    out_ = &out;
    generator_ = strategy_.createWatermarkGenerator(*this);
    periodicOnly_ = generator_->emitsOnlyPeriodically();
    ingestionTime_ = strategy_.isIngestionTime();
    interval_ = context.configuration().get(options::kPipelineAutoWatermarkInterval).count();
    if (interval_ > 0) schedule();
  }
  // The timestamp of a record holding `value`; `timestamp` is the one it
  // has, or kMinTimestamp.
  int64_t timestampOf(const T& value, int64_t timestamp) const {
    if (ingestionTime_) return context_->clock().currentTimeMillis();
    const auto& assign = strategy_.timestampAssigner();
    return assign ? assign(value, timestamp) : timestamp;
  }
  // The generator sees an event, after (or, when emitsOnlyPeriodically(),
  // before) it went out with its timestamp.
  void onEvent(const T& value, int64_t timestamp) { generator_->onEvent(value, timestamp, *this); }
  bool emitsOnlyPeriodically() const { return periodicOnly_; }
  // The end of event time (a bounded input's end, a drain): the maximum
  // watermark, once.
  void emitMaxWatermark() {
    if (current_ == kMaxTimestamp) return;
    current_ = kMaxTimestamp;
    markActive();
    out_->emitWatermark(Watermark::max());
  }
  // The operator's finish(): a last periodic emission, so nothing the
  // generator knows is lost.
  void finish() {
    if (generator_) generator_->onPeriodicEmit(*this);
  }

 private:
  void schedule() {
    const int64_t next = context_->clock().currentTimeMillis() + interval_;
    context_->registerProcessingTimer(next, [this](int64_t) {
      generator_->onPeriodicEmit(*this);
      schedule();
    });
  }
  // WatermarkOutput
  void emitWatermark(Watermark watermark) override {
    if (watermark.timestamp <= current_) return;  // never backwards
    current_ = watermark.timestamp;
    markActive();
    out_->emitWatermark(watermark);
  }
  void markIdle() override {
    if (idle_) return;
    idle_ = true;
    out_->emitWatermarkStatus(WatermarkStatus::kIdle);
  }
  void markActive() override {
    if (!idle_) return;
    idle_ = false;
    out_->emitWatermarkStatus(WatermarkStatus::kActive);
  }
  // WatermarkGeneratorContext
  const Clock& clock() const override { return context_->clock(); }

  WatermarkStrategy<T> strategy_;
  std::unique_ptr<WatermarkGenerator<T>> generator_;
  OperatorContext* context_ = nullptr;
  Output<T>* out_ = nullptr;
  int64_t interval_ = 0;
  bool periodicOnly_ = false;
  bool ingestionTime_ = false;
  int64_t current_ = kMinTimestamp;
  bool idle_ = false;
};

// Assigns timestamps and runs the watermark generator of one subtask
// (Flink's TimestampsAndWatermarksOperator, which assignTimestampsAndWatermarks
// adds). Watermarks from upstream are not forwarded, except the final
// maximum one. A source given a strategy (fromSource(source, strategy,
// name)) does the same itself, as Flink's does (source.h).
template <class T>
class TimestampsAndWatermarksOperator final : public StreamOperatorBase, public Input<T> {
 public:
  explicit TimestampsAndWatermarksOperator(WatermarkStrategy<T> strategy)
      : stamper_(std::move(strategy)) {}

  void setup(OperatorContext& context, OutputBase& output) override {
    StreamOperatorBase::setup(context, output);
    out_ = &static_cast<Output<T>&>(output);
  }
  int numberOfInputs() const override { return 1; }
  void* inputPointer(int) override { return static_cast<Input<T>*>(this); }
  bool emitsOnePerInput() const override { return true; }

  void open() override { stamper_.open(context(), *out_); }

  void processElement(const StreamRecord<T>& r) override {
    const int64_t ts = stamper_.timestampOf(r.value, r.hasTimestamp ? r.timestamp : kMinTimestamp);
    // Like Flink, stamp the record in place and pass it on rather than
    // copying the value. Every record that reaches an operator is a mutable
    // object of its producer (an operator's output record, a deserialized
    // network record), and a fan-out hands the same record to its other
    // outputs afterwards, so the old timestamp is put back.
    auto& stamped = const_cast<StreamRecord<T>&>(r);
    const int64_t oldTimestamp = stamped.timestamp;
    const bool hadTimestamp = stamped.hasTimestamp;
    stamped.setTimestamp(ts);
    try {
      out_->collect(stamped);
    } catch (...) {
      stamped.timestamp = oldTimestamp;
      stamped.hasTimestamp = hadTimestamp;
      throw;
    }
    stamped.timestamp = oldTimestamp;
    stamped.hasTimestamp = hadTimestamp;
    stamper_.onEvent(r.value, ts);
  }

  void processWatermark(int, Watermark watermark) override {
    // Only the end of input passes: it makes every window and timer fire.
    if (watermark.timestamp == kMaxTimestamp) stamper_.emitMaxWatermark();
  }
  void processWatermarkStatus(int, WatermarkStatus) override {}

  void finish() override { stamper_.finish(); }

 private:
  WatermarkStamper<T> stamper_;
  Output<T>* out_ = nullptr;
};

}  // namespace internal
}  // namespace sluice
