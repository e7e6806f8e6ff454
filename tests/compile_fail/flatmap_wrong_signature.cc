// expect: DataStream<T>::flatMap\(f\) accepts:
// A flatMap function without a Collector.
#include <sluice/sluice.h>

int main() {
  sluice::StreamExecutionEnvironment env;
  env.fromSequence(1, 10).flatMap([](int64_t x) { return x; });
}
