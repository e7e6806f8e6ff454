// expect-ok
// The control case: the same shape with the right signature compiles, so the
// failures above are about the signature and nothing else.
#include <sluice/sluice.h>

int main() {
  sluice::StreamExecutionEnvironment env;
  env.fromSequence(1, 10).map([](const int64_t& x) { return x * 2; });
  env.fromSequence(1, 10).filter([](int64_t x) { return x > 2; });
  env.fromSequence(1, 10).flatMap(
      [](int64_t x, sluice::Collector<int64_t>& out) { out.collect(x); });
  env.fromSequence(1, 10).keyBy([](int64_t x) { return x % 2; }).reduce([](int64_t a, int64_t b) {
    return a + b;
  });
}
