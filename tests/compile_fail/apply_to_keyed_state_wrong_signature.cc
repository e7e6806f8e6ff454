// expect: applyToKeyedState\(desc, fn\): fn must be callable as fn\(const KS& key, S& state\)
// The visitor takes the state by the wrong type (ListState for a value state).
#include <cstdint>
#include <string>

#include <sluice/broadcast.h>
#include <sluice/sluice.h>

struct Visitor final
    : sluice::KeyedBroadcastProcessFunction<int64_t, int64_t, std::string, int64_t> {
  void processElement(const int64_t&, ReadOnlyContext&, sluice::Collector<int64_t>&) override {}
  void processBroadcastElement(const std::string&, Context& ctx,
                               sluice::Collector<int64_t>&) override {
    ctx.applyToKeyedState(sluice::ValueStateDescriptor<int64_t>("count"),
                          [](const int64_t&, sluice::ListState<int64_t>&) {});
  }
};

int main() {
  sluice::StreamExecutionEnvironment env;
  sluice::MapStateDescriptor<std::string, int64_t> desc("rules");
  env.fromSequence(1, 10)
      .keyBy([](const int64_t& v) { return v % 3; })
      .connect(env.fromElements(std::string("rule")).broadcast(desc))
      .process(Visitor());
}
