// expect: a BroadcastProcessFunction can only be used on a non-keyed stream
// A keyed stream connected to a broadcast stream needs a KeyedBroadcastProcessFunction.
#include <cstdint>
#include <string>

#include <sluice/broadcast.h>
#include <sluice/sluice.h>

struct NonKeyed final : sluice::BroadcastProcessFunction<int64_t, std::string, int64_t> {
  void processElement(const int64_t&, ReadOnlyContext&, sluice::Collector<int64_t>&) override {}
  void processBroadcastElement(const std::string&, Context&, sluice::Collector<int64_t>&) override {
  }
};

int main() {
  sluice::StreamExecutionEnvironment env;
  sluice::MapStateDescriptor<std::string, int64_t> desc("rules");
  env.fromSequence(1, 10)
      .keyBy([](const int64_t& v) { return v % 3; })
      .connect(env.fromElements(std::string("rule")).broadcast(desc))
      .process(NonKeyed());
}
