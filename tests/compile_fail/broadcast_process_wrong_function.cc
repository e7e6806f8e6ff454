// expect: BroadcastConnectedStream<IN1, IN2>::process\(f\) accepts
// A broadcast-connected stream processed with a CoProcessFunction.
#include <cstdint>
#include <string>

#include <sluice/broadcast.h>
#include <sluice/sluice.h>

struct NotABroadcastFunction final : sluice::CoProcessFunction<int64_t, std::string, int64_t> {
  void processElement1(const int64_t&, Context&, sluice::Collector<int64_t>&) override {}
  void processElement2(const std::string&, Context&, sluice::Collector<int64_t>&) override {}
};

int main() {
  sluice::StreamExecutionEnvironment env;
  sluice::MapStateDescriptor<std::string, int64_t> desc("rules");
  env.fromSequence(1, 10)
      .connect(env.fromElements(std::string("rule")).broadcast(desc))
      .process(NotABroadcastFunction());
}
